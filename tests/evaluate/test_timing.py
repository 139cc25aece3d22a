"""When timing stops: a tight estimate, a candidate clearly slower than the incumbent, or the limits."""

from __future__ import annotations

import random

import pytest

from optiml.evaluate.timing import StopRule, median_interval


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
