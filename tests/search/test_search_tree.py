from __future__ import annotations

import pytest

from optiml.kernel.source import KernelSource
from optiml.propose.base import HistoryEntry
from optiml.search.tree import Candidate, NodeState, Tree
from optiml.values import Edit, EvalResult, EvalStatus, TimingStats


def edit(name: str) -> Edit:
    return Edit("knob", name, "tiling", f"try {name}", "test")


def ok(ms: float) -> EvalResult:
    return EvalResult(EvalStatus.OK, timing=TimingStats(ms, ms, ms, ms, ms, 5))


def candidate(code: str, name: str = "e") -> Candidate:
    return Candidate(edit(name), KernelSource(code))


def test_transposition_table_catches_kernels_differing_only_in_comments() -> None:
    tree = Tree(KernelSource("int x = 1;"))
    child = tree.add_child(tree.root, candidate("int  y = 2; // tuned"))
    assert child.state is NodeState.PENDING
    assert KernelSource("/* same */ int y = 2;").digest in tree
    with pytest.raises(ValueError, match="already in the tree"):
        tree.add_child(child, candidate("int y =\n 2;"))
    with pytest.raises(ValueError, match="already in the tree"):
        tree.add_child(child, candidate("int x = 1; // the root again"))


def test_finalise_backs_up_along_the_path_and_tracks_failure_streaks() -> None:
    tree = Tree(KernelSource("root"))
    tree.set_result(tree.root, ok(1.0), tree.next_tick())
    tree.finalise(tree.root, 0.0)
    a = tree.add_child(tree.root, candidate("a"))
    tree.set_result(a, ok(0.5), tree.next_tick())
    tree.finalise(a, 0.5)
    b = tree.add_child(a, candidate("b"))
    tree.set_result(b, EvalResult(EvalStatus.WRONG_ANSWER, "mismatch"), tree.next_tick())
    tree.finalise(b, -1.0)
    assert (tree.root.visits, tree.root.value_sum, tree.root.value_max) == (3, -0.5, 0.5)
    assert (a.visits, a.value_sum, a.value_max) == (2, -0.5, 0.5)
    assert a.consecutive_failures == 1
    c = tree.add_child(a, candidate("c"))
    tree.set_result(c, ok(0.4), tree.next_tick())
    tree.finalise(c, 0.2)
    assert a.consecutive_failures == 0
    assert tree.best() is c and [n.digest for n in tree.ranked()] == [c.digest, a.digest, tree.root.digest]


def test_virtual_loss_is_added_and_removed_along_the_path() -> None:
    tree = Tree(KernelSource("root"))
    a = tree.add_child(tree.root, candidate("a"))
    b = tree.add_child(a, candidate("b"))
    tree.add_virtual(b, +1)
    assert (tree.root.virtual, a.virtual, b.virtual) == (1, 1, 1)
    tree.add_virtual(b, -1)
    assert (tree.root.virtual, a.virtual, b.virtual) == (0, 0, 0)


def test_tried_digests_include_queued_candidates() -> None:
    tree = Tree(KernelSource("root"))
    tree.root.untried.append(candidate("queued"))
    assert tree.tried_digests() == {KernelSource("root").digest, KernelSource("queued").digest}


def test_history_has_the_path_and_the_latest_other_attempts_in_order() -> None:
    tree = Tree(KernelSource("root"))
    tree.set_result(tree.root, ok(1.0), tree.next_tick())
    failed = tree.add_child(tree.root, candidate("bad", "bad"))
    tree.set_result(failed, EvalResult(EvalStatus.TIMEOUT, "no end in 10 s"), tree.next_tick())
    step = tree.add_child(tree.root, candidate("good", "good"))
    tree.set_result(step, ok(0.5), tree.next_tick())
    tree.add_note(step, HistoryEntry(edit("garbled"), "not_applied", message="SEARCH block did not match"))
    for i in range(5):
        other = tree.add_child(step, candidate(f"slow{i}", f"slow{i}"))
        tree.set_result(other, ok(0.9), tree.next_tick())
    pending = tree.add_child(step, candidate("pending", "pending"))

    full = tree.history(step, limit=20)
    assert [e.edit.payload for e in full] == ["bad", "good", "garbled"] + [f"slow{i}" for i in range(5)]
    assert full[0].status == "timeout" and "no end in 10 s" in full[0].message
    assert full[1].time_ms == 0.5 and full[1].parent_time_ms == 1.0
    assert full[2].status == "not_applied" and "did not match" in full[2].message
    assert pending.edit is not None and pending.edit.payload not in {e.edit.payload for e in full}

    short = tree.history(step, limit=2)
    assert [e.edit.payload for e in short] == ["good", "slow3", "slow4"]
    assert [e.edit.payload for e in tree.history(step, limit=0)] == ["good"]
