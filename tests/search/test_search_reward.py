from __future__ import annotations

import math

import pytest

from optiml.errors import ConfigError
from optiml.search.config import RewardWeights, SearchConfig
from optiml.search.reward import Change, compare, failure_value, node_value, speed_value
from optiml.values import EvalResult, EvalStatus, TimingStats

W = RewardWeights()
FAILURES = [
    EvalStatus.REJECTED,
    EvalStatus.COMPILE_ERROR,
    EvalStatus.LOAD_ERROR,
    EvalStatus.RUNTIME_ERROR,
    EvalStatus.CRASH,
    EvalStatus.TIMEOUT,
    EvalStatus.OUT_OF_MEMORY,
    EvalStatus.WRONG_ANSWER,
    EvalStatus.INTEGRITY,
]


def timing(median: float, spread: float = 0.0) -> TimingStats:
    return TimingStats(median, median - spread, median + spread, median - spread, median + spread, 20)


def value(time_ms: float, root_ms: float = 1.0) -> float:
    return node_value(EvalResult(EvalStatus.OK, timing=timing(time_ms)), timing(root_ms), W)


def test_compare_needs_the_whole_band_and_the_threshold() -> None:
    assert compare(timing(1.0, 0.01), timing(0.5, 0.01), 0.02) is Change.FASTER
    assert compare(timing(1.0, 0.01), timing(2.0, 0.01), 0.02) is Change.SLOWER
    # 5 % faster, but the bands overlap: not beyond the noise
    assert compare(timing(1.0, 0.05), timing(0.95, 0.05), 0.02) is Change.SAME
    # bands apart but below the 2 % floor
    assert compare(timing(1.0, 0.0001), timing(0.99, 0.0001), 0.02) is Change.SAME


def test_the_value_is_the_squashed_log_speedup_over_the_root() -> None:
    assert value(1.0) == 0.0
    assert value(0.5) == pytest.approx(math.tanh(1.0))  # scale ln 2: twice as fast → tanh(1)
    assert value(2.0) == pytest.approx(-math.tanh(1.0))
    assert speed_value(0.25, 1.0, RewardWeights(scale=math.log(4))) == pytest.approx(math.tanh(1.0))


def test_the_value_depends_on_the_kernel_alone_not_on_its_parent() -> None:
    # the same kernel reached from a fast or a slow parent is worth the same: values compare across the tree
    assert value(0.8) == node_value(EvalResult(EvalStatus.OK, timing=timing(0.8, 0.3)), timing(1.0, 0.2), W)


def test_faster_is_always_worth_more_even_far_beyond_any_clip() -> None:
    times = [1000.0, 100.0, 10.0, 3.0, 1.01, 1.0, 0.99, 0.3, 0.1, 0.05]
    values = [value(t) for t in times]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert all(-1.0 < v < 1.0 for v in values)


@pytest.mark.parametrize("status", FAILURES)
def test_every_verified_kernel_ranks_above_every_failure(status: EvalStatus) -> None:
    # the review's case: a kernel 3x slower than its parent used to score below a compile error
    failed = node_value(EvalResult(status, "boom"), timing(1.0), W)
    assert failed == failure_value(status, W) <= -1.0
    assert value(3.0) > failed and value(1e6) > failed


def test_failure_values_by_kind() -> None:
    assert failure_value(EvalStatus.COMPILE_ERROR, W) == W.build_failure
    assert failure_value(EvalStatus.WRONG_ANSWER, W) == W.wrong_answer
    assert failure_value(EvalStatus.TIMEOUT, W) == W.run_failure
    assert failure_value(EvalStatus.INTEGRITY, W) == W.integrity < W.build_failure


def test_a_failure_value_above_minus_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="build_failure must be <= -1"):
        RewardWeights(build_failure=-0.5)
    with pytest.raises(ConfigError, match="scale must be > 0"):
        RewardWeights(scale=0.0)


def test_a_config_stored_with_the_retired_reward_weights_still_resumes() -> None:
    stored = SearchConfig().to_json().replace('"reward": {', '"reward": {"parent": 0.5, "proxy": 0.2, ')
    assert SearchConfig.from_json(stored).reward == RewardWeights()
