"""When timing stops: a tight estimate, a candidate clearly slower than the incumbent, or the limits."""

from __future__ import annotations

import contextlib
import random
import time
from typing import Any

import pytest
import torch

from optiml.evaluate import timing
from optiml.evaluate.timing import DeviceTimer, StopRule, median_interval


def test_median_interval_brackets_the_median_and_narrows_with_more_samples() -> None:
    rng = random.Random(5)
    few = [1.0 + rng.gauss(0, 0.05) for _ in range(15)]
    many = [1.0 + rng.gauss(0, 0.05) for _ in range(400)]
    lo_few, hi_few = median_interval(few)
    lo_many, hi_many = median_interval(many)
    assert lo_few <= sorted(few)[7] <= hi_few
    assert lo_many < 1.0 < hi_many
    assert hi_many - lo_many < (hi_few - lo_few) / 2


def test_median_interval_of_one_sample_is_that_sample() -> None:
    assert median_interval([3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError):
        median_interval([])


def test_a_tight_estimate_stops_after_the_minimum() -> None:
    rule = StopRule(min_trials=10, max_trials=100, seconds=10.0, precision=0.01)
    steady = [1.0 + 0.001 * (i % 3) for i in range(10)]
    assert rule.stop(steady[:9], 0.0) == ""  # never before min_trials
    assert rule.stop(steady, 0.0) == "tight"


def test_a_noisy_estimate_runs_on_until_time_or_trials() -> None:
    rule = StopRule(min_trials=10, max_trials=40, seconds=1.0, precision=0.01)
    rng = random.Random(1)
    noisy = [1.0 + rng.uniform(-0.3, 0.3) for _ in range(20)]
    assert rule.stop(noisy, 0.5) == ""
    assert rule.stop(noisy, 1.5) == "time"
    assert rule.stop(noisy * 2, 0.0) == "trials"


def test_clearly_slower_than_the_incumbent_stops_early_but_within_its_noise_does_not() -> None:
    rng = random.Random(2)
    samples = [2.0 + rng.uniform(-0.2, 0.2) for _ in range(10)]
    slower = StopRule(min_trials=10, max_trials=100, seconds=10.0, precision=0.001, incumbent=(1.0, 0.05))
    assert slower.stop(samples, 0.0) == "slower"
    close = StopRule(min_trials=10, max_trials=100, seconds=10.0, precision=0.001, incumbent=(1.9, 0.2))
    assert close.stop(samples, 0.0) == ""


class _RecordingEvent:
    """Stands in for ``torch.cuda.Event``: records into the shared log, reads 1 ms."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def record(self, stream: Any = None) -> None:
        self.log.append(self.name)

    def elapsed_time(self, other: Any) -> float:
        return 1.0


class _RecordingFlush:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def zero_(self) -> None:
        self.log.append("flush")


def test_a_reference_call_is_launched_behind_the_flush_as_in_kernelbench(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inputs ready and the device idle first; then the flush, the start event, the call, the end: no sync
    between the flush and the call, so the call's launch overlaps the flush as in KernelBench's timing."""
    log: list[str] = []
    names = iter(["start", "end"])
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing: _RecordingEvent(log, next(names)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(timing, "reset_persisting_l2", lambda: True)
    timer = object.__new__(DeviceTimer)
    timer.stream, timer.flush_l2, timer._flush = None, True, _RecordingFlush(log)  # type: ignore[assignment]

    event_ms, wall_ms = timer.time_call(lambda: log.append("call"), prepare=lambda: log.append("prepare"))

    assert log == ["prepare", "sync", "flush", "start", "call", "end", "sync"]
    assert event_ms == 1.0 and wall_ms >= 0.0


@pytest.mark.gpu
def test_a_references_host_launch_cost_hides_behind_the_flush() -> None:
    """A call that spends 30 µs on the host before a kernel of a few µs reads as the kernel, not as the
    host's time: the 256 MB flush (about 80 µs on an H100) still runs while the host launches."""
    x = torch.zeros(1 << 18, device="cuda")

    def call() -> None:
        deadline = time.perf_counter() + 30e-6
        while time.perf_counter() < deadline:
            pass
        x.add_(1.0)

    timer = DeviceTimer(torch.cuda.current_stream())
    readings = sorted(timer.time_call(call)[0] for _ in range(21))
    assert readings[10] < 0.02, readings


@pytest.mark.parametrize(("mode", "tf32_convolutions"), [("eager", False), ("eager_tf32", True), ("compile", True)])
def test_references_run_at_the_precision_a_users_process_gives_them(mode: str, tf32_convolutions: bool) -> None:
    """Exact fp32 eager is what kernels are verified against; eager at PyTorch's defaults and torch.compile run
    as a user's process runs them (cuDNN convolutions in TF32), as the user's clock times them."""
    from optiml.evaluate.worker import _precision

    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # the judge process's exact set-up
    try:
        with _precision(mode):
            assert torch.backends.cudnn.allow_tf32 is tf32_convolutions
        assert torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.backends.cudnn.allow_tf32 = saved
