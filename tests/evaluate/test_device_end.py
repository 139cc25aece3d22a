"""Timed windows that end on the device (optiml.evaluate.device_end): when the judge trusts them, and the
candidate process's side of the protocol (the word written behind the call)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from optiml.evaluate.arena import Block
from optiml.evaluate.calibration_check import device_end_problem
from optiml.evaluate.candidate_link import CandidateFailure
from optiml.evaluate.judge import Calibration, Judge


@pytest.mark.parametrize(
    ("host_end", "device_end", "spin_window", "spin_direct", "phrase"),
    [
        (0.40, 0.12, 0.22, 0.10, None),  # shorter than the host's end, and the spin kernel seen whole
        (0.40, 0.42, 0.52, 0.10, None),  # within the slack of the host's end
        (0.40, 2.10, 2.20, 0.10, "held the GPU"),  # a waiting stream that kept its time slice
        (0.40, 0.12, 0.13, 0.10, "spin kernel"),  # an end that did not wait for the call's work
        (0.40, 0.12, 0.60, 0.10, "spin kernel"),  # ... or waited for far more than it
        (0.40, float("nan"), 0.2, 0.10, "not a number"),
    ],
)
def test_the_device_end_is_kept_only_when_it_is_no_slower_and_sees_the_work(
    host_end: float, device_end: float, spin_window: float, spin_direct: float, phrase: str | None
) -> None:
    problem = device_end_problem(host_end, device_end, spin_window, spin_direct)
    assert problem is None if phrase is None else phrase in (problem or "")


def _calibration(**changes: object) -> Calibration:
    values: dict[str, object] = {"event_ms": 0.12, "host_ms": 0.35, "host_spread_ms": 0.02, "calls": 41}
    values.update(changes)
    return Calibration(**values)  # type: ignore[arg-type]


def test_a_window_subtracts_the_round_trip_of_its_own_end() -> None:
    device = _calibration(window_end="device", host_end_event_ms=0.41)
    assert device.event_ms_for("device") == 0.12 and device.event_ms_for("host") == 0.41
    assert "end on the device" in device.note() and "0.410 ms ended on the host" in device.note()
    host = _calibration(event_ms=0.41, host_end_event_ms=0.41)
    assert host.event_ms_for("host") == 0.41 and "end on the host" in host.note()


@pytest.fixture()
def judge(tmp_path: Path) -> Judge:
    judge = Judge(torch.device("cpu"), tmp_path)
    yield judge
    judge.close()


def test_the_candidate_process_writes_the_word_behind_the_call(judge: Judge, tmp_path: Path) -> None:
    """Host mode has no stream: the word is stored once the call has returned, at the named offset."""
    block = Block(64, torch.device("cpu"), str(tmp_path))
    process = judge.take_process()
    try:
        deadline = time.monotonic() + 20
        judge.map_block(process, block, deadline)
        process.request({"op": "call", "id": -1, "signal": [block.id, 8, 0xDEADBEEF]}, deadline)
        words = block.bytes[:16].view(torch.int32).tolist()
        assert words[2] & 0xFFFFFFFF == 0xDEADBEEF and words[0] == words[1] == words[3] == 0
        with pytest.raises(CandidateFailure, match="not mapped"):
            process.request({"op": "call", "id": -1, "signal": [block.id + 999, 0, 1]}, deadline)
    finally:
        process.close()
        block.close()


@pytest.mark.gpu
def test_on_an_idle_gpu_timed_windows_end_on_the_device(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        pytest.skip("another worker's time slices may keep the host's end, by design")
    judge = Judge(torch.device("cuda", 0), tmp_path)
    try:
        calibration = judge.calibration()
        assert calibration.window_end == "device", judge.notes
        assert calibration.event_ms <= calibration.host_end_event_ms + 0.05
        assert abs(calibration.excess_ms) < 0.03  # the spin kernel read whole through the device's end
    finally:
        judge.close()


def test_the_window_end_is_a_setting_that_travels_to_the_worker() -> None:
    from optiml.evaluate.config import EvalConfig

    config = EvalConfig(window_end="host")
    assert EvalConfig.from_dict(config.to_dict()).window_end == "host"
    assert EvalConfig().window_end == "auto"
    with pytest.raises(ValueError, match="window_end must be one of auto, host"):
        EvalConfig(window_end="gpu")
