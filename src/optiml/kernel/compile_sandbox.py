"""Run nvcc in the same sandbox as candidate execution, with only the toolkit in sight.

A candidate's source is untrusted input to nvcc, and nvcc reads files: ``#include "/etc/passwd"``
or an ``.incbin`` in inline assembly embeds any readable file into the library. So nvcc runs
through :func:`optiml.integrity.sandbox.build_worker_launch` — scrubbed environment, resource
limits, no network, own pid namespace — with a *view* instead of the whole filesystem: the CUDA
toolkit, the host compiler, system headers and libraries (:data:`SYSTEM_VIEW`), the folder of
``optiml.h`` and the candidate's build folder (the only writable place). Everything else does
not exist inside, so such a read fails as "No such file or directory".

A compile's memory is bounded as a whole: nvcc runs its host and device chains side by side
(:mod:`optiml.kernel.nvcc_steps`), so a per-process limit would let two front ends take twice it.
:func:`run_tool` watches the resident memory of the tool and all its descendants together and kills
the lot past :func:`compile_memory_budget` (half of physical memory); each process's ``RLIMIT_DATA``
is that budget too, a hard stop between two looks. On Ctrl-C the command ends every tool it started
(:mod:`optiml.integrity.children`), whatever group or namespace it runs in.

Where the host allows no mount namespace, nvcc still gets the scrubbed environment, the limits
and the network namespace if there is one, and the result says it was *not* sandboxed
(:attr:`CompileResult.sandbox`); ``CompilerConfig(sandbox=True)`` refuses to compile instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from optiml.errors import ToolchainError
from optiml.integrity import children
from optiml.integrity.sandbox import (
    GIB,
    SYSTEM_VIEW,
    ResourceLimits,
    WorkerLaunch,
    build_worker_launch,
    kill_group,
    probe_view,
)

NOT_SANDBOXED = "none"
#: how often :func:`run_tool` adds up a compile's resident memory
MEMORY_POLL_S = 0.25  # a scan of /proc costs ~4 ms with 150 processes


def compile_memory_budget() -> int | None:
    """The memory one compile may use, all its processes together: half of physical memory (cicc on a
    template-heavy candidate needs a few GiB; one that expands without end is stopped well before the
    machine swaps). None where the size of memory is unknown."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2)
    except (ValueError, OSError, AttributeError):
        return None


#: nvcc runs this much nicer than OptiML: a search compiles on every core while the GPU times candidates and
#: references, and a host-bound call (a ``torch.compile`` reference's launch, ~0.1-0.3 ms) read up to 1.6x slower
#: beside busy CPUs (``benchmarks/results/compile_clock_suspects_*``); builds take the cycles the clock leaves.
COMPILE_NICENESS = 10


def compile_limits() -> ResourceLimits:
    """nvcc's rlimits: nothing needs hours; each process's data segment within the whole compile's budget; and
    :data:`COMPILE_NICENESS`."""
    return ResourceLimits(
        cpu_seconds=600,
        file_size_bytes=GIB,
        max_processes=512,
        memory_bytes=compile_memory_budget(),
        niceness=COMPILE_NICENESS,
    )


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


def run_tool(
    argv: list[str],
    workdir: Path,
    view: Sequence[str],
    timeout_s: float,
    *,
    sandbox: bool | None,
    memory_bytes: int | None = None,
) -> ToolRun:
    """Run ``argv`` in ``workdir`` sandboxed with ``view``; ``sandbox``: True required, False off, None if possible.
    ``memory_bytes``: the resident memory of the tool and its children together (default
    :func:`compile_memory_budget`); past it, or past ``timeout_s``, its process group is killed."""
    ok, why = sandbox_available() if sandbox is not False else (False, "disabled")
    if sandbox is True and not ok:
        raise ToolchainError(f"the compile sandbox is required but unavailable here: {why}")
    limits = compile_limits()
    budget = memory_bytes if memory_bytes is not None else limits.memory_bytes
    launch: WorkerLaunch = build_worker_launch(
        argv,
        workdir=workdir,
        limits=limits,
        isolate_filesystem=ok,
        view=view if ok else (),
    )
    backend = launch.report.backend if ok else NOT_SANDBOXED
    with children.launching():
        try:
            proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as exc:
            return ToolRun(f"cannot start {argv[0]}: {exc}", None, False, backend)
    watch = _MemoryWatch(proc, budget) if budget is not None else None
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return ToolRun(f"timed out after {timeout_s:.0f} s", None, True, backend)
    except BaseException:  # Ctrl-C in this thread: the tool leads its own session, so stop it here
        kill_group(proc)
        raise
    finally:
        if watch is not None:
            watch.stop()
    if children.ending():  # killed because the command is ending: not a result to keep
        raise children.Ending(f"{argv[0]} was stopped: the command is ending")
    text = out.decode(errors="replace")
    if watch is not None and watch.exceeded:
        return ToolRun(
            f"{text}\nstopped: the compile used {watch.exceeded / GIB:.1f} GiB of memory, all its processes together, "
            f"over its budget of {watch.budget / GIB:.1f} GiB (half of this machine's memory)",
            None,
            False,
            backend,
        )
    if ok and proc.returncode == 126 and "optiml jail:" in text:  # the sandbox itself failed
        raise ToolchainError(f"the compile sandbox failed: {text.strip().splitlines()[-1]}")
    return ToolRun(text, proc.returncode, False, backend)


class _MemoryWatch:
    """Adds up the resident memory of a process and its descendants every :data:`MEMORY_POLL_S`; kills its
    process group (which it leads) once the sum passes ``budget``, and keeps that sum in ``exceeded``."""

    def __init__(self, proc: subprocess.Popen[bytes], budget: int) -> None:
        self.proc, self.budget = proc, budget
        self.exceeded = 0
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optiml-compile-memory", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(MEMORY_POLL_S):
            used = children.resident_bytes(self.proc.pid)
            if used > self.budget and self.proc.returncode is None:
                self.exceeded = used
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    self.proc.kill()
                return


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
