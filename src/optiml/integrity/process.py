"""Run a command in the isolated worker setup with a timeout that kills its whole process group.

The process leads its own group, so a terminal's Ctrl-C does not reach it: an interrupt in the waiting
thread kills the group here, and one elsewhere ends it through :func:`optiml.integrity.children.end_all`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optiml.integrity import children
from optiml.integrity.sandbox import kill_group

#: A launch builder: (argv, workdir) → a WorkerLaunch (argv, env, cwd, preexec_fn, report).
LaunchBuilder = Callable[[list[str], Path], Any]
#: Entered once the process has started, exited once it has ended: ``hold(process, deadline)`` may wait
#: (for the process to be ready, for a lock) and yields the seconds it waited, which extend the timeout.
Hold = Callable[["subprocess.Popen[bytes]", float], contextlib.AbstractContextManager[float]]


def sandbox_launch(isolate_filesystem: bool = True) -> LaunchBuilder:
    """The GPU worker's isolation (scrubbed environment, own directory, resource limits, no network).

    ``isolate_filesystem`` adds the read-only filesystem and pid namespace recipes; these run the
    process in a user namespace, where ncu may be refused the performance counters.
    """

    def build(argv: list[str], workdir: Path) -> Any:
        import optiml
        from optiml.integrity.sandbox import ResourceLimits, build_worker_launch

        package_root = str(Path(optiml.__file__).resolve().parent.parent)
        return build_worker_launch(
            argv,
            workdir=workdir,
            limits=ResourceLimits(),
            extra_env={"PYTHONPATH": package_root},
            isolate_filesystem=isolate_filesystem,
        )

    return build


@dataclass(frozen=True)
class Outcome:
    stdout: str
    stderr: str
    returncode: int | None  # None when it could not start or was killed on timeout
    timed_out: bool
    seconds: float
    start_error: str | None = None
    exit_text: str = ""  # "exited with code 3", "killed by SIGSEGV"


def run(
    argv: list[str],
    launch: LaunchBuilder,
    workdir: Path,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
    hold: Hold | None = None,
) -> Outcome:
    """Run ``argv`` to its end or ``timeout_s`` (its process group killed then). With ``hold``, its
    standard error goes to a file, so a process that writes much while ``hold`` waits never blocks."""
    spec = launch(argv, workdir)
    env = dict(spec.env)
    env.update(extra_env or {})
    start = time.perf_counter()
    with contextlib.ExitStack() as held:
        spill = held.enter_context(tempfile.TemporaryFile()) if hold is not None else None
        with children.launching():
            try:
                proc = subprocess.Popen(
                    spec.argv,
                    stdout=subprocess.PIPE,
                    stderr=spill if spill is not None else subprocess.PIPE,
                    cwd=spec.cwd,
                    env=env,
                    preexec_fn=_own_process_group(spec.preexec_fn),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                return Outcome("", "", None, False, 0.0, start_error=str(exc))
        timed_out = False
        try:
            deadline = start + timeout_s
            if hold is not None:
                deadline += held.enter_context(hold(proc, deadline))
            out, err = proc.communicate(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            out, err = proc.communicate()
        except BaseException:  # Ctrl-C in this thread: the process leads its own group, so stop it here
            kill_group(proc)
            raise
        if children.ending():
            raise children.Ending(f"{argv[0]} was stopped: the command is ending")
        if spill is not None:
            spill.seek(0)
            err = spill.read()
    describe = getattr(spec, "describe_exit", None)  # a pid namespace reports signals as 128 + N
    return Outcome(
        stdout=out.decode(errors="replace"),
        stderr=err.decode(errors="replace"),
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        seconds=time.perf_counter() - start,
        exit_text=describe(proc.returncode) if callable(describe) else exit_text(proc.returncode),
    )


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip() and not line.startswith("==PROF==")]
    return lines[-1][:300] if lines else ""


def _own_process_group(inner: Callable[[], None] | None) -> Callable[[], None]:
    """Run the sandbox's pre-exec step, then lead a process group so a timeout kills the children too."""

    def setup() -> None:
        if inner is not None:
            inner()
        with contextlib.suppress(OSError):  # already a session/group leader (the sandbox may call setsid)
            os.setpgid(0, 0)

    return setup
