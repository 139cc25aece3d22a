"""Best-of-N sampling: every candidate is an edit of the root; the fastest verified one wins.

Proposers are asked again and again at the root — ``parallel_proposals`` requests at once, since
samples are independent — until the budgets end or they have nothing new; failures never close
the root, since independent samples say nothing about each other.
"""

from __future__ import annotations

import sys

from optiml.search.config import SearchConfig
from optiml.search.strategy import Action, local_action
from optiml.search.tree import Tree


class BestOfN:
    name = "best-of-n"
    prune_failures = False

    def __init__(self, config: SearchConfig) -> None:
        self.config = config

    def next_action(self, tree: Tree, *, can_try: bool, can_expand: bool) -> Action | None:
        return local_action(
            tree.root,
            sys.maxsize,
            can_try=can_try,
            can_expand=can_expand,
            max_requests=self.config.parallel_proposals,
        )
