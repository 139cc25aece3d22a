"""Launch the GPU worker isolated: scrubbed environment, own directory, resource limits, namespaces.

Candidate host code runs inside the worker with the user's privileges, so the worker is started
as an untrusted process:

* **Environment** — an allow-list (``PATH``, ``LD_LIBRARY_PATH``, ``PYTHONPATH``, ``LANG``/``LC_*``,
  ``TERM``, ``TZ``, ``CUDA_*``, ``NVIDIA_*``, a few torch/threading knobs); anything that looks like a
  secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSW*``, ``AWS_*``, ``OPENAI_*``, ``ANTHROPIC_*`` …)
  is dropped even when a prefix would keep it. ``HOME``, ``TMPDIR``, ``TMP`` and ``TEMP`` point at
  the worker's directory, which is also its working directory.
* **Resource limits** (:class:`ResourceLimits`, set in the child before it executes): CPU time,
  file size, data-segment memory, processes, no core dumps.
* **Namespaces**, where the host allows them (:func:`probe_isolation` tries each recipe once, for
  real, and caches the answer), the first that works:

  - ``unshare`` + :mod:`optiml.integrity.jail`: util-linux ``unshare`` (``--map-root-user`` when
    not root) makes net, mount and pid namespaces with a fresh ``/proc``; the jail remounts
    everything but the worker's directory read-only, gives it a private ``/dev/shm`` and drops all
    capabilities. ``--kill-child`` ties the namespace to the ``unshare`` process, so killing the
    launched process (or its group) ends everything inside;
  - ``bwrap`` (bubblewrap), for hosts that allow user namespaces only to it (Ubuntu's AppArmor
    policy): the same, with ``/`` bound read-only and a minimal ``/dev`` plus the ``/dev/nvidia*``
    nodes. ``--die-with-parent`` ends the sandbox with its parent — which the kernel takes to be
    the *thread* that started it, so start the worker from a long-lived thread;
  - ``unshare --net`` alone, when mount namespaces are refused: no network, nothing else;
  - nothing, when the host allows no namespaces: reported as such, never silently.

  With ``view`` (the compiler's sandbox) the filesystem is not just read-only but *absent*: the
  process sees only the listed paths (the toolkit, the host compiler, system headers and
  libraries), read-only, plus its own directory and a private ``/tmp`` — see
  :func:`optiml.integrity.jail.build_view`. :func:`probe_view` checks once that this works here.

  A private network namespace has only a loopback device of its own, so the worker cannot reach
  the orchestrator's loopback servers or the internet. A private pid namespace with its own
  ``/proc`` hides other processes — and their ``/proc/<pid>/environ``, where the orchestrator's
  API keys live. GPU device nodes stay usable in all recipes.

Why no ``RLIMIT_AS``: the CUDA driver reserves very large virtual address ranges (unified
addressing), so an address-space limit breaks CUDA initialisation. ``RLIMIT_DATA`` limits what
is actually allocated (heap and private writable mappings) and leaves those reservations alone.
``RLIMIT_NPROC`` counts every process and thread *of the user*, not of the worker, so the limit
is set to the user's current count plus ``max_processes``; the kernel never applies it to root.
``RLIMIT_CPU`` counts the worker's whole life (it serves many candidates); a single hang is the
client's wall-clock timeout, this is the backstop.

Under a pid namespace the worker runs as a child of an init process, so a worker killed by
signal N is reported as exit status 128 + N; :meth:`WorkerLaunch.describe_exit` decodes both forms.

Inside the worker, each candidate process gets a sandbox of its own — its own pid, network, IPC and
mount namespaces and a view of only what it needs: :mod:`optiml.integrity.candidate_sandbox`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import resource
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from optiml.errors import ConfigError
from optiml.redact import SECRET_NAME


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


GIB = 1 << 30
_PROBE_TIMEOUT_S = 20.0
_CPU_GRACE_S = 10
_KEEP_EXACT = _words(
    "PATH LD_LIBRARY_PATH PYTHONPATH PYTHONHOME LANG LANGUAGE TERM TZ VIRTUAL_ENV CONDA_PREFIX "
    "OMP_NUM_THREADS MKL_NUM_THREADS OPENBLAS_NUM_THREADS PYTORCH_CUDA_ALLOC_CONF "
    "PYTORCH_NVML_BASED_CUDA_CHECK TORCH_CUDA_ARCH_LIST"
)
_KEEP_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "CUBLAS_", "CUDNN_")
_SECRET = SECRET_NAME
_JAIL = Path(__file__).with_name("jail.py")


def _default_memory() -> int | None:
    """Three quarters of physical memory: room for KernelBench-sized inputs, not for the machine."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 3 // 4)
    except (ValueError, OSError, AttributeError):
        return None


@dataclass(frozen=True)
class ResourceLimits:
    """rlimits for the worker process and everything it starts; ``None`` leaves one unlimited."""

    cpu_seconds: int | None = 3600  # RLIMIT_CPU over the worker's life
    file_size_bytes: int | None = GIB  # RLIMIT_FSIZE: largest file it may write (SIGXFSZ beyond)
    memory_bytes: int | None = field(default_factory=_default_memory)  # RLIMIT_DATA (not RLIMIT_AS)
    max_processes: int | None = 2048  # RLIMIT_NPROC headroom over the user's current process count
    core_bytes: int = 0  # RLIMIT_CORE: no core dumps from crashing candidates
    niceness: int = 0  # added to the scheduling niceness (os.nice): background work yields to the clock

    def describe(self, nproc_enforced: bool) -> str:
        parts = [
            f"cpu {self.cpu_seconds} s" if self.cpu_seconds is not None else "cpu unlimited",
            f"file {_size(self.file_size_bytes)}",
            f"data {_size(self.memory_bytes)}",
        ]
        if self.max_processes is None:
            parts.append("processes unlimited")
        else:
            parts.append(f"processes +{self.max_processes}" + ("" if nproc_enforced else " (not enforced for root)"))
        parts.append("no core dumps" if self.core_bytes == 0 else f"core {_size(self.core_bytes)}")
        return ", ".join(parts)


def _size(value: int | None) -> str:
    if value is None:
        return "unlimited"
    return f"{value / GIB:.1f} GiB" if value >= GIB else f"{value / (1 << 20):.0f} MiB"


@dataclass(frozen=True)
class IsolationSupport:
    """What this host lets us do, found by actually running each recipe once."""

    is_root: bool
    bwrap: bool  # the full bubblewrap recipe works
    unshare_jail: bool  # unshare with mount + pid namespaces and the jail works
    unshare_net: bool  # unshare --net alone works
    rlimits: tuple[str, ...]
    notes: tuple[str, ...] = ()  # why a recipe failed, one line each

    @property
    def network(self) -> bool:
        return self.bwrap or self.unshare_jail or self.unshare_net

    @property
    def filesystem(self) -> bool:
        return self.bwrap or self.unshare_jail

    @property
    def nproc_enforced(self) -> bool:
        return not self.is_root

    def describe(self) -> str:
        recipes = [
            name
            for name, ok in (
                ("bwrap", self.bwrap),
                ("unshare+jail", self.unshare_jail),
                ("unshare --net", self.unshare_net),
            )
            if ok
        ]
        text = f"namespaces: {', '.join(recipes) or 'none'}; rlimits: {', '.join(self.rlimits) or 'none'}"
        text += "; running as root" if self.is_root else ""
        return text + "".join(f"; {note}" for note in self.notes)


@dataclass(frozen=True)
class IsolationReport:
    """What isolation is in force for one launch, for display next to results."""

    backend: str  # "bwrap", "unshare+jail", "unshare --net" or "none"
    network: str
    filesystem: str
    processes: str
    environment: str
    limits: str
    dropped_env: tuple[str, ...] = ()  # names only, never values

    def lines(self) -> list[str]:
        return [
            f"network: {self.network}",
            f"filesystem: {self.filesystem}",
            f"processes: {self.processes}",
            f"environment: {self.environment}",
            f"limits: {self.limits}",
        ]

    def summary(self) -> str:
        return f"worker isolation ({self.backend}): " + "; ".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "network": self.network,
            "filesystem": self.filesystem,
            "processes": self.processes,
            "environment": self.environment,
            "limits": self.limits,
            "dropped_env": list(self.dropped_env),
        }

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class WorkerLaunch:
    """Everything ``subprocess.Popen`` needs to start the worker isolated."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    preexec_fn: Callable[[], None]
    report: IsolationReport
    signals_as_exit_codes: bool = False  # under an init process: signal N arrives as status 128 + N

    def popen(self, **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start it (``stdin``/``stdout``/``stderr`` and the like go in ``kwargs``)."""
        return subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, preexec_fn=self.preexec_fn, **kwargs)

    def describe_exit(self, returncode: int) -> str:
        """``killed by SIGSEGV`` or ``exited with code 3``, whichever way the status arrived."""
        number = -returncode if returncode < 0 else returncode - 128 if self.signals_as_exit_codes else 0
        if returncode < 0 or (self.signals_as_exit_codes and 128 < returncode < 128 + signal.NSIG):
            try:
                return f"killed by {signal.Signals(number).name}"
            except ValueError:
                return f"killed by signal {number}"
        return f"exited with code {returncode}"


def scrub_environment(environ: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The allow-listed subset of ``environ`` and the sorted names of what was dropped."""
    kept, dropped = {}, []
    for name, value in environ.items():
        allowed = name in _KEEP_EXACT or name.startswith(_KEEP_PREFIXES)
        if allowed and not _SECRET.search(name):
            kept[name] = value
        else:
            dropped.append(name)
    return kept, tuple(sorted(dropped))


def build_worker_launch(
    argv: list[str],
    *,
    workdir: Path,
    limits: ResourceLimits,
    isolate_network: bool = True,
    extra_env: Mapping[str, str] | None = None,
    isolate_filesystem: bool = True,
    support: IsolationSupport | None = None,
    view: Sequence[str] = (),
) -> WorkerLaunch:
    """How to start ``argv`` as an isolated worker living in ``workdir`` (which must exist).

    ``extra_env`` is added after scrubbing (the caller's own settings, such as ``PYTHONPATH``);
    a name that looks like a secret is refused with :class:`ConfigError`. ``isolate_network`` and
    ``isolate_filesystem`` ask for namespaces; what the host actually grants is in ``report``.
    ``support`` defaults to :func:`probe_isolation` (tests pass a narrower one to pick a recipe).
    ``view`` (absolute paths) replaces the read-only whole filesystem by only these paths; the
    caller checks :func:`probe_view` first (a host may allow the jail but refuse the new root).
    """
    if not argv:
        raise ConfigError("the worker command is empty")
    workdir = Path(workdir).resolve()
    if not workdir.is_dir():
        raise ConfigError(f"worker directory {workdir} does not exist")
    env, dropped = scrub_environment(os.environ)
    for name, value in (extra_env or {}).items():
        if _SECRET.search(name):
            raise ConfigError(f"refusing to pass {name} to the GPU worker: it looks like a secret")
        env[name] = value
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user_site and os.path.isdir(user_site):  # HOME moves, so the user's site-packages would vanish
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), user_site) if p)
    for name in ("HOME", "TMPDIR", "TMP", "TEMP"):
        env[name] = str(workdir)
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    support = support or probe_isolation()
    wrapped, backend = _wrap(argv, workdir, support, isolate_network, isolate_filesystem, tuple(view))
    report = IsolationReport(
        backend=backend,
        network=_network_text(backend, isolate_network, support),
        filesystem=_filesystem_text(backend, isolate_filesystem, workdir, support, bool(view)),
        processes="own pid namespace: other processes invisible"
        if backend in ("bwrap", "unshare+jail")
        else "shared pid namespace: other processes are visible",
        environment=f"allow-list: {len(env)} variables set, {len(dropped)} dropped",
        limits=limits.describe(support.nproc_enforced),
        dropped_env=dropped,
    )
    return WorkerLaunch(
        argv=wrapped,
        env=env,
        cwd=workdir,
        preexec_fn=_limiter(limits, _user_task_count()),
        report=report,
        signals_as_exit_codes=backend in ("bwrap", "unshare+jail"),
    )


def _wrap(
    argv: list[str], workdir: Path, support: IsolationSupport, network: bool, filesystem: bool, view: tuple[str, ...]
) -> tuple[list[str], str]:
    if filesystem and support.unshare_jail:
        return [*_unshare_jail_prefix(workdir, network, support.is_root, view), *argv], "unshare+jail"
    if filesystem and support.bwrap:
        return [*_bwrap_prefix(workdir, network, view), *argv], "bwrap"
    if network and support.unshare_net:
        return [*_unshare_net_prefix(support.is_root), *argv], "unshare --net"
    return list(argv), "none"


def _network_text(backend: str, requested: bool, support: IsolationSupport) -> str:
    if not requested:
        return "not isolated (not requested)"
    if backend == "none":
        return "network isolation unavailable: " + ("; ".join(support.notes) or "no namespace recipe works here")
    return f"private network namespace ({backend}): loopback only, no outside network"


def _filesystem_text(backend: str, requested: bool, workdir: Path, support: IsolationSupport, view: bool) -> str:
    if backend in ("bwrap", "unshare+jail") and view:
        return f"only the listed paths (read-only) and {workdir} exist (and a private /tmp)"
    if backend in ("bwrap", "unshare+jail"):
        return f"read-only except {workdir} (and a private /dev/shm)"
    if not requested:
        return "not isolated (not requested)"
    return "filesystem isolation unavailable: writable wherever the user can write" + (
        "" if support.filesystem else " (no mount namespaces here)"
    )


def _bwrap_prefix(workdir: Path, network: bool, view: tuple[str, ...] = ()) -> list[str]:
    prefix = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]
    if view:  # only the listed paths (bwrap resolves a listed symlink to its target)
        prefix += ["--tmpfs", "/"]
        for path in view:
            if os.path.exists(path):
                prefix += ["--ro-bind", path, path]
        prefix += ["--dev", "/dev", "--tmpfs", "/tmp"]
    else:
        prefix += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/dev/shm"]
        for node in sorted(glob.glob("/dev/nvidia*")):  # GPU device nodes (and /dev/nvidia-caps for MIG)
            prefix += ["--dev-bind", node, node]
    if not network:
        prefix.append("--share-net")
    prefix += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--"]
    return prefix


def _unshare_jail_prefix(workdir: Path, network: bool, is_root: bool, view: tuple[str, ...] = ()) -> list[str]:
    prefix = ["unshare"] + ([] if is_root else ["--map-root-user"]) + (["--net"] if network else [])
    prefix += ["--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--"]
    views = [part for path in view for part in ("--view", path)]
    return [*prefix, sys.executable, "-I", "-S", str(_JAIL), "--workdir", str(workdir), *views, "--"]


def _unshare_net_prefix(is_root: bool) -> list[str]:
    return ["unshare"] + ([] if is_root else ["--map-root-user"]) + ["--net", "--"]


@cache
def probe_isolation() -> IsolationSupport:
    """Find out, once per process, which isolation recipes work here by running ``true`` in each."""
    is_root = os.geteuid() == 0
    notes: list[str] = []
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="optiml-probe-") as tmp:
        workdir = Path(tmp).resolve()
        bwrap = _try("bwrap", [*_bwrap_prefix(workdir, True), true], notes)
        jail = _try("unshare+jail", [*_unshare_jail_prefix(workdir, True, is_root), true], notes)
        net = _try("unshare --net", [*_unshare_net_prefix(is_root), true], notes)
    names = ("RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_DATA", "RLIMIT_NPROC", "RLIMIT_CORE")
    rlimits = tuple(name for name in names if hasattr(resource, name))
    return IsolationSupport(is_root, bwrap, jail, net, rlimits, tuple(notes))


#: what every compile needs besides the toolkit: the host compiler, system headers and libraries
SYSTEM_VIEW = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
)


@cache
def probe_view() -> tuple[bool, str]:
    """Whether a process can be started in a new root of :data:`SYSTEM_VIEW` here, and why not."""
    support = probe_isolation()
    if not support.filesystem:
        return False, "no mount namespaces here"
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="optiml-probe-") as tmp:
        launch = build_worker_launch(
            [true], workdir=Path(tmp), limits=ResourceLimits(), support=support, view=SYSTEM_VIEW
        )
        notes: list[str] = []
        ok = _try(launch.report.backend, launch.argv, notes)
    return ok, "; ".join(notes)


def _try(name: str, argv: list[str], notes: list[str]) -> bool:
    if shutil.which(argv[0]) is None:
        notes.append(f"{name}: {argv[0]} not installed")
        return False
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            env={"PATH": os.environ.get("PATH", os.defpath)},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"{name}: {exc}")
        return False
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        notes.append(f"{name}: {last}")
        return False
    return True


_TASK_COUNT_TTL_S = 5.0
_task_count_cache: tuple[float, int] | None = None


def _user_task_count() -> int:
    """Processes and threads this user runs now (what RLIMIT_NPROC counts), re-counted every few
    seconds at most (a scan of /proc costs tens of ms, and every compile starts a sandbox; the
    headroom absorbs the drift). 0 for root, whom the kernel never holds to RLIMIT_NPROC."""
    global _task_count_cache
    if os.geteuid() == 0:
        return 0
    now = time.monotonic()
    if _task_count_cache is not None and now - _task_count_cache[0] < _TASK_COUNT_TTL_S:
        return _task_count_cache[1]
    _task_count_cache = (now, _count_user_tasks())
    return _task_count_cache[1]


def _count_user_tasks() -> int:
    uid, count = os.getuid(), 0
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            text = Path(status).read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def _limiter(limits: ResourceLimits, tasks_now: int) -> Callable[[], None]:
    """The ``preexec_fn``: a new session (so the whole group can be killed), then the rlimits."""
    settings: list[tuple[int, int, int]] = [(resource.RLIMIT_CORE, limits.core_bytes, limits.core_bytes)]
    if limits.cpu_seconds is not None:  # SIGXCPU at the soft limit (a clear cause), SIGKILL a bit later
        settings.append((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + _CPU_GRACE_S))
    if limits.file_size_bytes is not None:
        settings.append((resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes))
    if limits.memory_bytes is not None:
        settings.append((resource.RLIMIT_DATA, limits.memory_bytes, limits.memory_bytes))
    if limits.max_processes is not None:
        count = tasks_now + limits.max_processes
        settings.append((resource.RLIMIT_NPROC, count, count))

    def apply() -> None:
        os.setsid()
        if limits.niceness:
            os.nice(limits.niceness)
        for which, soft, hard in settings:
            _, current = resource.getrlimit(which)
            if current != resource.RLIM_INFINITY:
                soft, hard = min(soft, current), min(hard, current)
            resource.setrlimit(which, (soft, hard))

    return apply


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process started through :func:`build_worker_launch` and everything it started (it
    leads its own process group), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=10)
