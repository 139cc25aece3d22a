"""Greedy hill-climbing: always widen the fastest verified kernel.

The incumbent's candidates are evaluated (up to ``max_children``, no widening schedule); as soon
as a faster kernel is verified it becomes the incumbent. Only when the incumbent can grow no
more (closed, or at its cap) does the next fastest take its place, so the budget is not left
unused while some node can still grow. While the incumbent waits for proposals or a profile,
greedy waits too.
"""

from __future__ import annotations

from optiml.search.config import SearchConfig
from optiml.search.strategy import Action, local_action
from optiml.search.tree import Tree


class Greedy:
    name = "greedy"
    prune_failures = True

    def __init__(self, config: SearchConfig) -> None:
        self.config = config

    def next_action(self, tree: Tree, *, can_try: bool, can_expand: bool) -> Action | None:
        cap = self.config.max_children
        for node in tree.ranked():
            if node.closed or len(node.children) >= cap:
                continue
            return local_action(node, cap, can_try=can_try, can_expand=can_expand)
        return None
