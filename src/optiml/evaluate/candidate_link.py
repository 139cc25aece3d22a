"""The judge's end of a candidate process: start it, send requests, contain its death or hang.

:class:`CandidateProcess` runs ``candidate_process.py`` as a child in its own session (the
kernel kills it if the judge dies) with a private stderr file. A reply that does not come by the
deadline kills the process (a typed ``timeout``); a process that dies mid-request is a typed
``crash`` naming the signal or exit code and the tail of its stderr. Standard library and
the integrity helpers only.

**Where it runs** (issue 39, classes 3, 5 and 6). Each process gets a directory of its own,
``WORKDIR/candidates/NAME``, and — where the host allows (:mod:`optiml.integrity.candidate_sandbox`)
— its own pid, network, IPC and mount namespaces with a view of only the libraries it needs and
that directory: it cannot see or signal the judge, the calibration process or another candidate,
nor read the judge's folder, a user's ``/tmp`` or home, the compile cache or the run store. The
shared object it loads is copied into its directory and a file block it maps (a host without a
GPU) is linked there. Its environment is the sandbox's allow-list. Its stderr file lies outside
its directory and is read by name relative to the judge's directory handle, without following
links, size-capped (:mod:`optiml.integrity.files`), and redacted. Where the namespaces are refused
— when probed, or when a process cannot start CUDA inside them — candidates run unconfined in
their directories and :func:`isolation_note` says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

from optiml.evaluate import candidate_process
from optiml.integrity import candidate_sandbox
from optiml.integrity.files import open_directory, tail_text
from optiml.integrity.sandbox import scrub_environment
from optiml.redact import redact
from optiml.values import EvalStatus

SHIM = Path(__file__).resolve().with_name("candidate_process.py")
START_TIMEOUT_S = 120.0  # a cold CUDA context on a busy machine can take many seconds
LIBRARY_NAME = "candidate.so"  # the shared object's copy in the candidate's directory
STDERR_LIMIT = 64 * 1024  # bytes of a candidate's stderr file read for a crash message
#: pauses between tries in the sandbox before the blame is laid (``CandidateProcess._blame``; on an H100 and an
#: H200 shared by four test workers, three starts within 2.5 s failed with CUDA error 304 and the unconfined one
#: after them started, once per run of the adversarial suite, 2026-12-05: the sandbox was given up for that)
SANDBOX_RETRY_DELAYS_S = (0.5, 2.0)
#: a sandbox given up is tried again this long after (a host that never allows it pays one failed start)
SANDBOX_RETRY_AFTER_S = 120.0


class _Isolation:
    """Whether candidate processes of this judge run in their sandbox (probed once; given up, and said so,
    if a process cannot start CUDA inside it — and tried again :data:`SANDBOX_RETRY_AFTER_S` later)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.given_up: str | None = None  # why, once the sandbox failed a real start
        self.given_up_at = 0.0  # time.monotonic() of that
        self.proven = False  # a sandboxed process has started
        self.required = False  # EvalConfig.isolation "required": never unconfined

    def enabled(self) -> bool:
        retry = self.given_up is not None and time.monotonic() - self.given_up_at >= SANDBOX_RETRY_AFTER_S
        return (self.given_up is None or retry) and candidate_sandbox.probe_candidate_isolation().isolated

    def give_up(self, why: str) -> None:
        with self.lock:
            if not self.proven:
                self.given_up, self.given_up_at = why, time.monotonic()

    def started_confined(self) -> None:
        with self.lock:
            self.proven, self.given_up = True, None

    def note(self) -> str:
        if self.given_up is not None:
            return f"candidate isolation unavailable: {self.given_up}; candidates run unconfined in their directories"
        found = candidate_sandbox.probe_candidate_isolation()
        return found.note if found.isolated else f"{found.note}; candidates run unconfined in their directories"


_isolation = _Isolation()


def require_isolation(required: bool) -> None:
    """Whether candidate processes started from now on must run in their sandbox (``OPTIML_ISOLATION``)."""
    _isolation.required = required


REQUIRED = "and OPTIML_ISOLATION=required forbids running candidates unconfined"


def candidates_confined() -> bool:
    """Whether this judge's candidate processes run in their sandbox (see :func:`isolation_note`)."""
    return _isolation.enabled()


def isolation_note() -> str:
    """One line for the task notes: how this judge's candidate processes are confined."""
    return _isolation.note()


@cache
def _view(cudart_path: str | None) -> tuple[str, ...]:
    return candidate_sandbox.candidate_view(str(SHIM), cudart_path)


def candidate_environment(directory: Path) -> dict[str, str]:
    """The sandbox's allow-list of this process's variables; home and temp folders in ``directory``;
    no CUDA JIT cache (a channel between candidates, and nothing can be written there anyway)."""
    env, _ = scrub_environment(os.environ)
    for name in ("HOME", "TMPDIR", "TMP", "TEMP"):
        env[name] = str(directory)
    env["CUDA_CACHE_DISABLE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class CandidateFailure(Exception):
    """Ends a candidate's evaluation with a status (not a harness bug)."""

    def __init__(self, status: EvalStatus, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fatal = fatal  # the judge's own CUDA context is unusable: the judge must be replaced


class CandidateProcess:
    """One candidate process; requests are strictly one at a time."""

    def __init__(
        self, cudart_path: str | None, device: int, workdir: Path, name: str, isolate: bool | None = None
    ) -> None:
        """``isolate``: None runs it in the sandbox where the host allows, False never (a control)."""
        self.directory = workdir / "candidates" / name
        self.stderr_path = workdir / f"{name}.stderr"  # outside the candidate's directory and view
        self._stage = workdir / "root"  # the view's mount points, shared by this judge's candidates
        self._workdir_fd: int | None = open_directory(workdir)
        self._cudart, self._device = cudart_path, device
        self.sandboxed = isolate is not False and _isolation.enabled()
        if isolate is not False and not self.sandboxed and _isolation.required:
            why = _isolation.given_up or candidate_sandbox.probe_candidate_isolation().note
            raise CandidateFailure(EvalStatus.RUNTIME_ERROR, f"{why}, {REQUIRED}")
        self._buffer = b""
        self._ready = False
        self._shim_pid: int | None = None
        self._start()

    def _start(self) -> None:
        argv = [os.path.realpath(sys.executable), "-I", "-S", str(SHIM)]
        argv += ["--cudart", self._cudart or "none", "--device", str(self._device)]
        argv += ["--poll-s", repr(candidate_process.POLL_S)]
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self.sandboxed:
            view = _view(self._cudart)
            candidate_sandbox.prepare(self.directory, self._stage, view)
            argv = candidate_sandbox.candidate_argv(argv, self.directory, self._stage, view)
        # shared allocations travel as file descriptors over this socket (arena.Block.export_fd)
        self.fd_socket, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [*argv, "--fd-socket", str(theirs.fileno())]
        with theirs, open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=self.directory,
                env=candidate_environment(self.directory),
                start_new_session=True,
                pass_fds=(theirs.fileno(),),
            )

    @property
    def pid(self) -> int:
        """The candidate process itself (under the sandbox, the shim below ``unshare`` and the jail)."""
        if self._shim_pid is not None:
            return self._shim_pid
        found = _find_shim(self.proc.pid) if self.sandboxed else self.proc.pid
        if found != self.proc.pid or not self.sandboxed:
            self._shim_pid = found  # kept once found: the shim may not have started yet
        return found

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, deadline: float | None = None) -> None:
        """Block until the process has its CUDA context (the first line it writes).

        A sandboxed process that fails to start, before any sandboxed process of this judge has, is
        started again in the sandbox after each pause of :data:`SANDBOX_RETRY_DELAYS_S`, then as
        :meth:`_blame` decides: the sandbox is given up (and :func:`isolation_note` says why) until
        :data:`SANDBOX_RETRY_AFTER_S` has passed only when a start outside it works and one inside it, right
        after, does not."""
        if self._ready:
            return
        until = deadline if deadline is not None else time.monotonic() + START_TIMEOUT_S
        failure = self._first_reply(until)
        for pause in SANDBOX_RETRY_DELAYS_S:
            if failure is None or not self.sandboxed or _isolation.proven or time.monotonic() + pause >= until:
                break
            time.sleep(pause)
            self._restart(sandboxed=True)
            failure = self._first_reply(until)
        if failure is not None and self.sandboxed and _isolation.required:
            message = f"a candidate process could not start in its sandbox ({failure.message[:200]}), {REQUIRED}"
            raise CandidateFailure(failure.status, message)
        if failure is not None and self.sandboxed and not _isolation.proven:
            failure = self._blame(failure, until)
        if failure is not None:
            raise failure
        if self.sandboxed:
            _isolation.started_confined()
        self._ready = True

    def _blame(self, failure: CandidateFailure, until: float) -> CandidateFailure | None:
        """After every start in the sandbox failed: whose fault? A start outside it that fails too says the
        machine's (the sandbox is kept). One that works is followed at once by one more start inside: if that
        works as well, the failures passed with the moment (on GPUs shared by four test workers, CUDA error
        304 came and went within seconds; by the time a start outside was tried it had passed); if it fails,
        the sandbox is at fault and given up. Returns the last start's failure, None when it is ready."""
        self._restart(sandboxed=False)
        unconfined = self._first_reply(until)
        if unconfined is not None:
            return unconfined
        self.kill()
        self._restart(sandboxed=True)
        if self._first_reply(until) is None:
            return None
        _isolation.give_up(f"a candidate process could not start in its sandbox ({failure.message[:200]})")
        self._restart(sandboxed=False)
        return self._first_reply(until)

    def _restart(self, sandboxed: bool) -> None:
        """Start the process again (the last one has ended), in the sandbox or not."""
        self.sandboxed, self._buffer, self._shim_pid = sandboxed, b"", None
        self._start()

    def _first_reply(self, deadline: float) -> CandidateFailure | None:
        """None when the process said it is ready; otherwise why not (the process is then killed)."""
        try:
            reply = self._receive(deadline)
        except CandidateFailure as failure:
            self.kill()
            return failure
        if reply.get("ok"):
            return None
        self.kill()
        error = redact(str(reply.get("error", "the process did not start")))
        return CandidateFailure(EvalStatus.RUNTIME_ERROR, error)

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request, return its ``result``; a refusal is raised as ``status`` (default runtime_error)."""
        self.send(message)
        return self.result(self.receive(deadline))

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        message = self._localise(message)
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise CandidateFailure(EvalStatus.CRASH, self._death_message()) from exc

    def receive(self, deadline: float, spin_s: float = 0.0) -> dict[str, Any]:
        """The next reply. ``spin_s``: poll for it this long before blocking (a timed window's reply:
        see :data:`optiml.evaluate.judge.REPLY_SPIN_S`)."""
        self.wait_ready(deadline)
        return self._receive(deadline, spin_s)

    @staticmethod
    def result(reply: dict[str, Any], status: EvalStatus = EvalStatus.RUNTIME_ERROR) -> dict[str, Any]:
        if not reply.get("ok"):
            raise CandidateFailure(status, str(reply.get("error", "the candidate process refused the request")))
        return dict(reply.get("result", {}))

    def thread_count(self) -> int:
        """OS threads of the candidate process and of every process it started (a forked helper is a thread
        of work beside the calls too), read by the judge from /proc (the candidate cannot lie)."""
        total, level, seen = 0, [self.pid], set()
        while level:
            for pid in level:
                try:
                    total += len(os.listdir(f"/proc/{pid}/task"))
                except OSError:
                    continue
            seen.update(level)
            level = [child for pid in level for child in _children(pid) if child not in seen]
        return total

    def stderr_tail(self, lines: int = 6) -> str:
        """The end of the candidate's stderr, read without following links, capped, and redacted."""
        return redact(tail_text(self._workdir_fd, self.stderr_path.name, lines, STDERR_LIMIT))

    def stop(self) -> None:
        """Send SIGKILL to the process and everything it started (its whole session); no wait."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()

    def kill(self) -> None:
        """End the process and everything it started, and reap it."""
        self.stop()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.fd_socket.close()

    def send_fd(self, fd: int) -> None:
        """Pass a file descriptor (a shared allocation) to the process; it takes it with the next ``map``."""
        try:
            socket.send_fds(self.fd_socket, [b"\0"], [fd])
        except OSError as exc:
            raise CandidateFailure(EvalStatus.CRASH, self._death_message()) from exc

    def close(self) -> None:
        """Kill the process; delete its stderr file, its directory and its view's mount points."""
        self.kill()
        self.stderr_path.unlink(missing_ok=True)
        mount_point = str(self._stage.resolve()) + os.path.realpath(self.directory)
        shutil.rmtree(self.directory, ignore_errors=True)
        with contextlib.suppress(OSError):  # its mount point in the shared stage (empty once it is dead)
            os.rmdir(mount_point)
        if self._workdir_fd is not None:
            os.close(self._workdir_fd)
            self._workdir_fd = None

    def _localise(self, message: dict[str, Any]) -> dict[str, Any]:
        """A request with its paths moved into the candidate's directory: the shared object is copied
        (the compile cache stays out of reach), a file block linked (the judge's folder too)."""
        try:
            if message.get("op") == "load" and "so" in message:
                local = self.directory / LIBRARY_NAME
                shutil.copyfile(message["so"], local)
                return {**message, "so": str(local)}
            if message.get("op") == "map" and "file" in message:
                source = Path(message["file"])
                local = self.directory / source.name
                if not local.exists():
                    os.link(source, local)
                return {**message, "file": str(local)}
        except OSError:  # unreadable or on another filesystem: the process says what it cannot open
            return message
        return message

    # -- internals ---------------------------------------------------------------------------
    def _receive(self, deadline: float, spin_s: float = 0.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        spin_until = time.monotonic() + spin_s
        while b"\n" not in self._buffer:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                self.kill()
                raise CandidateFailure(
                    EvalStatus.TIMEOUT, "no answer within the time limit (hang or infinite loop): candidate killed"
                )
            ready, _, _ = select.select([fd], [], [], 0.0 if now < spin_until else min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise CandidateFailure(EvalStatus.CRASH, self._death_message())
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            self.kill()
            raise CandidateFailure(
                EvalStatus.INTEGRITY, f"the candidate process sent a malformed reply: {line[:120]!r}"
            ) from None
        if not isinstance(reply, dict):
            self.kill()
            raise CandidateFailure(EvalStatus.INTEGRITY, "the candidate process sent a reply that is not an object")
        return reply

    def _death_message(self) -> str:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        number = -code if code is not None and code < 0 else 0
        if self.sandboxed and code is not None and 128 < code < 128 + signal.NSIG:
            number = code - 128  # the jail, pid 1 of the candidate's namespace, reports signal N as 128 + N
        if number:
            try:
                cause = f"was killed by {signal.Signals(number).name} (signal {number})"
            except ValueError:
                cause = f"was killed by signal {number}"
        else:
            cause = f"exited with code {code}"
        tail = self.stderr_tail()
        return f"the candidate process {cause}" + (f": {tail}" if tail else "")


def _find_shim(root: int, depth: int = 4) -> int:
    """The process running the shim among ``root``'s descendants (``unshare`` → jail → shim); ``root``
    itself when it cannot be found (a kernel without ``/proc/PID/task/TID/children``)."""
    level = [root]
    for _ in range(depth):
        children = [child for pid in level for child in _children(pid)]
        for child in children:
            try:
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    if _runs_shim(cmdline.read()):
                        return child
            except OSError:
                continue
        level = children
    return root


def _runs_shim(cmdline: bytes) -> bool:
    """Whether a process's ``/proc/PID/cmdline`` runs the shim as its script: the first argument after the
    interpreter that is not an option. (The jail's own command line *names* the shim, as the command it
    starts and as a path it shows: matched anywhere, the jail was taken for the candidate and every thread
    count read the jail's one thread.)"""
    args = cmdline.split(b"\0")[1:]
    script = next((arg for arg in args if not arg.startswith(b"-")), b"")
    return script == str(SHIM).encode()


def _children(pid: int) -> list[int]:
    """``pid``'s children: from ``/proc/PID/task/TID/children``, or where the kernel has no such file
    (``CONFIG_PROC_CHILDREN`` off), from every process's parent in ``/proc/*/stat``."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listing:
                found += [int(word) for word in listing.read().split()]
    except FileNotFoundError:
        return [child for child, parent in _parents().items() if parent == pid]
    except OSError:
        return found
    return found


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
        except (OSError, IndexError):
            continue
        parents[int(entry)] = int(fields[1])
    return parents
