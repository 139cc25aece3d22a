"""benchmarks/clock_agreement.py without a GPU: kernels found in a bench folder's run store, the fallbacks,
and the summary against issue 38's targets."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from benchmark_scripts import benchmark_module
from optiml.kernel.source import KernelSource
from optiml.store import NodeRecord, RunStore
from optiml.task import load_task
from optiml.values import EvalResult, EvalStatus, TimingStats

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return benchmark_module("clock_agreement")


def bench_folder(folder: Path, task: Path, kernel: KernelSource) -> None:
    """A bench folder as `optiml bench` leaves it: bench.json naming the run, runs.db holding its kernels."""
    folder.mkdir()
    with RunStore(folder / "runs.db") as store:
        root = KernelSource("int root;\n")
        run = store.create_run(task_name=task.stem, task_path=str(task), task_digest="t", strategy="greedy",
                               config_json="{}", root=root)  # fmt: skip
        for seq, (source, ms) in enumerate(((root, 2.0), (kernel, 0.5))):
            node = NodeRecord(source.digest, None, None, depth=seq, prior=1.0, seq=seq, reward=None, closed_reason="")
            timing = TimingStats(median_ms=ms, q1_ms=ms, q3_ms=ms, min_ms=ms, max_ms=ms, trials=5)
            result = EvalResult(status=EvalStatus.OK, message="ok", timing=timing)
            store.record_evaluation(run.id, node=node, kernel=source, result=result, elapsed_s=1.0, cost_usd=0.0)
    row = {"task": task.stem, "file": str(task), "status": "verified", "run_id": run.id, "best_ms": 0.5}
    failed = {"task": "other", "file": "/other.py", "status": "failed", "run_id": "", "best_ms": None}
    (folder / "bench.json").write_text(json.dumps({"rows": [row, failed]}), encoding="utf-8")


def test_the_kernel_comes_from_the_bench_then_the_flag_then_the_naive_file(script: ModuleType, tmp_path: Path) -> None:
    silu = ROOT / "tasks" / "silu.py"
    best = KernelSource("int best;\n")
    bench_folder(tmp_path / "bench", silu, best)
    found = script.bench_kernels(tmp_path / "bench")
    assert list(found) == [str(silu.resolve())]
    task = load_task(silu)
    kernel, source, bench_ms, store = script.kernel_for(task, silu, found, {})
    assert kernel == best and source == "bench run" and bench_ms == 0.5 and store == tmp_path / "bench" / "runs.db"
    given = tmp_path / "mine.cu"
    mine = '#include "optiml.h"\nextern "C" int optiml_forward() { return 0; }  // mine\n'
    given.write_text(mine, encoding="utf-8")
    kernel, source, _, store = script.kernel_for(task, silu, {}, {"silu": given})
    assert kernel.code == mine and source == str(given) and store is None
    kernel, source, _, _ = script.kernel_for(task, silu, {}, {})
    assert source == "naive kernel" and kernel == KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")


def test_the_summary_holds_the_issue_s_targets(script: ModuleType) -> None:
    rows = [
        {"task": "a", "ratio": 1.02, "ratio_warm": 1.1, "over_4gib": True, "kernelbench_passed": True},
        {"task": "b", "ratio": 0.97, "ratio_warm": 0.9, "over_4gib": False, "kernelbench_passed": False},
        {"task": "c", "ratio": 1.08, "ratio_warm": 1.3, "over_4gib": True, "kernelbench_passed": True},
        {"task": "d", "ratio": None, "over_4gib": True},  # the user's process failed: not counted
    ]
    done = script.summary(rows)
    assert done["tasks"] == 4 and done["ratio_tasks"] == 3 and done["over_4gib"] == 2
    assert done["median_ratio"] == pytest.approx(1.02) and done["max_abs_ratio_minus_1"] == pytest.approx(0.08)
    assert done["median_ratio_warm"] == pytest.approx(1.1) and done["max_abs_ratio_warm_minus_1"] == pytest.approx(0.3)
    assert done["median_within_5pct"] and done["all_within_10pct"]
    assert done["kernelbench_passed"] == 2 and done["not_measured"] == ["d"]
    assert "median_ratio_host_end" not in done and "median_judge_residual_ms" not in done
    assert "median_roofline_fraction_user" not in done


def test_the_roofline_share_is_the_floor_over_the_user_s_time(script: ModuleType) -> None:
    assert script.roofline_fraction(0.9, 1.0) == pytest.approx(0.9)
    assert script.roofline_fraction(None, 1.0) is None and script.roofline_fraction(0.9, None) is None
    rows = [
        {"task": "a", "ratio": 1.0, "roofline_fraction_user": 0.8},
        {"task": "b", "ratio": 1.0, "roofline_fraction_user": 0.95},
        {"task": "c", "ratio": 1.0, "roofline_fraction_user": 0.5},
        {"task": "d", "ratio": None, "roofline_fraction_user": None},
    ]
    assert script.summary(rows)["median_roofline_fraction_user"] == pytest.approx(0.8)
    rows[2]["ratio"] = 1.12
    assert not script.summary(rows)["all_within_10pct"]


def test_the_summary_compares_the_two_window_ends_and_the_residual(script: ModuleType) -> None:
    """With --also-host-end each row has both ends' ratios; the residual is judge minus the stream's own events."""
    rows = [
        {"task": "a", "ratio": 1.01, "ratio_host_end": 1.09, "judge_residual_ms": 0.02},
        {"task": "b", "ratio": 0.99, "ratio_host_end": 1.18, "judge_residual_ms": 0.04},
        {"task": "c", "ratio": 1.03, "ratio_host_end": 1.05, "judge_residual_ms": None},
    ]
    done = script.summary(rows)
    assert done["median_ratio_host_end"] == pytest.approx(1.09) and done["ratio_host_end_tasks"] == 3
    assert done["median_judge_residual_ms"] == pytest.approx(0.03)
