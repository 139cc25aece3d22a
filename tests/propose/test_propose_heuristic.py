"""HeuristicProposer: determinism, tried digests, evidence-driven ranking, history, and the contract."""

from __future__ import annotations

from pathlib import Path

import pytest
from propose_helpers import DATA, DATA_KERNELS, SUITE_KERNELS, make_task, read_kernel, suite_task

from optiml.integrity.screen import is_fp32_strict, screen_kernel
from optiml.propose.base import CATEGORIES, HistoryEntry, ProposalContext, Proposer
from optiml.propose.edits import apply_edit
from optiml.propose.heuristic import HeuristicProposer, bottleneck_signals
from optiml.values import CompileResult, Edit, EvalResult, EvalStatus, KernelResources

SILU = SUITE_KERNELS[[p.name for p in SUITE_KERNELS].index("silu.naive.cu")]


def context(path: Path = SILU, **kwargs: object) -> ProposalContext:
    """A context for a kernel file (our own data kernels borrow the SiLU task: elementwise, fp32)."""
    task = suite_task(path if path in SUITE_KERNELS else SILU)
    return ProposalContext(task=task, kernel=read_kernel(path), **kwargs)  # type: ignore[arg-type]


def test_is_a_proposer() -> None:
    proposer = HeuristicProposer()
    assert isinstance(proposer, Proposer) and proposer.name == "heuristic"
    assert proposer.propose(context(), 0) == []
    assert len(proposer.propose(context(), 1)) == 1


@pytest.mark.parametrize("path", SUITE_KERNELS + DATA_KERNELS, ids=lambda p: p.name)
def test_every_proposal_is_a_real_applicable_change(path: Path, tmp_path: Path) -> None:
    task = suite_task(path) if path in SUITE_KERNELS else make_task(tmp_path)
    kernel = read_kernel(path)
    proposals = HeuristicProposer().propose(ProposalContext(task=task, kernel=kernel), 50)
    assert len(proposals) >= 5
    digests = {p.kernel.digest for p in proposals if p.kernel is not None}
    assert len(digests) == len(proposals) and kernel.digest not in digests
    for proposal in proposals:
        assert proposal.usable and proposal.kernel is not None
        edit = proposal.edit
        assert edit.proposer == "heuristic" and edit.category in CATEGORIES and len(edit.rationale) > 30
        assert apply_edit(kernel, edit) == proposal.kernel  # the edit alone reproduces the kernel


def test_deterministic_for_a_seed_and_varied_across_seeds() -> None:
    def run(seed: int) -> list[str]:
        return [p.edit.payload for p in HeuristicProposer(seed=seed).propose(context(), 6)]

    assert run(3) == run(3)
    assert len({tuple(run(seed)) for seed in range(8)}) > 1


def test_never_reproposes_tried_kernels() -> None:
    proposer = HeuristicProposer()
    first = proposer.propose(context(), 4)
    tried = frozenset(p.kernel.digest for p in first if p.kernel is not None)
    second = proposer.propose(context(tried_digests=tried), 50)
    assert second and not {p.kernel.digest for p in second if p.kernel is not None} & tried


def test_untried_moves_run_out_and_cover_every_knob_value() -> None:
    proposer, tried, values, count = HeuristicProposer(), frozenset[str](), set(), 0
    for _ in range(20):
        batch = proposer.propose(context(tried_digests=tried), 4)
        if not batch:
            break
        count += len(batch)
        values |= {p.edit.payload for p in batch if p.edit.kind == "knob"}
        tried |= {p.kernel.digest for p in batch if p.kernel is not None}
    assert batch == [] and len(tried) == count  # every move was eventually proposed, none twice
    assert values == {f"BLOCK_SIZE={v}" for v in (32, 64, 128, 512, 1024)}


def test_memory_bound_diagnosis_ranks_memory_moves_first() -> None:
    relu = DATA / "relu_literal.cu"
    diagnosis = "Memory-bound: DRAM throughput 91% of peak; loads are uncoalesced."
    top = HeuristicProposer().propose(context(relu, diagnosis_text=diagnosis), 3)
    assert all("memory" in p.edit.rationale for p in top)
    assert "Ranked up because the evidence points to memory limits." in top[0].edit.rationale


def test_register_spills_rank_occupancy_moves_first() -> None:
    spilling = CompileResult(
        ok=True,
        so_path=None,
        digest="d",
        arch="sm_90a",
        seconds=0.1,
        cached=False,
        resources=(KernelResources(name="silu_kernel", arch="sm_90a", registers=255, spill_stores=64),),
    )
    result = EvalResult(status=EvalStatus.OK, compile=spilling)
    assert bottleneck_signals("", result) == frozenset({"occupancy"})
    [top] = HeuristicProposer().propose(context(result=result), 1)
    assert top.edit.category in ("occupancy", "launch_config")


def test_failed_categories_on_the_path_rank_lower() -> None:
    proposer = HeuristicProposer()
    baseline = [p.edit.category for p in proposer.propose(context(), 20)]
    failed = tuple(
        HistoryEntry(Edit("search_replace", "", "occupancy", "launch bounds", "heuristic"), "compile_error")
        for _ in range(3)
    )
    demoted = [p.edit.category for p in proposer.propose(context(history=failed), 20)]
    assert sorted(baseline) == sorted(demoted)  # the same moves ...
    assert demoted.index("occupancy") > baseline.index("occupancy")  # ... with occupancy pushed back
    assert demoted[-1] == "occupancy"


def test_bottleneck_signals_from_text() -> None:
    text = "Compute-bound (FMA pipe 85%); achieved occupancy 30% limited by registers; long scoreboard stalls"
    assert bottleneck_signals(text, None) == frozenset({"compute", "occupancy", "latency"})
    assert bottleneck_signals("", None) == frozenset()


@pytest.mark.parametrize("path", SUITE_KERNELS + DATA_KERNELS, ids=lambda p: p.name)
def test_rewrites_are_not_offered_twice(path: Path) -> None:
    proposer = HeuristicProposer()
    for move in proposer.moves(context(path)):
        if move.edit.kind in ("search_replace", "flags") and not move.family.startswith("launch:"):
            child = ProposalContext(task=context(path).task, kernel=move.kernel)
            assert move.family not in [m.family for m in proposer.moves(child)]


@pytest.mark.parametrize("path", SUITE_KERNELS + DATA_KERNELS, ids=lambda p: p.name)
def test_proposals_pass_the_integrity_screen_like_their_parent(path: Path) -> None:
    ctx = context(path)
    strict = is_fp32_strict(ctx.task.meta)
    parent = screen_kernel(ctx.kernel, fp32_strict=strict).findings
    for proposal in HeuristicProposer().propose(ctx, 100):
        assert proposal.kernel is not None
        assert screen_kernel(proposal.kernel, fp32_strict=strict).findings == parent, proposal.edit.summary()


def test_signals_come_from_the_diagnosis_as_data() -> None:
    """Named bottlenecks and the bound decide the signals; the rendered text is only a fallback."""
    from optiml.propose.base import DiagnosisFacts
    from optiml.propose.heuristic import bottleneck_signals

    facts = DiagnosisFacts(bound="memory", bottlenecks=(("low_occupancy", 0.4), ("uncoalesced_loads", 0.3)))
    assert bottleneck_signals("compute-bound: fma pipe saturated", None, facts) == {"memory", "occupancy"}
    assert bottleneck_signals("compute-bound: fma pipe saturated", None, None) == {"compute"}
    assert bottleneck_signals("", None, DiagnosisFacts()) == frozenset()
