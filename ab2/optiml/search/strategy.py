"""What a strategy decides, and nothing else: which node to widen next.

A strategy looks at the tree and returns one :class:`Action` — evaluate a queued candidate of
a node (:class:`Try`) or ask the proposers for more (:class:`Expand`) — or None when it has
nothing to do until a result arrives. The engine owns everything else (evaluation, proposers,
rewards, budgets, persistence), so MCTS, greedy and best-of-N differ only here and ablations
between them are fair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from optiml.search.tree import Node, Tree


@dataclass(frozen=True)
class Try:
    """Evaluate ``node``'s first queued candidate."""

    node: Node


@dataclass(frozen=True)
class Expand:
    """Ask a proposer for new candidates from ``node``."""

    node: Node


Action = Try | Expand


class Strategy(Protocol):
    name: str
    prune_failures: bool  # whether a node whose children keep failing is closed

    def next_action(self, tree: Tree, *, can_try: bool, can_expand: bool) -> Action | None: ...


def local_action(node: Node, width: int, *, can_try: bool, can_expand: bool, max_requests: int = 1) -> Action | None:
    """The action that widens ``node`` itself, if it may have more than its current children.

    Queued candidates go first; proposers are asked only when the queue is empty, with at most
    ``max_requests`` requests for the node in flight.
    """
    if not node.expandable or len(node.children) >= width:
        return None
    if node.untried:
        return Try(node) if can_try else None
    if can_expand and node.requesting < max_requests:
        return Expand(node)
    return None
