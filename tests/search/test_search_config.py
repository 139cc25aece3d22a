from __future__ import annotations

import pytest

from optiml.errors import ConfigError
from optiml.search.config import Budgets, RewardWeights, SearchConfig


def test_json_round_trip_keeps_nested_settings() -> None:
    config = SearchConfig(
        strategy="greedy", c_puct=0.7, budgets=Budgets(10, None, 2.5), reward=RewardWeights(scale=0.5)
    )
    assert SearchConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"strategy": "beam"}, "strategy must be one of mcts, greedy, best-of-n"),
        ({"selection": "ucb9"}, "selection must be one of"),
        ({"parallel_evaluations": 0}, "parallel_evaluations must be >= 1"),
        ({"c_puct": -1.0}, "c_puct must be a finite number >= 0"),
        ({"widen_alpha": 1.5}, "widen_alpha must be in [0, 1]"),
        ({"q_max_weight": -0.1}, "q_max_weight must be in [0, 1]"),
        ({"noise_threshold": float("nan")}, "noise_threshold"),
    ],
)
def test_bad_values_are_one_line_config_errors(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        SearchConfig(**kwargs)  # type: ignore[arg-type]
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_budgets_and_weights() -> None:
    with pytest.raises(ConfigError, match="max_evaluations must be >= 1"):
        Budgets(max_evaluations=0)
    with pytest.raises(ConfigError, match="max_cost_usd"):
        Budgets(max_cost_usd=-1)
    with pytest.raises(ConfigError, match="scale must be > 0"):
        RewardWeights(scale=0)


def test_unreadable_stored_config() -> None:
    with pytest.raises(ConfigError, match="stored search config is unreadable"):
        SearchConfig.from_json('{"strategy": "mcts", "warp_speed": 9}')
