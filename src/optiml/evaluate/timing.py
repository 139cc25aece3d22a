"""Timing on the device: CUDA events, L2 flush, persisting-L2 reset, device-wide sync (worker side).

Every timed call is bracketed by events on the candidate's stream *and* by the host clock
around the call plus a device-wide synchronisation. Work hidden on another stream or a
host thread shows up as host time far above event time; the caller compares the two.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from optiml.evaluate.cudart import reset_persisting_l2

MIN_FLUSH_BYTES = 256 * 1024 * 1024

#: One timed call: the call itself, what to do before it (untimed), and a check of its output.
TimedCall = tuple[Callable[[], None], Callable[[], None] | None, Callable[[], bool] | None]


@dataclass
class Samples:
    event_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)


class DeviceTimer:
    """Times callables on one stream with the L2 flushed before each call."""

    def __init__(self, stream: torch.cuda.Stream, flush_l2: bool = True) -> None:
        self.stream = stream
        self.flush_l2 = flush_l2
        l2_bytes = int(getattr(torch.cuda.get_device_properties(stream.device), "L2_cache_size", 0))
        size = max(MIN_FLUSH_BYTES, 2 * l2_bytes)
        self._flush = torch.empty(size, dtype=torch.uint8, device=stream.device) if flush_l2 else None
        self.sync_overhead_ms = self._measure_sync_overhead()

    def _before_call(self, prepare: Callable[[], None] | None) -> None:
        with torch.cuda.stream(self.stream):
            if prepare is not None:
                prepare()
            if self._flush is not None:
                self._flush.zero_()
        reset_persisting_l2()
        torch.cuda.synchronize()

    def time_call(self, call: Callable[[], None], prepare: Callable[[], None] | None = None) -> tuple[float, float]:
        """One timed call: (event ms, host ms around call + device-wide sync)."""
        self._before_call(prepare)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record(self.stream)
        call()
        end.record(self.stream)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        return start.elapsed_time(end), wall

    def _measure_sync_overhead(self) -> float:
        """Host time of an empty event pair + device sync: subtracted from host timings."""
        walls = []
        for _ in range(15):
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            start.record(self.stream)
            end.record(self.stream)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        walls.sort()
        return walls[len(walls) // 2]


def run_trials(
    timer: DeviceTimer,
    calls: Sequence[TimedCall],
    *,
    warmup: int,
    min_trials: int,
    max_trials: int,
    seconds: float,
) -> tuple[Samples, int | None]:
    """Time ``calls`` round-robin (call, prepare, check). Returns samples and the index of the first
    timed call whose check failed (None if all passed)."""
    for i in range(warmup):
        call, prepare, _ = calls[i % len(calls)]
        timer._before_call(prepare)
        call()
        torch.cuda.synchronize()
    samples = Samples()
    deadline = time.perf_counter() + seconds
    trial = 0
    while trial < max_trials and (trial < min_trials or time.perf_counter() < deadline):
        call, prepare, check = calls[trial % len(calls)]
        event_ms, wall_ms = timer.time_call(call, prepare)
        samples.event_ms.append(event_ms)
        samples.wall_ms.append(max(0.0, wall_ms - timer.sync_overhead_ms))
        if check is not None and not check():
            return samples, trial
        trial += 1
    return samples, None
