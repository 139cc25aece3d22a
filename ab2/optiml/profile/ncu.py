"""Run Nsight Compute on the profile target in the isolated worker setup, and read what it says.

One ncu launch covers every candidate of a batch (ncu's and torch's start-up cost ~5–7 s per
process on the H200, so it is paid once): ncu runs ``python -m optiml.profile.target`` with
``--profile-from-start off`` and collects the metric list for each kernel launched inside the
target's profiler ranges. The process group is killed on timeout. What went wrong — ncu
missing, no permission for the performance counters (``ERR_NVGPUCTRPERM``), an ncu error, a
crash, a timeout — comes back as one line in :attr:`NcuRun.error`, never as an exception.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from optiml.cuda_tools import find_cuda_tool
from optiml.integrity import process
from optiml.integrity.process import LaunchBuilder
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


def light_target_command(case_dir: Path, so_paths: Sequence[str], report: Path) -> list[str]:
    """The torch-free target (:mod:`optiml.profile.light_target`) run as a plain script."""
    script = Path(__file__).with_name("light_target.py")
    command = [sys.executable, "-I", "-S", str(script), "--case", str(case_dir)]
    for so in so_paths:
        command += ["--so", so]
    return [*command, "--report", str(report)]


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
) -> NcuRun:
    """Run ``command`` (ncu + target) sandboxed, with a timeout; parse its CSV and the target's report."""
    outcome = process.run(command, launch, workdir, timeout_s, extra_env)
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
