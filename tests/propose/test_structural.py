"""The structural proposer: typed, replayable edits of a template kernel's configurations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest

from optiml.kernel.source import KernelSource
from optiml.propose.base import DiagnosisFacts, Proposal, ProposalContext
from optiml.propose.edits import EDIT_KINDS, apply_edit
from optiml.propose.errors import EditApplyError
from optiml.propose.structural import OfflineProposer, StructuralProposer, describe_payload, replay
from optiml.task import Task, load_task
from optiml.templates.assemble import MARKER, read_marker
from optiml.templates.base import configs_from_json, configs_to_json
from optiml.templates.kernels import VARIANT, TemplateKernels, template_kernels
from optiml.values import Edit, EvalResult, EvalStatus, TimingStats

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "tasks" / "softmax.py"
NAIVE = ROOT / "tasks" / "softmax.naive.cu"


@cache
def softmax() -> tuple[Task, TemplateKernels, KernelSource]:
    task = load_task(SOFTMAX)
    kernels = template_kernels(task)
    return task, kernels, kernels.render(kernels.default())


def context(
    kernel: KernelSource | None = None,
    result: EvalResult | None = None,
    tried_digests: frozenset[str] = frozenset(),
    diagnosis: DiagnosisFacts | None = None,
) -> ProposalContext:
    task, _, default = softmax()
    return ProposalContext(task, kernel or default, result=result, tried_digests=tried_digests, diagnosis=diagnosis)


def timed(time_ms: float, floor_ms: float) -> EvalResult:
    timing = TimingStats(median_ms=time_ms, q1_ms=time_ms, q3_ms=time_ms, min_ms=time_ms, max_ms=time_ms, trials=5)
    return EvalResult(status=EvalStatus.OK, timing=timing, floor_ms=floor_ms)


def fingerprint(proposals: Sequence[Proposal]) -> list[tuple[str, str]]:
    return [(p.edit.payload, p.kernel.digest if p.kernel else "") for p in proposals]


def test_proposals_are_typed_template_edits() -> None:
    _, kernels, default = softmax()
    proposals = StructuralProposer(seed=0).propose(context(), n=100)
    assert len(proposals) == len(kernels.neighbours(kernels.default()))
    assert len(proposals) >= 4
    start = read_marker(default.code)
    assert start == kernels.default()
    for proposal in proposals:
        edit = proposal.edit
        assert isinstance(edit, Edit)
        assert edit.kind == "template"
        assert edit.proposer == "structural"
        assert proposal.usable, proposal.error
        data = json.loads(edit.payload)
        assert isinstance(data, list) and len(data) == len(kernels.plan.groups)
        assert all(set(item) == {"variant", "params"} for item in data)
        configs = configs_from_json(edit.payload)
        assert configs_to_json(configs) == edit.payload
        assert sum(a != b for a, b in zip(configs, start, strict=True)) == 1, "one kernel changes"
        assert proposal.kernel is not None
        assert read_marker(proposal.kernel.code) == configs
        assert proposal.kernel.digest != default.digest
        assert describe_payload(edit.payload) == ", ".join(c.label() for c in configs)
    categories = {p.edit.category for p in proposals}
    assert "algorithm" in categories  # variant switches
    assert categories & {"launch_config", "vectorization", "shared_memory"}  # knob moves


def test_replay_gives_the_same_kernel() -> None:
    task, kernels, _ = softmax()
    for proposal in StructuralProposer(seed=3).propose(context(), n=100):
        assert proposal.kernel is not None
        assert replay(task, proposal.edit.payload).digest == proposal.kernel.digest
        assert replay(task, proposal.edit.payload, kernels).digest == proposal.kernel.digest


def test_proposals_are_deterministic_for_a_seed() -> None:
    first = fingerprint(StructuralProposer(seed=7).propose(context(), n=100))
    again = fingerprint(StructuralProposer(seed=7).propose(context(), n=100))
    assert first == again
    other = fingerprint(StructuralProposer(seed=8).propose(context(), n=100))
    assert sorted(other) == sorted(first)  # another seed may reorder ties, never change the set
    assert fingerprint(StructuralProposer(seed=7).propose(context(), n=3)) == first[:3]


def test_tried_kernels_are_skipped() -> None:
    proposals = StructuralProposer(seed=0).propose(context(), n=100)
    tried = frozenset(p.kernel.digest for p in proposals[:2] if p.kernel)
    again = StructuralProposer(seed=0).propose(context(tried_digests=tried), n=100)
    assert len(again) == len(proposals) - 2
    assert not {p.kernel.digest for p in again if p.kernel} & tried


def test_a_kernel_without_the_template_marker_gets_no_proposals() -> None:
    naive = KernelSource.from_file(NAIVE)
    assert read_marker(naive.code) is None
    assert StructuralProposer().propose(context(naive), n=8) == []


def test_a_marker_for_another_plan_gets_no_proposals() -> None:
    _, kernels, default = softmax()
    two = [c.to_dict() for c in [*kernels.default(), *kernels.default()]]
    _, rest = default.code.split("\n", 1)
    wrong = KernelSource(f"{MARKER} {json.dumps({'configs': two})}\n{rest}")
    assert read_marker(wrong.code) == [*kernels.default(), *kernels.default()]
    assert StructuralProposer().propose(context(wrong), n=8) == []


def test_a_task_without_templates_gets_no_proposals() -> None:
    unplannable = load_task(ROOT / "tests" / "tasks" / "unplannable" / "sort_rows.py")
    _, _, default = softmax()
    assert StructuralProposer().propose(ProposalContext(unplannable, default), n=8) == []


@pytest.mark.parametrize(
    "floor_ms, first_kind",
    [(0.2, "variant"), (0.49, "variant"), (0.9, "knob"), (0.6, "knob")],
)
def test_ranking_follows_the_distance_to_the_floor(floor_ms: float, first_kind: str) -> None:
    _, kernels, _ = softmax()
    moves = kernels.neighbours(kernels.default())
    n_first = sum(m.kind == first_kind for m in moves)
    assert 0 < n_first < len(moves)
    ranked = StructuralProposer(seed=1).rank(moves, context(result=timed(1.0, floor_ms)))
    assert sorted(ranked, key=repr) == sorted(moves, key=repr)
    assert {m.kind for m in ranked[:n_first]} == {first_kind}
    proposals = StructuralProposer(seed=1).propose(context(result=timed(1.0, floor_ms)), n=n_first)
    is_variant = first_kind == "variant"
    assert all((p.edit.category == "algorithm") == is_variant for p in proposals)
    assert all("of the roofline" in p.edit.rationale for p in proposals)


def test_profiler_facts_rank_the_moves_they_address() -> None:
    """Diagnosis as data: the roofline fraction overrides floor/time, a named bottleneck lifts its moves."""
    _, kernels, _ = softmax()
    moves = kernels.neighbours(kernels.default())
    near = DiagnosisFacts(bound="memory", bottlenecks=(), roofline_fraction=0.95)
    ranked = StructuralProposer(seed=1).rank(moves, context(result=timed(1.0, 0.1), diagnosis=near))
    assert ranked[0].kind == "knob"  # 0.95 of the roofline per the profiler, though floor/time says 10 %
    occupancy = DiagnosisFacts(bound="latency", bottlenecks=(("low_occupancy", 0.6),), roofline_fraction=0.9)
    ranked = StructuralProposer(seed=1).rank(moves, context(result=timed(1.0, 0.9), diagnosis=occupancy))
    first = ranked[0].note.split(": ", 1)[1].split(" ", 1)[0]
    assert first in ("threads", "blocks_per_sm", "items")
    proposals = StructuralProposer(seed=1).propose(context(result=timed(1.0, 0.9), diagnosis=occupancy), n=2)
    assert all("profiler: low_occupancy" in p.edit.rationale for p in proposals)


def test_without_a_timed_result_structure_comes_first() -> None:
    _, kernels, _ = softmax()
    moves = kernels.neighbours(kernels.default())
    failed = EvalResult(status=EvalStatus.WRONG_ANSWER, floor_ms=0.9)
    for result in (None, failed):
        ranked = StructuralProposer().rank(moves, context(result=result))
        n_variant = sum(m.kind == "variant" for m in moves)
        assert {m.kind for m in ranked[:n_variant]} == {"variant"}


class RecordingProposer:
    name = "heuristic"

    def __init__(self) -> None:
        self.calls: list[ProposalContext] = []

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        self.calls.append(context)
        edit = Edit(kind="knob", payload="BLOCK=128", category="launch_config", rationale="r", proposer=self.name)
        return [Proposal(edit, None, "not applied")]


def test_the_offline_proposer_routes_by_kernel_kind() -> None:
    heuristic = RecordingProposer()
    offline = OfflineProposer(StructuralProposer(seed=0), heuristic)
    from_template = offline.propose(context(), n=4)
    assert len(from_template) == 4
    assert all(p.edit.proposer == "structural" for p in from_template)
    assert heuristic.calls == []
    naive = KernelSource.from_file(NAIVE)
    from_naive = offline.propose(context(naive), n=4)
    assert [p.edit.proposer for p in from_naive] == ["heuristic"]
    assert len(heuristic.calls) == 1 and heuristic.calls[0].kernel == naive


def test_a_template_edit_is_an_edit_kind_that_replays_through_apply_edit() -> None:
    task, _, default = softmax()
    for proposal in StructuralProposer(seed=0).propose(context(), n=6):
        assert proposal.edit.kind in EDIT_KINDS
        assert apply_edit(default, proposal.edit, task) == proposal.kernel


def test_a_move_is_typed_not_prose() -> None:
    _, kernels, _ = softmax()
    moves = kernels.neighbours(kernels.default())
    variants = [m for m in moves if m.kind == "variant"]
    knobs = [m for m in moves if m.kind == "knob"]
    assert variants and knobs
    for move in variants:
        assert move.knob == VARIANT and move.config.variant == move.after != move.before
    for move in knobs:
        assert move.config.get(move.knob) == move.after != move.before
        assert move.note.endswith(f"{move.knob} {move.before} → {move.after}")


@pytest.mark.parametrize(
    ("kernel", "payload", "with_task", "error"),
    [
        ("template", None, False, "needs the task"),
        ("naive", None, True, "no optiml-template line"),
        ("template", "{not json", True, "JSON list of configurations"),
        ("template", "[]", True, "the edit 0"),
        ("template", '[{"variant": "no_such_variant", "params": {}}]', True, "does not render"),
    ],
)
def test_a_template_edit_that_cannot_apply_says_why_in_one_line(
    kernel: str, payload: str | None, with_task: bool, error: str
) -> None:
    task, kernels, default = softmax()
    parent = default if kernel == "template" else KernelSource.from_file(NAIVE)
    edit = Edit("template", payload or configs_to_json(kernels.default()), "algorithm", "test", "structural")
    with pytest.raises(EditApplyError, match=error) as raised:
        apply_edit(parent, edit, task if with_task else None)
    assert "\n" not in str(raised.value)
