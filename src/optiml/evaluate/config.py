"""How thoroughly a candidate is verified and timed. Standard library and OptiML's stdlib-only policy module only
(shared with the worker)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from optiml.integrity.policy import ISOLATIONS
from optiml.integrity.policy import isolation_policy as isolation_policy  # for the session's layer

WINDOW_ENDS = ("auto", "host")


@dataclass(frozen=True)
class EvalConfig:
    """Verification and timing settings; the defaults follow docs/evaluation.md's protocol.

    Verification: ``seeds`` trials on the default shape set (fresh seeded inputs, input
    distributions cycling through the task's list), one trial on every extra shape set, and a
    fresh-seed trial again after timing. Timing: ``warmup_calls`` untimed calls (the two that size
    the timing window among them), then between ``min_trials`` and ``max_trials`` timed calls
    (stopping early once the median is known within ``timing_precision``, or is clearly slower than
    the incumbent, and once ``timing_seconds`` have passed), rotating among ``timing_inputs`` input
    sets, L2 flushed and persisting L2 reset before each call, every timed call's output checked.
    """

    seeds: int = 3
    base_seed: int = 1000
    check_shape_sets: bool = True
    warmup_calls: int = 3
    min_trials: int = 10
    max_trials: int = 100
    timing_seconds: float = 1.0
    timing_precision: float = 0.01  # stop once the median's 95 % interval is within ±this fraction
    timing_inputs: int = 2
    flush_l2: bool = True
    reference_modes: tuple[str, ...] = ("eager",)  # add "compile" to time torch.compile too
    timeout_s: float = 90.0  # one candidate's verification + timing inside the worker
    prepare_timeout_s: float = 900.0  # first use of a task: inputs, references, reference timing
    screen: bool = True  # static screening of sources before compiling
    suspect_margin: float = 0.8  # faster than margin × physical floor → suspect, re-verified
    stream_slack_ms: float = 0.05  # host-observed time may exceed event time by 2× + this
    worker_recycle: int = 200  # restart the worker after this many candidates (loaded .so files pile up)
    #: where timed windows end: "auto" (on the device where the judge's calibration trusts it, else on the
    #: host) or "host" (always at the candidate's reply: the earlier protocol, kept for comparison)
    window_end: str = "auto"
    isolation: str = "best_effort"  # one of ISOLATIONS

    def __post_init__(self) -> None:
        if self.window_end not in WINDOW_ENDS:
            raise ValueError(f"window_end must be one of {', '.join(WINDOW_ENDS)} (got {self.window_end!r})")
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)} (got {self.isolation!r})")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reference_modes"] = list(self.reference_modes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalConfig:
        data = dict(data)
        data["reference_modes"] = tuple(data.get("reference_modes", ("eager",)))
        return cls(**data)
