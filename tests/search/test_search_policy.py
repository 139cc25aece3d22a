from __future__ import annotations

import math
from dataclasses import replace

from optiml.kernel.source import KernelSource
from optiml.search.config import SearchConfig
from optiml.search.policy import allowed_children, close_reason, q_value, selection_score
from optiml.search.tree import Candidate, Node
from optiml.values import Edit

CONFIG = SearchConfig(widen_k=2.0, widen_alpha=0.5, max_children=6)


def node(visits: int = 0, value_sum: float = 0.0, value_max: float = -math.inf, prior: float = 1.0) -> Node:
    return Node(
        kernel=KernelSource(f"// {visits} {value_sum} {prior}"),
        visits=visits,
        value_sum=value_sum,
        value_max=value_max,
        prior=prior,
    )


def test_widening_grows_with_visits_and_is_capped() -> None:
    widths = [allowed_children(node(visits=v), CONFIG) for v in (0, 1, 4, 9, 100)]
    assert widths == [2, 2, 4, 6, 6]


def test_in_flight_evaluations_count_for_widening() -> None:
    busy = node(visits=1)
    busy.virtual = 3
    assert allowed_children(busy, CONFIG) == 4


def test_q_blends_best_and_mean_and_virtual_loss_lowers_it() -> None:
    n = node(visits=2, value_sum=0.2, value_max=0.5)
    config = replace(CONFIG, q_max_weight=0.5, virtual_loss=1.0)
    assert q_value(n, config) == (0.5 * 0.5 + 0.5 * 0.1)
    n.virtual = 2
    assert q_value(n, config) < 0.5 * 0.5 + 0.5 * 0.1


def test_puct_prefers_the_higher_prior_among_unvisited_children() -> None:
    parent = node(visits=4)
    first, second = node(prior=1.0), node(prior=0.5)
    parent.children = [first, second]
    assert selection_score(first, parent, CONFIG) > selection_score(second, parent, CONFIG)


def test_puct_prefers_the_better_child_at_equal_visits() -> None:
    parent = node(visits=10)
    good, bad = node(visits=3, value_sum=1.2, value_max=0.6), node(visits=3, value_sum=-0.6, value_max=0.1)
    parent.children = [good, bad]
    assert selection_score(good, parent, CONFIG) > selection_score(bad, parent, CONFIG)


def test_uct_tries_unvisited_children_first() -> None:
    config = replace(CONFIG, selection="uct")
    parent = node(visits=10)
    visited, fresh = node(visits=5, value_sum=5.0, value_max=1.0), node()
    parent.children = [visited, fresh]
    assert selection_score(fresh, parent, config) == math.inf
    assert selection_score(visited, parent, config) < math.inf


def test_a_node_whose_children_keep_failing_is_closed() -> None:
    n = node(visits=5)
    n.consecutive_failures = CONFIG.prune_after_failures
    assert "children failed" in close_reason(n, CONFIG, prune_failures=True)
    assert close_reason(n, CONFIG, prune_failures=False) == ""


def test_a_node_without_new_proposals_is_closed_once_its_queue_is_empty() -> None:
    n = node(visits=5)
    n.dry_requests = CONFIG.max_dry_requests
    edit = Edit("knob", "X=1", "tiling", "try", "test")
    n.untried.append(Candidate(edit, KernelSource("// other")))
    assert close_reason(n, CONFIG, prune_failures=True) == ""
    n.untried.clear()
    assert "nothing new" in close_reason(n, CONFIG, prune_failures=True)
