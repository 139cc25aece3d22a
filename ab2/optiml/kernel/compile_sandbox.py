"""Run nvcc in the same sandbox as candidate execution, with only the toolkit in sight.

A candidate's source is untrusted input to nvcc, and nvcc reads files: ``#include "/etc/passwd"``
or an ``.incbin`` in inline assembly embeds any readable file into the library. So nvcc runs
through :func:`optiml.integrity.sandbox.build_worker_launch` — scrubbed environment, resource
limits, no network, own pid namespace — with a *view* instead of the whole filesystem: the CUDA
toolkit, the host compiler, system headers and libraries (:data:`SYSTEM_VIEW`), the folder of
``optiml.h`` and the candidate's build folder (the only writable place). Everything else does
not exist inside, so such a read fails as "No such file or directory".

Where the host allows no mount namespace, nvcc still gets the scrubbed environment, the limits
and the network namespace if there is one, and the result says it was *not* sandboxed
(:attr:`CompileResult.sandbox`); ``CompilerConfig(sandbox=True)`` refuses to compile instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from optiml.errors import ToolchainError
from optiml.integrity.sandbox import (
    GIB,
    SYSTEM_VIEW,
    ResourceLimits,
    WorkerLaunch,
    build_worker_launch,
    kill_group,
    probe_view,
)

#: nvcc's own limits: cicc on a template-heavy candidate needs a few GiB, nothing needs hours
COMPILE_LIMITS = ResourceLimits(cpu_seconds=600, file_size_bytes=GIB, max_processes=512)
NOT_SANDBOXED = "none"


@lru_cache(maxsize=4)
def toolkit_root(nvcc: str) -> Path | None:
    """The CUDA toolkit folder ``nvcc`` really runs from (``nvcc`` may be a wrapper script)."""
    try:
        out = subprocess.run(
            [nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("#$ _HERE_="):
            return Path(line.split("=", 1)[1].strip()).resolve().parent
    return None


def host_compiler_prefix() -> Path | None:
    """The install prefix of the ``gcc`` nvcc will call, when it lies outside the system view."""
    found = shutil.which("gcc") or shutil.which("cc")
    if found is None:
        return None
    prefix = Path(found).resolve().parent.parent
    return None if any(_within(prefix, Path(p)) for p in SYSTEM_VIEW) else prefix


def compile_view(nvcc: str, include_dirs: Sequence[Path], extra: Sequence[str] = ()) -> tuple[str, ...]:
    """Every path nvcc may read: system view, toolkit, host compiler, our headers, ``extra``."""
    paths = list(SYSTEM_VIEW)
    root = toolkit_root(nvcc)
    if root is not None:  # the pip wheels split one toolkit over site-packages/nvidia/<part>: take them all
        paths.append(str(root.parent if root.parent.name == "nvidia" else root))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            paths.append(str(Path(os.environ[var]).resolve()))
    paths.append(str(Path(nvcc).resolve().parent))
    prefix = host_compiler_prefix()
    if prefix is not None:
        paths.append(str(prefix))
    paths += [str(Path(d).resolve()) for d in include_dirs]
    paths += [str(Path(p).resolve()) for p in extra]
    return tuple(dict.fromkeys(paths))


@dataclass(frozen=True)
class ToolRun:
    output: str  # stdout + stderr
    returncode: int | None  # None: timed out (process group killed) or could not start
    timed_out: bool
    sandbox: str  # the isolation backend, or "none"


def sandbox_available() -> tuple[bool, str]:
    """Whether nvcc can run in the view sandbox here; the reason when it cannot."""
    return probe_view()


def run_tool(argv: list[str], workdir: Path, view: Sequence[str], timeout_s: float, *, sandbox: bool | None) -> ToolRun:
    """Run ``argv`` in ``workdir`` sandboxed with ``view``; ``sandbox``: True required, False off, None if possible."""
    ok, why = sandbox_available() if sandbox is not False else (False, "disabled")
    if sandbox is True and not ok:
        raise ToolchainError(f"the compile sandbox is required but unavailable here: {why}")
    launch: WorkerLaunch = build_worker_launch(
        argv,
        workdir=workdir,
        limits=COMPILE_LIMITS,
        isolate_filesystem=ok,
        view=view if ok else (),
    )
    backend = launch.report.backend if ok else NOT_SANDBOXED
    try:
        proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        return ToolRun(f"cannot start {argv[0]}: {exc}", None, False, backend)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return ToolRun(f"timed out after {timeout_s:.0f} s", None, True, backend)
    text = out.decode(errors="replace")
    if ok and proc.returncode == 126 and "optiml jail:" in text:  # the sandbox itself failed
        raise ToolchainError(f"the compile sandbox failed: {text.strip().splitlines()[-1]}")
    return ToolRun(text, proc.returncode, False, backend)


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
