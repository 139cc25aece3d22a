"""The value model: what a node is worth, on one scale for the whole tree; and the noise-aware comparison.

A node's reward is its *value*, and it depends on the node alone — never on its parent — so the
sums and maxima the tree backs up (:meth:`optiml.search.tree.Tree.finalise`) compare like with
like wherever they are taken. Formula (weights are :class:`optiml.search.config.RewardWeights`,
defaults in brackets)::

    verified kernel with median time t, the root's median t_r:
        v = tanh( ln(t_r / t) / scale )                  [scale = ln 2]
          in (-1, 1): the root scores 0, a 2x speedup over it tanh(1) = 0.76, 4x 0.96,
          half the root's speed -0.76; strictly increasing in speed, never saturated flat

    failed kernel (its status decides; each must be <= -1, below every verified kernel):
        rejected, compile_error, load_error              v = build_failure   [-1.0]
        runtime_error, crash, timeout, out_of_memory     v = run_failure     [-1.0]
        wrong_answer                                     v = wrong_answer    [-1.0]
        integrity                                        v = integrity       [-1.5]

Why this shape (issue 12, "the value of search"): the earlier reward added parent-relative and
root-relative terms, a regression penalty and a profiler-proxy term; a verified kernel 3x slower
than its parent scored below a compile error, the mean of a subtree mixed gains over different
parents, and the proxy term counted only where a node and its parent had both been profiled.
Here every verified kernel ranks above every failure, a faster kernel always has the higher
value, and profiling is advisory: a node is final once it is timed, and its diagnosis (when it
arrives) feeds the proposers, not the value. ``tanh`` keeps the value bounded for PUCT's
exploration term without the flat region a clip has, so the best of a subtree is always the
fastest kernel in it.

"Beyond the noise" (:func:`compare`, used by the final re-timing and by MCTS's ``deepen_first``):
with ``Speedup.between(reference, candidate)`` — a band from the two timings' half inter-quartile
ranges — the candidate is *faster* when the whole band is above 1 and the speedup is at least
``1 + noise_threshold`` [2 %], *slower* when the band is below 1 and the speedup at most
``1 / (1 + noise_threshold)``, else *the same*.
"""

from __future__ import annotations

import math
from enum import Enum

from optiml.search.config import RewardWeights
from optiml.values import EvalResult, EvalStatus, Speedup, TimingStats

_BUILD_FAILURES = {EvalStatus.REJECTED, EvalStatus.COMPILE_ERROR, EvalStatus.LOAD_ERROR}
_SLOWEST = math.nextafter(-1.0, 0.0)  # tanh rounds to -1 in floating point past ~5e5x slower: stay above failures


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


def failure_value(status: EvalStatus, weights: RewardWeights) -> float:
    if status in _BUILD_FAILURES:
        return weights.build_failure
    if status is EvalStatus.WRONG_ANSWER:
        return weights.wrong_answer
    if status is EvalStatus.INTEGRITY:
        return weights.integrity
    return weights.run_failure


def speed_value(time_ms: float, root_ms: float, weights: RewardWeights) -> float:
    """The value of a verified kernel timed at ``time_ms`` in a tree whose root takes ``root_ms``."""
    if time_ms <= 0 or root_ms <= 0:
        return 0.0
    return max(math.tanh(math.log(root_ms / time_ms) / weights.scale), _SLOWEST)


def node_value(result: EvalResult, root: TimingStats, weights: RewardWeights) -> float:
    """The value of a candidate evaluated as ``result`` (see the module docstring)."""
    if result.status.is_failure:
        return failure_value(result.status, weights)
    if result.timing is None:  # verified but untimed: not a kernel the search can rank
        return failure_value(EvalStatus.RUNTIME_ERROR, weights)
    return speed_value(result.timing.median_ms, root.median_ms, weights)
