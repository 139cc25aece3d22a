"""The search tree: nodes are evaluated kernel versions, edges are edits; one transposition table.

Every kernel the search sends to the evaluator becomes a :class:`Node` the moment it is sent
(state ``PENDING``), keyed by :attr:`KernelSource.digest` in the tree's transposition table, so
the same kernel — reached by another edit, or differing only in comments and layout — is never
evaluated twice. A node's result decides its state: ``OK`` nodes can be expanded, ``FAILED``
ones stay as leaves whose messages feed the proposers' history. A node is *finalised* once its
reward is known (after profiling, when it is profiled); only finalised nodes are expanded.

The tree holds no locks: the engine mutates it from one thread only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from optiml.kernel.source import KernelSource
from optiml.propose.base import HistoryEntry
from optiml.search.protocols import DiagnosisSnapshot
from optiml.values import Edit, EvalResult, TimingStats


class NodeState(str, Enum):
    PENDING = "pending"  # sent to the evaluator, no result yet
    OK = "ok"  # verified and timed
    FAILED = "failed"  # any failure status


@dataclass(frozen=True)
class Candidate:
    """An applied proposal waiting for an evaluation slot."""

    edit: Edit
    kernel: KernelSource
    prior: float = 1.0  # proposer-rank prior used by PUCT (1 / (rank + 1), normalised per node)
    edit_id: int | None = None  # its row in the run store


@dataclass(frozen=True)
class Note:
    """A proposal from a node that produced no kernel; kept for the proposers' history."""

    tick: int
    entry: HistoryEntry


@dataclass(eq=False)
class Node:
    kernel: KernelSource
    parent: Node | None = None
    edit: Edit | None = None
    edit_id: int | None = None
    prior: float = 1.0
    depth: int = 0
    seq: int | None = None  # tick at which its result arrived (orders history and replay)
    result: EvalResult | None = None
    diagnosis: DiagnosisSnapshot | None = None
    reward: float | None = None
    children: list[Node] = field(default_factory=list)
    untried: list[Candidate] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    visits: int = 0  # finalised evaluations in this subtree, itself included
    value_sum: float = 0.0  # sum of their rewards
    value_max: float = -math.inf  # the best of their rewards
    virtual: int = 0  # evaluations in flight in this subtree (virtual loss)
    consecutive_failures: int = 0  # of its most recently finalised children
    dry_requests: int = 0  # consecutive proposal requests that brought nothing new
    requesting: int = 0  # proposal requests for it in flight
    closed_reason: str = ""  # non-empty once the node is closed to further expansion

    @property
    def digest(self) -> str:
        return self.kernel.digest

    @property
    def state(self) -> NodeState:
        if self.result is None:
            return NodeState.PENDING
        return NodeState.OK if self.result.ok else NodeState.FAILED

    @property
    def finalised(self) -> bool:
        return self.reward is not None

    @property
    def timing(self) -> TimingStats | None:
        return self.result.timing if self.result is not None and self.result.ok else None

    @property
    def time_ms(self) -> float | None:
        timing = self.timing
        return timing.median_ms if timing is not None else None

    @property
    def closed(self) -> bool:
        return bool(self.closed_reason)

    @property
    def expandable(self) -> bool:
        return self.state is NodeState.OK and self.finalised and not self.closed

    def history_entry(self) -> HistoryEntry:
        """This node's edit and outcome, as a proposer sees it."""
        if self.edit is None or self.result is None:
            raise ValueError("only an evaluated non-root node has a history entry")
        parent_time = self.parent.time_ms if self.parent is not None else None
        return HistoryEntry(
            edit=self.edit,
            status=self.result.status.value,
            time_ms=self.time_ms,
            parent_time_ms=parent_time if self.time_ms is not None else None,
            message=self.result.feedback(),
        )


class Tree:
    """Nodes by digest (the transposition table), plus tree-wide queries."""

    def __init__(self, root: KernelSource) -> None:
        self.root = Node(kernel=root)
        self._table: dict[str, Node] = {self.root.digest: self.root}
        self._tick = 0

    def __contains__(self, digest: str) -> bool:
        return digest in self._table

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[Node]:
        return iter(self._table.values())

    def node(self, digest: str) -> Node | None:
        return self._table.get(digest)

    def next_tick(self) -> int:
        self._tick += 1
        return self._tick

    def advance_tick(self, at_least: int) -> None:
        """Continue numbering after ``at_least`` (used when a tree is rebuilt from the store)."""
        self._tick = max(self._tick, at_least)

    def add_child(self, parent: Node, candidate: Candidate) -> Node:
        """Register a candidate about to be evaluated; raises ValueError for a known kernel."""
        digest = candidate.kernel.digest
        if digest in self._table:
            raise ValueError(f"kernel {digest} is already in the tree")
        child = Node(
            kernel=candidate.kernel,
            parent=parent,
            edit=candidate.edit,
            edit_id=candidate.edit_id,
            prior=candidate.prior,
            depth=parent.depth + 1,
        )
        parent.children.append(child)
        self._table[digest] = child
        return child

    def set_result(self, node: Node, result: EvalResult, seq: int) -> None:
        node.result = result
        node.seq = seq

    def finalise(self, node: Node, reward: float) -> None:
        """Fix the node's reward, back it up to the root and update its parent's failure streak."""
        node.reward = reward
        for ancestor in self.path(node):
            ancestor.visits += 1
            ancestor.value_sum += reward
            ancestor.value_max = max(ancestor.value_max, reward)
        if node.parent is not None:
            failed = node.state is NodeState.FAILED
            node.parent.consecutive_failures = node.parent.consecutive_failures + 1 if failed else 0

    def add_virtual(self, node: Node, delta: int) -> None:
        """Add (or with a negative delta, remove) in-flight evaluations along the node's path."""
        for ancestor in self.path(node):
            ancestor.virtual += delta

    def add_note(self, node: Node, entry: HistoryEntry, tick: int | None = None) -> None:
        node.notes.append(Note(tick=self.next_tick() if tick is None else tick, entry=entry))

    @staticmethod
    def path(node: Node) -> list[Node]:
        """Root first, ``node`` last."""
        nodes = [node]
        while nodes[-1].parent is not None:
            parent = nodes[-1].parent
            assert parent is not None
            nodes.append(parent)
        return nodes[::-1]

    def untried_digests(self) -> set[str]:
        return {c.kernel.digest for node in self._table.values() for c in node.untried}

    def tried_digests(self) -> frozenset[str]:
        """Kernels evaluated, in flight or queued anywhere: a proposer should not offer them again."""
        return frozenset(self._table) | self.untried_digests()

    def evaluated(self) -> list[Node]:
        """Nodes with a result, in the order results arrived."""
        done = [n for n in self._table.values() if n.seq is not None]
        return sorted(done, key=lambda n: n.seq or 0)

    def ranked(self) -> list[Node]:
        """Verified nodes, fastest first (ties: earliest)."""
        ok = [n for n in self._table.values() if n.time_ms is not None]
        return sorted(ok, key=lambda n: (n.time_ms or 0.0, n.seq or 0))

    def best(self) -> Node:
        """The fastest verified node so far (the root if nothing verified is faster)."""
        ranked = self.ranked()
        return ranked[0] if ranked else self.root

    def history(self, node: Node, limit: int) -> tuple[HistoryEntry, ...]:
        """What proposers should know when expanding ``node``, oldest first.

        Every edit on the path from the root to ``node``, plus the most recent ``limit`` other
        attempts made from any node on that path (failures with their messages, regressions,
        proposals that could not be applied).
        """
        path = self.path(node)
        on_path = {id(n) for n in path}
        steps: list[tuple[int, HistoryEntry]] = []
        others: list[tuple[int, HistoryEntry]] = []
        for ancestor in path:
            for child in ancestor.children:
                if child.seq is None:
                    continue
                (steps if id(child) in on_path else others).append((child.seq, child.history_entry()))
            others.extend((note.tick, note.entry) for note in ancestor.notes)
        others.sort(key=lambda item: item[0])
        kept = others[-limit:] if limit > 0 else []
        return tuple(entry for _, entry in sorted(steps + kept, key=lambda item: item[0]))
