"""Orchestrator side of the GPU worker: spawn, talk JSON lines, time out, replace on death.

The caller never dies with the worker: a crash (segfault, abort, ``exit()``) becomes
:class:`WorkerCrashed`, a hang becomes :class:`WorkerTimeout` after the worker's whole
process group is killed, and the next request starts a fresh worker.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from optiml.errors import WorkerError
from optiml.evaluate.wire import Reply
from optiml.integrity.files import open_directory, tail_text
from optiml.integrity.sandbox import ResourceLimits, WorkerLaunch, build_worker_launch, kill_group
from optiml.redact import redact

STDERR_LIMIT = 64 * 1024  # bytes of the worker's stderr file read for a death message


class WorkerTimeout(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:.0f} s (hang or infinite loop): worker killed")
        self.seconds = seconds


class WorkerCrashed(Exception):
    """The worker process died mid-request; ``message`` names the signal or exit code and stderr tail."""


class WorkerReplyError(Exception):
    """The worker answered ``ok: false``; ``reply`` says why (:mod:`optiml.evaluate.wire`)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.error)
        self.reply = reply


LaunchBuilder = Callable[[list[str], Path], WorkerLaunch]


def default_launch(argv: list[str], workdir: Path) -> WorkerLaunch:
    """Sandboxed launch: scrubbed environment, own directory, resource limits, no network if possible."""
    import optiml

    package_root = str(Path(optiml.__file__).resolve().parent.parent)
    extra = {"PYTHONPATH": package_root}
    return build_worker_launch(argv, workdir=workdir, limits=ResourceLimits(), extra_env=extra)


class WorkerClient:
    """One worker process bound to one GPU; requests are serialised by the caller."""

    def __init__(self, gpu: int | None = None, launch: LaunchBuilder = default_launch) -> None:
        self.gpu = gpu
        self._launch = launch
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._stderr_path: Path | None = None
        self._workdir_fd: int | None = None  # the worker's folder, where its stderr file is read by name
        self._buffer = b""
        self.isolation: dict[str, Any] = {}
        self._launch_spec: WorkerLaunch | None = None
        self.starts = 0
        self.requests_served = 0

    @property
    def workdir(self) -> Path | None:
        """The running worker's private directory (None when stopped)."""
        return Path(self._workdir.name) if self._workdir is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        self.stop()
        self._workdir = tempfile.TemporaryDirectory(prefix="optiml-worker-")
        workdir = Path(self._workdir.name)
        # -P: the working directory, where candidates write, is not put on the judge's import path
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []
        spec = self._launch([sys.executable, *safe_path, "-m", "optiml.evaluate.worker"], workdir)
        env = dict(spec.env)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        self._stderr_path = workdir / "worker.stderr"
        self._workdir_fd = open_directory(workdir)
        with open(self._stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(
                spec.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=spec.cwd,
                env=env,
                preexec_fn=spec.preexec_fn,
            )
        self.isolation = spec.report.to_dict()
        self._launch_spec = spec
        self._buffer = b""
        self.starts += 1
        self.requests_served = 0

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.write(b'{"op": "shutdown"}\n')
                proc.stdin.flush()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired, AssertionError):
                kill_group(proc)
        if self._workdir_fd is not None:
            os.close(self._workdir_fd)
            self._workdir_fd = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request; returns ``result`` or raises WorkerTimeout / WorkerCrashed / WorkerReplyError."""
        if not self.alive:
            self.start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()
        except OSError as exc:
            raise WorkerCrashed(self._death_message(proc)) from exc
        line = self._read_line(proc, timeout_s)
        self.requests_served += 1
        try:
            reply = Reply.decode(line)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            self.stop()
            raise WorkerError(f"the GPU worker sent a malformed reply: {line[:200]!r}") from exc
        if reply.fatal:  # the worker exits after a fatal reply: wait for it, so the next request starts afresh
            self._reap(proc)
        if not reply.ok:
            raise WorkerReplyError(reply)
        return dict(reply.result)

    def stderr_tail(self, lines: int = 12) -> str:
        """The end of the worker's stderr, joined by " | ": the file is in the judge's folder, which a
        candidate that reached the judge could change, so it is read by name under the folder's handle,
        without following links, capped, and redacted (:mod:`optiml.integrity.files`, :mod:`optiml.redact`)."""
        if self._stderr_path is None:
            return ""
        return redact(tail_text(self._workdir_fd, self._stderr_path.name, lines, STDERR_LIMIT))

    def _read_line(self, proc: subprocess.Popen[bytes], timeout_s: float) -> str:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kill_group(proc)
                self._proc = None
                raise WorkerTimeout(timeout_s)
            ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise WorkerCrashed(self._death_message(proc))
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode(errors="replace")

    def _death_message(self, proc: subprocess.Popen[bytes]) -> str:
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            code = proc.wait()
        self._proc = None
        cause = self._launch_spec.describe_exit(code) if self._launch_spec else f"exited with code {code}"
        tail = self.stderr_tail(6)
        return f"the worker {cause}" + (f": {tail}" if tail else "")

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(proc)
        self._proc = None
