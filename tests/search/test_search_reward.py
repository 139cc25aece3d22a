from __future__ import annotations

import math

import pytest

from optiml.evaluate.results import EvalResult, EvalStatus, TimingStats
from optiml.search.config import RewardWeights
from optiml.search.reward import Change, compare, compute_reward, failure_reward

W = RewardWeights()


def timing(median: float, spread: float = 0.0) -> TimingStats:
    return TimingStats(median, median - spread, median + spread, median - spread, median + spread, 20)


def ok(median: float, spread: float = 0.0) -> EvalResult:
    return EvalResult(EvalStatus.OK, timing=timing(median, spread))


def reward(child: EvalResult, parent: float, root: float, **kw: float | None) -> float:
    return compute_reward(
        child,
        parent=timing(parent, 0.001),
        root=timing(root, 0.001),
        proxy=kw.get("proxy"),
        parent_proxy=kw.get("parent_proxy"),
        weights=W,
        noise_threshold=0.02,
    ).total


def test_compare_needs_the_whole_band_and_the_threshold() -> None:
    assert compare(timing(1.0, 0.01), timing(0.5, 0.01), 0.02) is Change.FASTER
    assert compare(timing(1.0, 0.01), timing(2.0, 0.01), 0.02) is Change.SLOWER
    # 5 % faster, but the bands overlap: not beyond the noise
    assert compare(timing(1.0, 0.05), timing(0.95, 0.05), 0.02) is Change.SAME
    # bands apart but below the 2 % floor
    assert compare(timing(1.0, 0.0001), timing(0.99, 0.0001), 0.02) is Change.SAME


def test_twice_as_fast_as_parent_and_root() -> None:
    # each term: 0.5 * ln 2 / ln 4 = 0.25
    assert reward(ok(0.5), parent=1.0, root=1.0) == pytest.approx(0.5)


def test_log_speedups_are_clipped() -> None:
    assert reward(ok(0.01), parent=1.0, root=1.0) == pytest.approx(1.0)
    assert reward(ok(100.0), parent=1.0, root=1.0) == pytest.approx(-1.0 - W.regression)


def test_regression_beyond_noise_is_penalised_but_noise_is_not() -> None:
    slow = compute_reward(
        ok(1.5, 0.001),
        parent=timing(1.0, 0.001),
        root=timing(2.0, 0.001),
        proxy=None,
        parent_proxy=None,
        weights=W,
        noise_threshold=0.02,
    )
    assert slow.change is Change.SLOWER
    assert slow.penalty == -W.regression
    expected = 0.5 * math.log(1 / 1.5) / math.log(4) + 0.5 * math.log(2 / 1.5) / math.log(4) - W.regression
    assert slow.total == pytest.approx(expected)
    noisy = compute_reward(
        ok(1.01, 0.05),
        parent=timing(1.0, 0.05),
        root=timing(1.0, 0.05),
        proxy=None,
        parent_proxy=None,
        weights=W,
        noise_threshold=0.02,
    )
    assert noisy.change is Change.SAME
    assert noisy.penalty == 0.0


def test_proxy_term_only_when_both_were_profiled() -> None:
    with_proxy = reward(ok(1.0), parent=1.0, root=1.0, proxy=0.8, parent_proxy=0.3)
    assert with_proxy == pytest.approx(W.proxy * 0.5)
    assert reward(ok(1.0), parent=1.0, root=1.0, proxy=0.8, parent_proxy=None) == 0.0


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (EvalStatus.COMPILE_ERROR, W.build_failure),
        (EvalStatus.REJECTED, W.build_failure),
        (EvalStatus.WRONG_ANSWER, W.wrong_answer),
        (EvalStatus.TIMEOUT, W.run_failure),
        (EvalStatus.CRASH, W.run_failure),
        (EvalStatus.INTEGRITY, W.integrity),
    ],
)
def test_failures_get_their_penalty(status: EvalStatus, expected: float) -> None:
    assert failure_reward(status, W).total == expected
    assert reward(EvalResult(status, "boom"), parent=1.0, root=1.0) == expected


def test_any_verified_kernel_beats_any_failure() -> None:
    worst_verified = reward(ok(1000.0), parent=1.0, root=1.0, proxy=0.0, parent_proxy=1.0)
    assert worst_verified > min(W.build_failure, W.run_failure, W.wrong_answer, W.integrity)
