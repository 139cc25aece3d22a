"""Run Nsight Compute on the profile target in the isolated worker setup, and read what it says.

One ncu launch covers every candidate of a batch (ncu's and torch's start-up cost ~5–7 s per
process on the H200, so it is paid once): ncu runs ``python -m optiml.profile.target`` with
``--profile-from-start off`` and collects the metric list for each kernel launched inside the
target's profiler ranges. The process group is killed on timeout. What went wrong — ncu
missing, no permission for the performance counters (``ERR_NVGPUCTRPERM``), an ncu error, a
crash, a timeout — comes back as one line in :attr:`NcuRun.error`, never as an exception.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optiml.cuda_tools import find_cuda_tool
from optiml.integrity import process
from optiml.integrity.process import LaunchBuilder
from optiml.profile.light_target import READY_EVENT
from optiml.profile.ncu_csv import NcuCsvError, NcuRow, parse_raw_csv

PERMISSION_HINT = (
    "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): an administrator must allow "
    "profiling for non-admin users (NVreg_RestrictProfilingToAdminUsers=0), see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
_ERROR_LINE = re.compile(r"^==ERROR==\s*(?P<msg>.+)$", re.MULTILINE)
_WARNING_LINE = re.compile(r"^==WARNING==\s*(?P<msg>.+)$", re.MULTILINE)
#: ncu's warnings that say nothing about this run's results
_BENIGN_WARNINGS = ("Running with unmodified GPU clocks",)


def find_ncu(explicit: str | None = None, nvcc: str | None = None) -> str | None:
    """``explicit`` if given, else ncu wherever a CUDA toolkit put it (see :func:`find_cuda_tool`)."""
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    return find_cuda_tool("ncu", nvcc)


def ncu_command(ncu: str, metrics: Sequence[str], sections: Sequence[str], target: Sequence[str]) -> list[str]:
    command = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--profile-from-start", "off"]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    for section in sections:
        command += ["--section", section]
    return command + list(target)


def target_command(
    task_path: str, so_paths: Sequence[str], reference: bool, seed: int, shape_set: int, report: Path
) -> list[str]:
    """``python -m optiml.profile.target …`` with this interpreter."""
    command = [sys.executable, "-m", "optiml.profile.target", "--task", task_path]
    for so in so_paths:
        command += ["--so", so]
    if reference:
        command.append("--reference")
    return [*command, "--seed", str(seed), "--shape-set", str(shape_set), "--report", str(report)]


def light_target_command(case_dir: Path, so_paths: Sequence[str], report: Path, gate: Path | None = None) -> list[str]:
    """The torch-free target (:mod:`optiml.profile.light_target`) run as a plain script; with ``gate``
    it says "ready" once started and waits for that file before it touches the GPU (:class:`GpuTurn`)."""
    script = Path(__file__).with_name("light_target.py")
    command = [sys.executable, "-I", "-S", str(script), "--case", str(case_dir)]
    for so in so_paths:
        command += ["--so", so]
    command += ["--report", str(report)]
    return [*command, "--gate", str(gate)] if gate is not None else command


class GpuTurn:
    """A :data:`~optiml.integrity.process.Hold` for one ncu launch: ``lock`` (the evaluator's GPU lock)
    held from when the target may use the GPU until ncu has ended.

    With a ``gate``, the light target starts (ncu's start, Python, its CUDA context, the case's upload)
    while the evaluator times other candidates; once its report says ``ready`` the lock is taken and the
    gate file written, and the target loads, warms up and profiles the candidates. Without one (the torch
    target) the lock is taken at once. ``waited_s`` and ``held_s`` say how the last launch spent it.
    """

    POLL_S = 0.005

    def __init__(self, lock: threading.Lock, report: Path | None = None, gate: Path | None = None) -> None:
        self.lock, self.report, self.gate = lock, report, gate
        self.waited_s = 0.0  # for the lock, once the target was ready
        self.held_s = 0.0

    @contextlib.contextmanager
    def __call__(self, process: subprocess.Popen[bytes], deadline: float) -> Iterator[float]:
        if self.gate is not None and not self._ready(process, deadline):
            yield 0.0  # it ended or hangs before it was ready: nothing of it ran on the GPU
            return
        asked = time.perf_counter()
        with self.lock:
            taken = time.perf_counter()
            self.waited_s = taken - asked
            if self.gate is not None:
                self.gate.touch()
            try:
                yield self.waited_s
            finally:
                self.held_s = time.perf_counter() - taken

    def _ready(self, process: subprocess.Popen[bytes], deadline: float) -> bool:
        assert self.report is not None
        while process.poll() is None and time.perf_counter() < deadline:
            if any(event.get("event") == READY_EVENT for event in _read_events(self.report)):
                return True
            time.sleep(self.POLL_S)
        return False


@dataclass(frozen=True)
class NcuRun:
    """The outcome of one ncu launch."""

    rows: tuple[NcuRow, ...] = ()
    events: tuple[dict[str, Any], ...] = ()  # the target's JSON-lines report
    error: str | None = None  # fatal: nothing usable came back
    warnings: tuple[str, ...] = field(default=())
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""


def run_ncu(
    command: list[str],
    launch: LaunchBuilder,
    workdir: Path,
    report: Path,
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
    turn: GpuTurn | None = None,
) -> NcuRun:
    """Run ``command`` (ncu + target) sandboxed, with a timeout (not counting the wait for ``turn``'s
    lock); parse its CSV and the target's report."""
    outcome = process.run(command, launch, workdir, timeout_s, extra_env, hold=turn)
    events = tuple(_read_events(report))
    if outcome.start_error is not None:
        return NcuRun(error=f"ncu could not start: {outcome.start_error}")
    if outcome.timed_out or outcome.returncode is None:
        return NcuRun(
            error=f"ncu timed out after {timeout_s:.0f} s (process group killed)",
            events=events,
            seconds=outcome.seconds,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
        )
    return interpret(outcome.stdout, outcome.stderr, outcome.returncode, events, outcome.seconds, outcome.exit_text)


def interpret(
    stdout: str,
    stderr: str,
    returncode: int,
    events: tuple[dict[str, Any], ...] = (),
    seconds: float = 0.0,
    exit_text: str = "",
) -> NcuRun:
    """Classify ncu's output: rows, a fatal error if nothing usable came back, warnings."""
    text = stdout + "\n" + stderr
    warnings = tuple(w.strip() for w in _WARNING_LINE.findall(text) if not any(b in w for b in _BENIGN_WARNINGS))
    run = NcuRun(events=events, seconds=seconds, stdout=stdout, stderr=stderr, warnings=warnings)
    if "ERR_NVGPUCTRPERM" in text:
        return replace(run, error=PERMISSION_HINT)
    try:
        rows = tuple(parse_raw_csv(stdout))
    except NcuCsvError as exc:
        return replace(run, error=f"ncu output could not be read: {exc}")
    errors = [e.strip() for e in _ERROR_LINE.findall(text)]
    if rows:
        return replace(run, rows=rows, warnings=warnings + tuple(f"ncu error: {e}" for e in errors))
    if errors:
        return replace(run, error=f"ncu: {errors[0]}")
    target_error = next((e.get("error") for e in events if e.get("event") == "error"), None)
    if target_error:
        return replace(run, error=f"profile target: {target_error}")
    if returncode != 0:
        detail = process.last_line(stderr) or process.last_line(stdout)
        return replace(run, error=f"ncu {exit_text or process.exit_text(returncode)}: {detail}")
    return replace(run, error="ncu profiled no kernels")


def _read_events(report: Path) -> list[dict[str, Any]]:
    try:
        lines = report.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        if isinstance(value, dict):
            events.append(value)
    return events
