"""What a report reads from a stored run: the tree, the best path, gains, evidence, failures, spend."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from report_helpers import N, make_run, manual_run

from optiml.errors import OptimlError
from optiml.profile.profiler import gpu_name
from optiml.report import load_run_report, render_run_html
from optiml.report.run_data import NOT_APPLIED
from optiml.search import best_path
from optiml.store import RunStore
from optiml.values import Speedup


def test_the_tree_holds_every_evaluation_under_its_parent(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id[:12])  # a unique prefix does, as for `optiml show`
    with RunStore(store_path) as store:
        assert report.evaluations == store.evaluation_count(run_id) == 24
        records = store.nodes(run_id)
    assert [n.digest for n in report.nodes] == [r.digest for r in records]
    assert report.root.parent is None and report.root.diff is None and report.root.edit is None
    by_digest = {n.digest: n for n in report.nodes}
    reached = {report.root.digest}
    stack = [report.root]
    while stack:
        node = stack.pop()
        for child in node.children:
            assert child.parent == node.digest and child.parent_number == node.number
            assert child.depth == node.depth + 1 and child.edit is not None and child.diff is not None
            reached.add(child.digest)
            stack.append(child)
    assert reached == set(by_digest)  # one tree: every node under the root


def test_the_best_path_is_the_one_optiml_show_reports(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id)
    with RunStore(store_path) as store:
        shown = best_path(store, run_id)
        retimes = store.retimes(run_id)
    assert report.best.digest == shown.best_digest == report.run.best_digest
    assert [n.edit for n in report.path[1:]] == [s.edit for s in shown.steps]
    assert all(n.on_path for n in report.path) and report.best.is_best
    assert sum(n.is_best for n in report.nodes) == 1
    for parent, node in zip(report.path, report.path[1:], strict=False):
        assert parent.timing is not None and node.timing is not None
        assert node.gain == Speedup.between(parent.timing, node.timing)
        assert node.diff is not None and node.diff.added >= 1 and node.diff.removed >= 1
    assert report.retimed and report.run.confirmed
    assert report.root_timing == retimes[report.root.digest] and report.best_timing == retimes[report.best.digest]
    assert report.speedup is not None and report.speedup.significant
    assert set(report.references) == {"eager", "compile"}


def test_profiler_evidence_is_read_back_into_its_parts(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id)
    profiled = [n for n in report.nodes if n.evidence is not None]
    assert profiled, "the search profiles the candidates near the best"
    evidence = {n.evidence.metrics[0][0].split(":")[0] for n in profiled if n.evidence is not None}
    assert evidence <= {"Kernel transpose_naive", "Kernel vecadd"}
    naive = next(n.evidence for n in profiled if n.evidence and "transpose_naive" in n.evidence.metrics[0][0])
    assert naive.bound == "memory" and naive.summary.startswith("memory at L2")
    assert naive.findings[0].text.startswith("uncoalesced global stores") and naive.findings[0].severity
    assert naive.findings[0].suggestion.startswith("make consecutive threads write consecutive addresses")
    assert "vs floor" in naive.roofline and "intensity 0.125 flop/B" in naive.roofline
    assert any(m.startswith("static analysis") for m in naive.missing)
    assert not naive.other


def test_failures_are_grouped_by_kind_with_their_messages(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id)
    with RunStore(store_path) as store:
        counts = store.status_counts(run_id)
        outcomes = store.edit_outcome_counts(run_id)
    kinds = {k.kind: k for k in report.failures}
    assert {k: v for k, v in counts.items() if k != "ok"} == {k: v.count for k, v in kinds.items() if k != NOT_APPLIED}
    assert kinds[NOT_APPLIED].count == outcomes["not_applied"]
    for kind in report.failures:
        assert sum(len(g.numbers) for g in kind.messages) == kind.count
    crashed = kinds["runtime_error"].messages[0]
    assert crashed.message.startswith("cudaErrorIllegalAddress")
    assert all(report.nodes[n - 1].status == "runtime_error" for n in crashed.numbers)
    skipped = sum(len(n.skipped) for n in report.nodes)
    assert skipped == sum(v for k, v in outcomes.items() if k != "evaluated")


def test_llm_calls_and_cost_come_from_the_same_store(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    llm = load_run_report(store_path, run_id).llm
    assert llm is not None and len(llm.calls) == 3
    assert [c.cached for c in llm.calls] == [False, False, True]
    assert llm.spend.paid.cost_usd == pytest.approx(0.025)
    assert llm.summary[0][0] == "LLM calls" and "3 (1 from the cache, free)" in llm.summary[0][1]


def test_the_roofline_places_root_best_and_baselines(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id)
    view = report.roofline
    assert view is not None
    assert [p.label for p in view.points] == ["root", "best", "PyTorch eager", "torch.compile"]
    assert view.roofline.min_bytes == 8 * N and view.roofline.flops == N and view.roofline.intensity == 0.125
    best = view.points[1]
    assert report.best_timing is not None and best.time_ms == report.best_timing.median_ms
    assert view.attained_flops(best) == pytest.approx(N / (best.time_ms * 1e-3))
    if gpu_name() is None:  # the roofs are said to be assumed, not this machine's
        assert view.peaks.source.endswith("no GPU visible here, NVIDIA H200 assumed")


def test_a_task_without_flops_has_only_the_bandwidth_side(tmp_path: Path) -> None:
    store_path, run_id = make_run(tmp_path, evaluations=4, flops=False, llm_calls=0)
    report = load_run_report(store_path, run_id)
    assert report.llm is None
    assert report.roofline is not None and report.roofline.roofline.flops is None
    assert report.roofline.bandwidth(report.roofline.points[0]) is not None


def test_a_task_file_gone_or_changed_is_said_and_the_report_still_reads(tmp_path: Path) -> None:
    store_path, run_id = manual_run(tmp_path)
    task_file = tmp_path / "scale.py"
    task_file.write_text(task_file.read_text() + "\n# edited\n")
    changed = load_run_report(store_path, run_id)
    assert "changed since the run" in changed.task.note and changed.task.source is not None
    assert changed.roofline is None  # not sized from a task that is not the run's
    task_file.unlink()
    gone = load_run_report(store_path, run_id)
    assert "no longer exists" in gone.task.note and gone.task.source is None


def test_an_unfinished_run_reports_search_time_figures(tmp_path: Path) -> None:
    store_path, run_id = manual_run(tmp_path)
    report = load_run_report(store_path, run_id)
    assert report.run.status == "running" and not report.retimed
    assert report.best is report.root and len(report.path) == 1
    assert report.root_timing == report.root.timing
    assert [k.kind for k in report.failures] == ["compile_error"]


def test_unknown_runs_and_missing_stores_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(OptimlError, match="no run store yet"):
        load_run_report(tmp_path / "none.db", "x")
    store_path, _ = manual_run(tmp_path)
    with pytest.raises(OptimlError, match="no run 'nope'"):
        load_run_report(store_path, "nope")


def test_references_retimed_with_root_and_best_replace_the_start_ones(tmp_path: Path) -> None:
    store_path, run_id = make_run(tmp_path, evaluations=12, llm_calls=0)
    before = load_run_report(store_path, run_id)
    assert before.retimed and not before.references_retimed
    assert "in the same rounds" not in render_run_html(before)
    with RunStore(store_path) as store:
        kernels = list(store.retimes(run_id).items())
        eager = replace(before.references["eager"], median_ms=before.references["eager"].median_ms * 1.1)
        store.record_retimes(run_id, 10, kernels, {"eager": eager})
    after = load_run_report(store_path, run_id)
    assert after.references_retimed and after.references == {"eager": eager}
    assert after.root_timing == before.root_timing and after.best_timing == before.best_timing
    assert after.reference_speedup("eager") == Speedup.between(eager, after.best_timing)
    assert "the PyTorch references" in render_run_html(after)
