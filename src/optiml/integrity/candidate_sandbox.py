"""Where a candidate process runs: a pid, network, IPC and mount namespace of its own, seeing only what it needs.

The judge (inside its own sandbox, :mod:`optiml.integrity.sandbox`) starts every candidate process
— and the calibration process it measures its round trip on — through :func:`candidate_argv`::

    setpriv --pdeathsig KILL -- unshare --user --keep-caps --pid --fork --kill-child --net --ipc --mount --
        python -I -S jail.py --workdir DIR --stage STAGE --view PATH... -- python -I -S candidate_process.py …

* **Its own pid namespace**: the judge, the calibration process and the other candidates do not
  exist for it — no pid to signal or ptrace; its ``/proc`` is a fresh one of its own namespace (on a
  GPU, where CUDA needs one), listing only itself and its jail — and whatever it starts dies with it
  (``--kill-child``; ``setpriv --pdeathsig`` ends it if the judge dies).
* **Its own filesystem view** (:func:`candidate_view`): the system's libraries (``/usr``, ``/lib*``,
  ``/bin``), Python's standard library, the shim (``candidate_process.py`` alone, not the package),
  ``libcudart``, the driver's libraries, ``/dev/nvidia*`` (and on a GPU ``/sys``, its own ``/proc``
  and the ``LD_LIBRARY_PATH`` folders, where a task's libraries may be found), and its own directory
  ``DIR``: no user
  ``/tmp``, no home, no compile cache, no run store, no other kernel's files, no judge's folder.
* **No network, its own SysV IPC.** CUDA IPC works across all of these (measured on the H200).

The judge runs with no capabilities, so the user namespace it may create has no uid mapping
(mapping uid 0 needs ``CAP_SETFCAP``); nothing can be *created* there, only mounted, so the judge
makes the view's mount points first (``jail.prepare_stage``). Where the host allows none of this,
:func:`probe_candidate_isolation` says why and the candidate runs beside the judge — reported in
the task notes, never silently.
"""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from optiml.integrity.sandbox import SYSTEM_VIEW

JAIL = Path(__file__).resolve().with_name("jail.py")
_PROBE_TIMEOUT_S = 20.0
OPTIONAL = "?"  # jail.OPTIONAL: shown where it can be mounted, an empty folder where not
OWN_PROC = "/proc"  # jail.OWN_PROC: a procfs of the candidate's own pid namespace, never the host's
#: what a GPU needs beyond device nodes and libraries: topology and driver parameters (``/sys``), and a
#: ``/proc`` of the candidate's own pid namespace — its own processes, the driver's folders — without which
#: CUDA fails to start with error 304 (every start, H100 2026-12-05, ``sandbox_cuda_probe_h100.json``); optional:
#: where the kernel refuses the mount, the candidate runs unconfined (:class:`CandidateIsolation` says so)
GPU_SYSTEM_VIEW = (OPTIONAL + "/sys", OPTIONAL + OWN_PROC)


@dataclass(frozen=True)
class CandidateIsolation:
    """How candidate processes run on this host, found by running the recipe once."""

    isolated: bool
    note: str  # one line for the task notes

    @property
    def backend(self) -> str:
        return "unshare+view" if self.isolated else "none"


def python_view() -> list[str]:
    """What ``python -I -S`` needs: the real interpreter, its standard library and shared libraries."""
    paths = [os.path.realpath(sys.executable)]
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}  # never a virtual environment's packages
    for key in ("stdlib", "platstdlib"):
        paths.append(sysconfig.get_paths(vars=base)[key])
    libdir = sysconfig.get_config_var("LIBDIR")
    if isinstance(libdir, str) and libdir:
        paths.append(libdir)
    return paths


def driver_libraries() -> list[str]:
    """Folders of the CUDA driver's libraries as this process maps them (``libcuda``, ``libnvidia-*``):
    the driver loads more of them (the PTX JIT) later, from the same folder."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    folders = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip() if line.count(" ") >= 5 else ""
                name = os.path.basename(path)
                if path.startswith("/") and (name.startswith("libcuda.") or name.startswith("libnvidia-")):
                    folders.add(os.path.dirname(path))
    except OSError:
        return []
    return sorted(folders)


def library_path() -> list[str]:
    """The folders of ``LD_LIBRARY_PATH``, where the loader finds a task's libraries (``-lcublas``: the
    candidate's shared object has no run path) when ``ld.so.cache`` does not list them."""
    return [folder for folder in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if folder]


def candidate_view(shim: str, cudart: str | None) -> tuple[str, ...]:
    """Every path a candidate process sees besides its own directory, read-only, without repeats."""
    paths = [*SYSTEM_VIEW, *python_view(), shim]
    if cudart is not None:
        paths += [cudart, *driver_libraries(), *sorted(glob.glob("/dev/nvidia*")), *GPU_SYSTEM_VIEW]
        paths += [OPTIONAL + folder for folder in library_path() if os.path.isabs(folder)]
    kept: list[str] = []
    for listed in paths:
        path = listed.removeprefix(OPTIONAL)
        covered = any(path == k or path.startswith(k.removeprefix(OPTIONAL).rstrip("/") + "/") for k in kept)
        if os.path.lexists(path) and not covered:
            kept.append(listed)
    return tuple(kept)


def candidate_argv(argv: Sequence[str], directory: Path, stage: Path, view: Sequence[str]) -> list[str]:
    """``argv`` wrapped in the candidate's namespaces and view; the caller has run ``prepare_stage``."""
    prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
    prefix += ["unshare", "--user", "--keep-caps", "--pid", "--fork", "--kill-child", "--net", "--ipc", "--mount"]
    jail = [os.path.realpath(sys.executable), "-I", "-S", str(JAIL), "--workdir", str(directory)]
    jail += ["--stage", str(stage)]
    for path in view:
        jail += ["--view", path]
    return [*prefix, "--", *jail, "--", *argv]


_prepared: set[tuple[Path, tuple[str, ...]]] = set()
_prepared_lock = threading.Lock()


def prepare(directory: Path, stage: Path, view: Sequence[str]) -> None:
    """The candidate's directory and the mount points of its view (as the judge: see the module doc).

    A stage is made once per (stage, view) in this process and shared by every candidate that uses it
    (each mounts it in a namespace of its own); a later candidate only adds its directory's mount point.
    """
    from optiml.integrity import jail

    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = (stage.resolve(), tuple(view))
    with _prepared_lock:
        if key in _prepared and stage.is_dir():
            os.makedirs(str(key[0]) + os.path.realpath(directory), exist_ok=True)
            return
        jail.prepare_stage(str(stage), str(directory), list(view))
        _prepared.add(key)


@cache
def probe_candidate_isolation() -> CandidateIsolation:
    """Whether :func:`candidate_argv` works here: ``python -I -S`` run once in it, checking that it
    sees no other process and no file outside its view."""
    if shutil.which("unshare") is None:
        return CandidateIsolation(False, "candidate isolation unavailable: unshare (util-linux) not installed")
    check = (  # its own /proc lists only itself and its jail (pid 1); the file outside the view is not there
        "import os,sys; pids={p for p in (os.listdir('/proc') if os.path.isdir('/proc') else []) if p.isdigit()}; "
        "sys.exit(0 if pids <= {'1', str(os.getpid())} and not os.path.exists(sys.argv[1]) else 3)"
    )
    with tempfile.TemporaryDirectory(prefix="optiml-probe-") as tmp:
        root = Path(tmp).resolve()
        directory, stage, hidden = root / "candidate", root / "stage", root / "hidden"
        hidden.write_text("outside the view")
        view = [*SYSTEM_VIEW, *python_view(), OPTIONAL + OWN_PROC]
        try:
            prepare(directory, stage, view)
            done = subprocess.run(
                candidate_argv(
                    [os.path.realpath(sys.executable), "-I", "-S", "-c", check, str(hidden)], directory, stage, view
                ),
                capture_output=True,
                text=True,
                timeout=_PROBE_TIMEOUT_S,
                env={"PATH": os.environ.get("PATH", os.defpath)},
            )
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return CandidateIsolation(False, f"candidate isolation unavailable: {exc}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return CandidateIsolation(False, f"candidate isolation unavailable: {last[:200]}")
    return CandidateIsolation(
        True,
        "candidate processes: own pid, network, IPC and mount namespaces; they see only system libraries, "
        "Python's standard library, the CUDA runtime and driver, GPU device nodes, a /proc of their own namespace "
        "and their own directory",
    )
