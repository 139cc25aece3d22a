"""Monte Carlo Tree Search over edits: PUCT/UCT descent with progressive widening.

From the root, a node that may still widen (:func:`optiml.search.policy.allowed_children`)
is widened — its best-ranked queued candidate is evaluated, or proposers are asked for more.
Otherwise the search descends into its verified children in order of selection score, and the
first subtree that has something to do wins. Rewards are backed up by the engine; virtual loss
on in-flight paths keeps parallel evaluations apart.

``deepen_first`` (default on): before widening a node, follow any child that is faster than it
(in selection order) and wait while that child's proposals are on the way. On the separable
synthetic landscape (``benchmarks/search_landscape.py``) it took MCTS from 1.35x to 1.94x at 12
evaluations; it also makes MCTS behave much like greedy. On replayed look-ahead landscapes
(``benchmarks/search_ablation.py replay``, docs/search.md) turning it off with a larger
exploration constant (``c_puct`` 2) found a better variant behind a slower switch on one task of
seven, lost to greedy on another, and tied on the rest; greedy is therefore the default strategy.
"""

from __future__ import annotations

from optiml.search.config import SearchConfig
from optiml.search.policy import allowed_children, selection_score
from optiml.search.strategy import Action, local_action
from optiml.search.tree import Node, NodeState, Tree


class MCTS:
    name = "mcts"
    prune_failures = True

    def __init__(self, config: SearchConfig) -> None:
        self.config = config

    def next_action(self, tree: Tree, *, can_try: bool, can_expand: bool) -> Action | None:
        return self._descend(tree.root, can_try=can_try, can_expand=can_expand)

    def _descend(self, node: Node, *, can_try: bool, can_expand: bool) -> Action | None:
        widen = local_action(node, allowed_children(node, self.config), can_try=can_try, can_expand=can_expand)
        children = [c for c in node.children if c.state is NodeState.OK and c.finalised]
        children.sort(key=lambda c: selection_score(c, node, self.config), reverse=True)
        if widen is not None and self.config.deepen_first:
            # a child faster than this kernel: follow the improvement before widening here
            for child in (c for c in children if _faster(c, node)):
                action = self._descend(child, can_try=can_try, can_expand=can_expand)
                if action is not None or _busy(child):
                    return action  # None: its proposals are on the way; wait rather than widen here
        if widen is not None:
            return widen
        for child in children:
            action = self._descend(child, can_try=can_try, can_expand=can_expand)
            if action is not None:
                return action
        return None


def _faster(child: Node, parent: Node) -> bool:
    return child.time_ms is not None and parent.time_ms is not None and child.time_ms < parent.time_ms


def _busy(node: Node) -> bool:
    """Proposals requested for ``node`` or a descendant are still on the way."""
    return node.requesting > 0 or any(_busy(c) for c in node.children if c.state is NodeState.OK)
