"""Persistence of one run: the tree's changes written to the run store, and the tree rebuilt from it.

The engine calls the journal after every change it must not lose; the evaluation of a candidate
is committed (kernel, node, result, the run's budgets spent) in one transaction the moment it
arrives, so a run killed at any point loses no evaluated candidate. Proposals are written as they
arrive too, so a resumed run evaluates the queued ones instead of paying for them again.

:meth:`Journal.restore` replays the stored nodes in evaluation order through the same tree
operations the engine uses, so a resumed tree has the visits, values, failure streaks, closed
nodes and queued candidates it had when the run stopped (only in-flight work is lost).
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.errors import StoreError
from optiml.kernel.source import KernelSource
from optiml.propose.base import HistoryEntry
from optiml.search.protocols import DiagnosisSnapshot
from optiml.search.tree import Candidate, Node, Tree
from optiml.store import (
    EDIT_DUPLICATE,
    EDIT_NOT_APPLIED,
    EDIT_UNTRIED,
    RUN_RUNNING,
    EditRecord,
    NodeRecord,
    RunStore,
)
from optiml.values import Edit


@dataclass(frozen=True)
class Restored:
    """A tree rebuilt from the store, and the run's count of transposition hits so far."""

    tree: Tree
    duplicates: int


class Journal:
    def __init__(self, store: RunStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id

    # writes --------------------------------------------------------------------------------------

    def candidate(self, parent: Node, edit: Edit, kernel: KernelSource, prior: float, tick: int) -> int:
        return self.store.add_edit(
            self.run_id,
            parent_digest=parent.digest,
            edit=edit,
            outcome=EDIT_UNTRIED,
            seq=tick,
            kernel=kernel,
            prior=prior,
        )

    def not_applied(self, parent: Node, edit: Edit, message: str, tick: int) -> None:
        self.store.add_edit(
            self.run_id, parent_digest=parent.digest, edit=edit, outcome=EDIT_NOT_APPLIED, seq=tick, message=message
        )

    def duplicate(self, parent: Node, edit: Edit, kernel: KernelSource, tick: int) -> None:
        self.store.add_edit(
            self.run_id, parent_digest=parent.digest, edit=edit, outcome=EDIT_DUPLICATE, seq=tick, kernel=kernel
        )

    def dropped(self, candidate: Candidate) -> None:
        """A queued candidate turned out to be a known kernel when its turn came."""
        if candidate.edit_id is not None:
            self.store.set_edit_outcome(candidate.edit_id, EDIT_DUPLICATE)

    def evaluation(self, node: Node, *, elapsed_s: float, cost_usd: float) -> None:
        if node.result is None or node.seq is None:
            raise ValueError("only an evaluated node can be journaled")
        record = NodeRecord(
            digest=node.digest,
            parent_digest=node.parent.digest if node.parent is not None else None,
            edit_id=node.edit_id,
            depth=node.depth,
            prior=node.prior,
            seq=node.seq,
            reward=node.reward,
            closed_reason=node.closed_reason,
        )
        self.store.record_evaluation(
            self.run_id, node=record, kernel=node.kernel, result=node.result, elapsed_s=elapsed_s, cost_usd=cost_usd
        )

    def reward(self, node: Node) -> None:
        if node.reward is not None:
            self.store.set_reward(self.run_id, node.digest, node.reward)

    def closed(self, node: Node) -> None:
        self.store.set_closed(self.run_id, node.digest, node.closed_reason)

    def profile(self, node: Node) -> None:
        if node.diagnosis is not None:
            self.store.record_profile(
                self.run_id,
                node.digest,
                proxy_score=node.diagnosis.proxy_score,
                roofline_fraction=node.diagnosis.roofline_fraction,
                text=node.diagnosis.text,
            )

    def status(self, status: str, reason: str = "", **fields: float) -> None:
        """Set the run's status and stop reason (and ``elapsed_s`` / ``cost_usd`` when given)."""
        self.store.update_run(
            self.run_id,
            status=status,
            stop_reason=reason if status != RUN_RUNNING else "",
            elapsed_s=fields.get("elapsed_s"),
            cost_usd=fields.get("cost_usd"),
        )

    # restore -------------------------------------------------------------------------------------

    def restore(self) -> Restored | None:
        """The run's tree as stored, or None when not even the root was evaluated."""
        records = self.store.nodes(self.run_id)
        if not records:
            return None
        if records[0].parent_digest is not None:
            raise StoreError(f"run {self.run_id} is inconsistent: its first node is not a root")
        results = self.store.evaluations(self.run_id)
        profiles = self.store.profiles(self.run_id)
        edits = {e.id: e for e in self.store.edits(self.run_id)}
        tree = Tree(self.store.kernel(records[0].digest))
        for record in records:
            node = tree.root if record.parent_digest is None else self._restore_child(tree, record, edits)
            tree.set_result(node, results[record.digest], record.seq)
            profile = profiles.get(record.digest)
            if profile is not None:
                node.diagnosis = DiagnosisSnapshot(profile.proxy_score, profile.roofline_fraction, profile.text)
            if record.reward is not None:
                tree.finalise(node, record.reward)
            node.closed_reason = record.closed_reason
        ticks = [r.seq for r in records]
        for edit in edits.values():
            ticks.append(edit.seq)
            parent = tree.node(edit.parent_digest)
            if parent is None:
                continue
            if edit.outcome == EDIT_NOT_APPLIED:
                tree.add_note(parent, HistoryEntry(edit.edit, "not_applied", message=edit.message), edit.seq)
            elif edit.outcome == EDIT_UNTRIED and edit.child_digest is not None:
                if edit.child_digest in tree or edit.child_digest in tree.untried_digests():
                    self.store.set_edit_outcome(edit.id, EDIT_DUPLICATE)
                    continue
                kernel = self.store.kernel(edit.child_digest)
                parent.untried.append(Candidate(edit.edit, kernel, edit.prior, edit.id))
        tree.advance_tick(max(ticks))
        duplicates = self.store.edit_outcome_counts(self.run_id).get(EDIT_DUPLICATE, 0)
        return Restored(tree=tree, duplicates=duplicates)

    def _restore_child(self, tree: Tree, record: NodeRecord, edits: dict[int, EditRecord]) -> Node:
        parent = tree.node(record.parent_digest or "")
        edit = edits.get(record.edit_id) if record.edit_id is not None else None
        if parent is None or edit is None:
            raise StoreError(f"run {self.run_id} is inconsistent: node {record.digest} lost its parent or edit")
        kernel = self.store.kernel(record.digest)
        return tree.add_child(parent, Candidate(edit.edit, kernel, record.prior, record.edit_id))
