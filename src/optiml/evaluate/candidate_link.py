"""The judge's end of a candidate process: start it, send requests, contain its death or hang.

:class:`CandidateProcess` runs ``candidate_process.py`` as a child in its own session (the
kernel kills it if the judge dies) with a private stderr file. A reply that does not come by the
deadline kills the process (a typed ``timeout``); a process that dies mid-request is a typed
``crash`` naming the signal or exit code and the tail of its stderr. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from optiml.values import EvalStatus

SHIM = Path(__file__).resolve().with_name("candidate_process.py")
START_TIMEOUT_S = 120.0  # a cold CUDA context on a busy machine can take many seconds


class CandidateFailure(Exception):
    """Ends a candidate's evaluation with a status (not a harness bug)."""

    def __init__(self, status: EvalStatus, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fatal = fatal  # the judge's own CUDA context is unusable: the judge must be replaced


class CandidateProcess:
    """One candidate process; requests are strictly one at a time."""

    def __init__(self, cudart_path: str | None, device: int, workdir: Path, name: str) -> None:
        self.stderr_path = workdir / f"{name}.stderr"
        argv = [sys.executable, "-I", "-S", str(SHIM), "--cudart", cudart_path or "none", "--device", str(device)]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=workdir,
                start_new_session=True,
            )
        self._buffer = b""
        self._ready = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, deadline: float | None = None) -> None:
        """Block until the process has its CUDA context (the first line it writes)."""
        if self._ready:
            return
        reply = self._receive(deadline if deadline is not None else time.monotonic() + START_TIMEOUT_S)
        if not reply.get("ok"):
            self.kill()
            raise CandidateFailure(EvalStatus.RUNTIME_ERROR, str(reply.get("error", "the process did not start")))
        self._ready = True

    def request(self, message: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Send one request, return its ``result``; a refusal is raised as ``status`` (default runtime_error)."""
        self.send(message)
        return self.result(self.receive(deadline))

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise CandidateFailure(EvalStatus.CRASH, self._death_message()) from exc

    def receive(self, deadline: float) -> dict[str, Any]:
        self.wait_ready(deadline)
        return self._receive(deadline)

    @staticmethod
    def result(reply: dict[str, Any], status: EvalStatus = EvalStatus.RUNTIME_ERROR) -> dict[str, Any]:
        if not reply.get("ok"):
            raise CandidateFailure(status, str(reply.get("error", "the candidate process refused the request")))
        return dict(reply.get("result", {}))

    def thread_count(self) -> int:
        """OS threads of the candidate process, read by the judge from /proc (the candidate cannot lie)."""
        try:
            return len(os.listdir(f"/proc/{self.pid}/task"))
        except OSError:
            return 0

    def stderr_tail(self, lines: int = 6) -> str:
        try:
            text = self.stderr_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

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

    def close(self) -> None:
        """Kill the process and delete its stderr file."""
        self.kill()
        self.stderr_path.unlink(missing_ok=True)

    # -- internals ---------------------------------------------------------------------------
    def _receive(self, deadline: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise CandidateFailure(
                    EvalStatus.TIMEOUT, "no answer within the time limit (hang or infinite loop): candidate killed"
                )
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
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
        if code is not None and code < 0:
            try:
                cause = f"was killed by {signal.Signals(-code).name} (signal {-code})"
            except ValueError:
                cause = f"was killed by signal {-code}"
        else:
            cause = f"exited with code {code}"
        tail = self.stderr_tail()
        return f"the candidate process {cause}" + (f": {tail}" if tail else "")
