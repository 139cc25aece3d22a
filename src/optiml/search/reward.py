"""The composite reward of one candidate, and the noise-aware comparison of two timings.

Formula (weights are :class:`optiml.search.config.RewardWeights`, defaults in brackets)::

    failed candidate (its status decides):
        rejected, compile_error, load_error              r = build_failure   [-1.0]
        runtime_error, crash, timeout, out_of_memory     r = run_failure     [-1.0]
        wrong_answer                                     r = wrong_answer    [-1.0]
        integrity                                        r = integrity       [-1.5]

    verified candidate with median time t (parent t_p, root t_r):
        g(a, b) = clip(ln(a / b), -c, +c) / c            in [-1, 1], c = clip [ln 4: 4x saturates]
        r =   parent * g(t_p, t)                         [0.5]  gain over the parent
            + root   * g(t_r, t)                         [0.5]  gain over the root
            + proxy  * (s - s_p)                         [0.2]  bottleneck-proxy gain, only when
                                                                the candidate and its parent were
                                                                both profiled (s, s_p in [0, 1])
            - regression  if slower than the parent beyond the noise          [0.25]

    the root itself gets r = 0.

"Beyond the noise" (:func:`compare`): with ``Speedup.between(parent, candidate)`` — a band from
the two timings' half inter-quartile ranges — the candidate is *faster* when the whole band is
above 1 and the speedup is at least ``1 + noise_threshold`` [2 %], *slower* when the band is
below 1 and the speedup at most ``1 / (1 + noise_threshold)``, else *the same*.

So a verified candidate scores in about [-1.45, 1.2]: any verified kernel beats any failure,
a 4x speedup over both parent and root saturates at 1, and a regression is always negative.
The message of every failure or regression reaches the proposers through the path history.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from optiml.evaluate.results import EvalResult, EvalStatus, Speedup, TimingStats
from optiml.search.config import RewardWeights

_BUILD_FAILURES = {EvalStatus.REJECTED, EvalStatus.COMPILE_ERROR, EvalStatus.LOAD_ERROR}


class Change(str, Enum):
    FASTER = "faster"
    SAME = "same"
    SLOWER = "slower"


def compare(reference: TimingStats, candidate: TimingStats, noise_threshold: float) -> Change:
    """Whether ``candidate`` is faster or slower than ``reference`` beyond the measured noise."""
    speedup = Speedup.between(reference, candidate)
    if speedup.low > 1.0 and speedup.value >= 1.0 + noise_threshold:
        return Change.FASTER
    if speedup.high < 1.0 and speedup.value <= 1.0 / (1.0 + noise_threshold):
        return Change.SLOWER
    return Change.SAME


@dataclass(frozen=True)
class Reward:
    """A reward and its terms, for logs and tests."""

    total: float
    parent_term: float = 0.0
    root_term: float = 0.0
    proxy_term: float = 0.0
    penalty: float = 0.0
    change: Change | None = None  # versus the parent; None for failures


def failure_reward(status: EvalStatus, weights: RewardWeights) -> Reward:
    if status in _BUILD_FAILURES:
        value = weights.build_failure
    elif status is EvalStatus.WRONG_ANSWER:
        value = weights.wrong_answer
    elif status is EvalStatus.INTEGRITY:
        value = weights.integrity
    else:
        value = weights.run_failure
    return Reward(total=value, penalty=value)


def compute_reward(
    result: EvalResult,
    *,
    parent: TimingStats,
    root: TimingStats,
    proxy: float | None,
    parent_proxy: float | None,
    weights: RewardWeights,
    noise_threshold: float,
) -> Reward:
    """The reward of a candidate evaluated as ``result``, a child of a node timed as ``parent``."""
    if result.status.is_failure or result.timing is None:
        return failure_reward(result.status if result.status.is_failure else EvalStatus.RUNTIME_ERROR, weights)
    timing = result.timing
    parent_term = weights.parent * _clipped_log_ratio(parent.median_ms, timing.median_ms, weights.clip)
    root_term = weights.root * _clipped_log_ratio(root.median_ms, timing.median_ms, weights.clip)
    proxy_term = 0.0
    if proxy is not None and parent_proxy is not None:
        proxy_term = weights.proxy * (proxy - parent_proxy)
    change = compare(parent, timing, noise_threshold)
    penalty = -weights.regression if change is Change.SLOWER else 0.0
    return Reward(
        total=parent_term + root_term + proxy_term + penalty,
        parent_term=parent_term,
        root_term=root_term,
        proxy_term=proxy_term,
        penalty=penalty,
        change=change,
    )


def _clipped_log_ratio(before_ms: float, after_ms: float, clip: float) -> float:
    if before_ms <= 0 or after_ms <= 0:
        return 0.0
    return max(-clip, min(clip, math.log(before_ms / after_ms))) / clip
