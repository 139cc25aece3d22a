"""Heuristic proposals still compile with nvcc (CI has nvcc, no GPU).

Building all ~110 proposals for the starter suite and our data kernels takes longer than the test
timeout on a small CI machine, so the build covers every *kind* of move (each knob role raised and
lowered, each source rewrite, each compile flag) and every kernel at least once: about 25 builds, in parallel.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from propose_helpers import DATA_KERNELS, SILU_TASK, SUITE_KERNELS, read_kernel, suite_task

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.propose.base import ProposalContext
from optiml.propose.heuristic import HeuristicProposer, Move
from optiml.propose.knobs import Knob, find_knobs

pytestmark = pytest.mark.nvcc


def move_kind(move: Move, knobs: dict[str, Knob]) -> str:
    """``knob:<role>:raise|lower``, ``flag:<flag>`` or the rewrite (``restrict``, ``launch_bounds``, ...)."""
    head, _, rest = move.family.partition(":")
    if head == "knob":
        knob = knobs[rest]
        value = int(move.edit.payload.split("=", 1)[1])
        return f"knob:{knob.role}:{'raise' if value > knob.value else 'lower'}"
    return move.family if head == "flag" else head


def covering_moves() -> tuple[list[tuple[str, str, Move]], int, set[str]]:
    """(kernel name, kind, move) so that each kind and each kernel is built at least once; all proposals; all kinds."""
    proposer = HeuristicProposer()
    chosen: list[tuple[str, str, Move]] = []
    built: dict[str, int] = {}  # kind -> builds chosen so far
    total = 0
    for path in SUITE_KERNELS + DATA_KERNELS:
        task = suite_task(path) if path in SUITE_KERNELS else suite_task(SILU_TASK)
        kernel = read_kernel(path)
        context = ProposalContext(task=task, kernel=kernel)
        moves = proposer.moves(context)
        proposals = proposer.propose(context, 100)
        # propose() ranks moves(): with room for all of them, it offers exactly those kernels
        assert all(p.kernel is not None for p in proposals)
        assert {p.kernel.digest for p in proposals if p.kernel is not None} == {m.kernel.digest for m in moves}
        assert all(m.kernel.digest != kernel.digest for m in moves), f"{path.name}: a move that changes nothing"
        total += len(proposals)
        knobs = {knob.name: knob for knob in find_knobs(kernel.code)}
        kinds = [(move_kind(m, knobs), m) for m in moves]
        new = {}
        for kind, move in kinds:
            if kind not in built and kind not in new:
                new[kind] = move
        if not new and kinds:  # nothing new here: the kind built least so far, on this kernel's code
            kind, move = min(kinds, key=lambda km: built[km[0]])
            new[kind] = move
        for kind, move in new.items():
            built[kind] = built.get(kind, 0) + 1
            chosen.append((path.name, kind, move))
    return chosen, total, set(built)


def test_heuristic_proposals_compile_one_per_move_kind(tmp_path: Path) -> None:
    chosen, total, kinds = covering_moves()
    assert total > 80  # the proposer still finds plenty to try on these kernels
    # every kind of move the proposer knows shows up on these kernels, and every kernel is built
    expected = {"launch_bounds", "launch_bounds_min", "unroll", "unroll_runtime", "restrict", "const", "launch"}
    assert expected <= kinds
    roles = ("block_size", "block_dim", "tile", "items_per_thread")
    assert {f"knob:{role}:{way}" for role in roles for way in ("raise", "lower")} <= kinds
    assert sum(kind.startswith("flag:") for kind in kinds) >= 2
    assert {name for name, _, _ in chosen} == {p.name for p in SUITE_KERNELS + DATA_KERNELS}
    assert len(chosen) < 30

    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    results = compiler.compile_many([move.kernel for _, _, move in chosen])
    failures = [
        f"{name} [{kind}]: {move.edit.summary(80)}\n{result.error_summary()}"
        for (name, kind, move), result in zip(chosen, results, strict=True)
        if not result.ok
    ]
    assert not failures, "\n\n".join(failures)
