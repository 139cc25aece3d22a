"""A stored run read into what its report shows: the task, the tree, the best path, failures, spend.

Read-only: :func:`load_run_report` opens the run store (and the LLM calls in the same file) and
returns a :class:`RunReport`; nothing here renders. Times of the root and the best are the final
interleaved re-timing's where the run got that far (as ``optiml show`` reports them), else the
search-time ones; every per-edit gain is search-time, parent against child, with the band the two
timings' spreads give (:class:`optiml.values.Speedup`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optiml.errors import OptimlError
from optiml.kernel.source import KernelSource
from optiml.report.diff import SourceDiff, source_diff
from optiml.report.evidence import Evidence, parse_evidence
from optiml.report.llm_calls import LLMSection, load_llm_section
from optiml.report.roofline import RooflineView, roofline_view
from optiml.report.task_info import TaskInfo, load_task_info
from optiml.search.queries import best_path
from optiml.store import EDIT_EVALUATED, EDIT_NOT_APPLIED, EditRecord, RunRecord, RunStore
from optiml.values import Edit, EvalResult, Speedup, TimingStats

NOT_APPLIED = "not applied"  # the failure kind of proposals that yielded no kernel
REFERENCE_NAMES = {"eager": "PyTorch eager", "compile": "torch.compile"}


def reference_name(mode: str) -> str:
    return REFERENCE_NAMES.get(mode, mode)


@dataclass
class NodeView:
    """One evaluated candidate with its place in the tree and what the report shows of it."""

    number: int  # 1-based evaluation order
    digest: str
    parent: str | None
    parent_number: int | None
    depth: int
    edit: Edit | None  # None for the root
    result: EvalResult
    reward: float | None
    closed_reason: str
    diff: SourceDiff | None  # against the parent
    gain: Speedup | None  # the parent's search-time timing over this one's, when both verified
    evidence: Evidence | None  # the profiler's diagnosis, for the nodes that were profiled
    on_path: bool = False
    is_best: bool = False
    children: list[NodeView] = field(default_factory=list)
    skipped: list[EditRecord] = field(default_factory=list)  # proposals from here that were not evaluated

    @property
    def status(self) -> str:
        return self.result.status.value

    @property
    def timing(self) -> TimingStats | None:
        return self.result.timing

    @property
    def seconds(self) -> float:
        """The evaluation's own time: the sum of its phases (compile, load, verify, time, …)."""
        return sum(self.result.phase_seconds.values())


@dataclass(frozen=True)
class MessageGroup:
    message: str
    numbers: tuple[int, ...]  # the failed nodes' numbers; for NOT_APPLIED, the nodes the edits were proposed at


@dataclass(frozen=True)
class FailureKind:
    kind: str  # an EvalStatus value, or NOT_APPLIED
    count: int
    messages: tuple[MessageGroup, ...]  # most frequent first


@dataclass(frozen=True)
class RunReport:
    run: RunRecord
    config: dict[str, Any]
    task: TaskInfo
    nodes: tuple[NodeView, ...]  # evaluation order; nodes[0] is the root
    path: tuple[NodeView, ...]  # root first, best last
    root_kernel: KernelSource
    best_kernel: KernelSource
    overall_diff: SourceDiff
    root_timing: TimingStats | None  # re-timed where available
    best_timing: TimingStats | None
    retimed: bool  # root_timing and best_timing come from the final re-timing
    references: dict[str, TimingStats]  # "eager", "compile": re-timed with root and best, else timed at the start
    references_retimed: bool  # references come from the final re-timing's rounds
    edit_counts: dict[str, int]
    failures: tuple[FailureKind, ...]
    llm: LLMSection | None
    roofline: RooflineView | None

    @property
    def root(self) -> NodeView:
        return self.nodes[0]

    @property
    def best(self) -> NodeView:
        return self.path[-1]

    @property
    def speedup(self) -> Speedup | None:
        if self.root_timing is None or self.best_timing is None:
            return None
        return Speedup.between(self.root_timing, self.best_timing)

    def reference_speedup(self, name: str) -> Speedup | None:
        reference = self.references.get(name)
        if reference is None or self.best_timing is None:
            return None
        return Speedup.between(reference, self.best_timing)

    @property
    def evaluations(self) -> int:
        return len(self.nodes)


def load_run_report(store_path: Path, run_id: str) -> RunReport:
    """The report data of ``run_id`` (a unique prefix does) in the store at ``store_path``."""
    if not store_path.exists():
        raise OptimlError(f"{store_path}: no run store yet (run `optiml optimize` first)")
    with RunStore(store_path) as store:
        run = store.get_run(run_id)
        nodes = _nodes(store, run)
        if not nodes:
            raise OptimlError(f"run {run.id} has no evaluated kernel yet: nothing to report")
        chosen = best_path(store, run.id)
        retimes = store.retimes(run.id)
        retimed_references = store.retimed_references(run.id)
        edit_records = store.edits(run.id)
        root_kernel, best_kernel = store.kernel(run.root_digest), chosen.best_kernel
    by_digest = {n.digest: n for n in nodes}
    path = _mark_path(by_digest, chosen.best_digest)
    for record in edit_records:
        if record.outcome != EDIT_EVALUATED and record.parent_digest in by_digest:
            by_digest[record.parent_digest].skipped.append(record)
    root, best = nodes[0], path[-1]
    retimed = root.digest in retimes and best.digest in retimes
    root_timing = retimes[root.digest] if retimed else root.timing
    best_timing = retimes[best.digest] if retimed else best.timing
    task = load_task_info(run)
    references_retimed = retimed and bool(retimed_references)
    references = retimed_references if references_retimed else dict(root.result.reference)
    points = {"root": root_timing, "best": best_timing, **{reference_name(k): v for k, v in references.items()}}
    return RunReport(
        run=run,
        config=_config(run),
        task=task,
        nodes=tuple(nodes),
        path=path,
        root_kernel=root_kernel,
        best_kernel=best_kernel,
        overall_diff=source_diff(root_kernel, best_kernel),
        root_timing=root_timing,
        best_timing=best_timing,
        retimed=retimed,
        references=references,
        references_retimed=references_retimed,
        edit_counts=dict(Counter(r.outcome for r in edit_records)),
        failures=_failures(nodes, edit_records),
        llm=load_llm_section(store_path, run.id),
        roofline=roofline_view(task.task, {k: v.median_ms for k, v in points.items() if v is not None}),
    )


def _nodes(store: RunStore, run: RunRecord) -> list[NodeView]:
    """Every evaluated node, in evaluation order, linked to its children."""
    results = store.evaluations(run.id)
    profiles = store.profiles(run.id)
    edits = {e.id: e.edit for e in store.edits(run.id)}
    kernels: dict[str, KernelSource] = {}
    views: dict[str, NodeView] = {}
    for number, record in enumerate(store.nodes(run.id), 1):
        result = results.get(record.digest)
        if result is None:  # recorded atomically with its node; a missing one is a damaged store
            raise OptimlError(f"{store.path}: run {run.id} has node {record.digest} without its evaluation")
        kernels[record.digest] = store.kernel(record.digest)
        parent = views.get(record.parent_digest) if record.parent_digest is not None else None
        view = NodeView(
            number=number,
            digest=record.digest,
            parent=record.parent_digest,
            parent_number=parent.number if parent is not None else None,
            depth=record.depth,
            edit=edits.get(record.edit_id) if record.edit_id is not None else None,
            result=result,
            reward=record.reward,
            closed_reason=record.closed_reason,
            diff=source_diff(kernels[parent.digest], kernels[record.digest]) if parent is not None else None,
            gain=_gain(parent.timing, result.timing) if parent is not None else None,
            evidence=parse_evidence(profiles[record.digest]) if record.digest in profiles else None,
        )
        if parent is not None:
            parent.children.append(view)
        views[record.digest] = view
    return list(views.values())


def _gain(parent: TimingStats | None, child: TimingStats | None) -> Speedup | None:
    if parent is None or child is None or child.median_ms <= 0:
        return None
    return Speedup.between(parent, child)


def _mark_path(nodes: dict[str, NodeView], best_digest: str) -> tuple[NodeView, ...]:
    chain: list[NodeView] = []
    digest: str | None = best_digest
    while digest is not None and digest in nodes:
        node = nodes[digest]
        node.on_path = True
        chain.append(node)
        digest = node.parent
    if chain:
        chain[0].is_best = True
    return tuple(reversed(chain))


def _failures(nodes: list[NodeView], edits: list[EditRecord]) -> tuple[FailureKind, ...]:
    groups: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for node in nodes:
        if not node.result.ok:
            groups[node.status][node.result.message or "(no message)"].append(node.number)
    numbers = {n.digest: n.number for n in nodes}
    for record in edits:
        if record.outcome == EDIT_NOT_APPLIED and record.parent_digest in numbers:
            groups[NOT_APPLIED][record.message or "(no message)"].append(numbers[record.parent_digest])
    kinds = []
    for kind, messages in groups.items():
        ordered = sorted(messages.items(), key=lambda item: (-len(item[1]), item[0]))
        kinds.append(
            FailureKind(
                kind=kind,
                count=sum(len(found) for found in messages.values()),
                messages=tuple(MessageGroup(message, tuple(found)) for message, found in ordered),
            )
        )
    return tuple(sorted(kinds, key=lambda k: (-k.count, k.kind)))


def _config(run: RunRecord) -> dict[str, Any]:
    try:
        data = json.loads(run.config_json)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
