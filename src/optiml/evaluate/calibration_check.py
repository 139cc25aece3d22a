"""Whether a calibration of the judge's round trip can be trusted (issue 39, class 3).

The judge subtracts a round trip calibrated on a process of its own. A process that could stop,
slow or signal the calibration process (a candidate beside it, before candidates had a pid
namespace of their own) would inflate that round trip, and every candidate timed against it would
read faster than it is. :func:`calibration_plausible` checks a calibration against bounds no honest
measurement on an idle or shared machine comes near; a judge that gets a reason back should
calibrate again rather than subtract it. Pure: numbers in, a reason (or None) out.

Bounds, measured on the H200 (``docs/evaluation.md``): the round trip is 0.3–0.5 ms (event and
host), rising to a few ms on a GPU shared by several judges; its inter-quartile spread is a
fraction of it; the spin kernel's excess is within ±0.1 ms.
"""

from __future__ import annotations

import math
from typing import Protocol

MAX_ROUND_TRIP_MS = 20.0  # forty times the H200's figure: a stopped or throttled process, not a busy GPU
MAX_SPREAD_FRACTION = 2.0  # half the inter-quartile range over the 10th percentile
MAX_EXCESS_MS = 5.0  # what the window adds beyond the empty call, either way
MIN_CALLS = 20


class CalibrationLike(Protocol):
    """The fields of ``optiml.evaluate.judge.Calibration`` this check reads."""

    @property
    def event_ms(self) -> float: ...
    @property
    def host_ms(self) -> float: ...
    @property
    def host_spread_ms(self) -> float: ...
    @property
    def calls(self) -> int: ...
    @property
    def excess_ms(self) -> float: ...


def calibration_plausible(calibration: CalibrationLike, cuda: bool = True) -> str | None:
    """None when ``calibration`` is within the bounds above; otherwise one line saying which is not.

    ``cuda`` False (a host without a GPU: the CPU tests' file-mapped protocol) checks only the host
    clock, since the event time is the host time there and no spin kernel runs."""
    values = {"event_ms": calibration.event_ms, "host_ms": calibration.host_ms}
    values["host_spread_ms"] = calibration.host_spread_ms
    values["excess_ms"] = calibration.excess_ms
    for name, value in values.items():
        if not math.isfinite(value):
            return f"calibration {name} is not a number ({value})"
    if calibration.calls < MIN_CALLS:
        return f"calibration took {calibration.calls} calls (at least {MIN_CALLS} expected)"
    if calibration.host_ms <= 0 or calibration.event_ms < 0:
        return f"calibration round trip {calibration.host_ms:.4f} ms (host), {calibration.event_ms:.4f} ms (event)"
    for name in ("event_ms", "host_ms"):
        if values[name] > MAX_ROUND_TRIP_MS:
            return f"calibration round trip {values[name]:.3f} ms ({name}) is above {MAX_ROUND_TRIP_MS:g} ms"
    if calibration.host_spread_ms > MAX_SPREAD_FRACTION * calibration.host_ms:
        return (
            f"calibration spread {calibration.host_spread_ms:.3f} ms is over {MAX_SPREAD_FRACTION:g}x its round "
            f"trip {calibration.host_ms:.3f} ms (the calibration process was interrupted)"
        )
    if cuda and abs(calibration.excess_ms) > MAX_EXCESS_MS:
        return f"calibration excess {calibration.excess_ms:.3f} ms is beyond ±{MAX_EXCESS_MS:g} ms"
    return None


#: How much longer than the host-ended one an empty call's device-ended window may read: the waiting
#: stream must not hold the GPU from the candidate's context (it would add a whole time slice).
DEVICE_END_SLACK_MS = 0.05
#: How far the spin kernel, read through device-ended windows, may be from its time on the judge's stream.
SPIN_AGREEMENT_MS = 0.03
SPIN_AGREEMENT_SHARE = 0.3


def device_end_problem(
    host_end_ms: float, device_end_ms: float, spin_window_ms: float, spin_direct_ms: float
) -> str | None:
    """None when windows that end on the device (``optiml.evaluate.device_end``) can be trusted on this
    GPU; otherwise one line saying why the judge keeps the host's end.

    Read from the calibration process's windows (low quantiles): an empty call ended on the host
    (``host_end_ms``) and on the device (``device_end_ms``), the spin kernel ended on the device
    (``spin_window_ms``), and the spin kernel timed directly on the judge's stream (``spin_direct_ms``).
    The device end must not be slower than the host's (a waiting stream that kept its time slice), and
    must see the spin kernel's whole length (an end that did not wait for the call's work)."""
    for name, value in (("host", host_end_ms), ("device", device_end_ms), ("spin", spin_window_ms)):
        if not math.isfinite(value):
            return f"the {name}-ended calibration window is not a number ({value})"
    if device_end_ms > host_end_ms + DEVICE_END_SLACK_MS:
        return (
            f"an empty call's window read {device_end_ms:.3f} ms ended on the device against {host_end_ms:.3f} ms "
            "ended on the host (the waiting stream held the GPU)"
        )
    waited = spin_window_ms - device_end_ms
    if abs(waited - spin_direct_ms) > max(SPIN_AGREEMENT_MS, SPIN_AGREEMENT_SHARE * spin_direct_ms):
        return (
            f"windows ended on the device read the spin kernel as {waited:.3f} ms against {spin_direct_ms:.3f} ms "
            "on the judge's stream"
        )
    return None
