"""optiml bench without a GPU: suite discovery, metrics, sharding over workers, failures, resume."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from optiml.bench import BenchConfig, BenchRow, discover_suite, run_bench, suite_metrics
from optiml.bench.metrics import markdown
from optiml.errors import OptimlError
from optiml.store import RunStore

ROOT = Path(__file__).resolve().parents[2]


class IdleWorker:
    """A GPU thread's worker for jobs that run nothing on it: only stopped at the end."""

    def stop(self) -> None:
        pass


def write_tasks(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = folder / f"{name}.py"
        path.write_text("# a task file (the fake job never reads it)\n", encoding="utf-8")
        paths.append(path)
    return paths


def test_discovery_by_folder_glob_list_and_filter(tmp_path: Path) -> None:
    paths = write_tasks(tmp_path / "level1", ["1_relu", "2_softmax", "3_layernorm"])
    (tmp_path / "level1" / "_private.py").write_text("", encoding="utf-8")
    assert discover_suite(str(tmp_path / "level1")) == paths
    assert discover_suite(str(tmp_path / "level1" / "*soft*.py")) == [paths[1]]
    listing = tmp_path / "suite.txt"
    listing.write_text("# my suite\nlevel1/3_layernorm.py\n\nlevel1/1_relu.py  # first\n", encoding="utf-8")
    assert discover_suite(str(listing)) == [paths[2].resolve(), paths[0].resolve()]
    assert discover_suite(str(tmp_path / "level1"), "*norm*,relu") == [paths[0], paths[2]]
    with pytest.raises(OptimlError, match="no task matches"):
        discover_suite(str(tmp_path / "level1"), "conv")
    with pytest.raises(OptimlError, match="no task files"):
        discover_suite(str(tmp_path / "nothing-here"))
    listing.write_text("level1/missing.py\n", encoding="utf-8")
    with pytest.raises(OptimlError, match=r"suite.txt:1: no such task file"):
        discover_suite(str(listing))


def test_the_starter_suite_is_discovered() -> None:
    names = {p.stem for p in discover_suite(str(ROOT / "tasks"))}
    assert {"softmax", "matmul", "conv2d"} <= names
    assert {"sgemm_square", "conv3d", "avgpool2d"} <= names  # tasks/compute and tasks/memory too


def test_a_folder_includes_its_subfolders_but_not_hidden_or_private_ones(tmp_path: Path) -> None:
    top = write_tasks(tmp_path / "suite", ["b_top"])
    nested = write_tasks(tmp_path / "suite" / "compute", ["a_gemm"])
    write_tasks(tmp_path / "suite" / "_drafts", ["draft"])
    write_tasks(tmp_path / "suite" / ".cache", ["cached"])
    assert discover_suite(str(tmp_path / "suite")) == sorted([*top, *nested])


def row(task: str, best: float | None, eager: float, compile_ms: float, floor: float = 0.05) -> BenchRow:
    status = "verified" if best is not None else "failed"
    return BenchRow(task, f"/{task}.py", status, best_ms=best, baselines_ms={"eager": eager, "compile": compile_ms},
                    floor_ms=floor, reason="" if best else "no template for aten.foo")  # fmt: skip


def test_metrics_follow_kernelbench() -> None:
    rows = [row("a", 0.1, 0.2, 0.1), row("b", 0.1, 0.12, 0.2), row("c", 0.1, 0.08, 0.08), row("d", None, 1, 1)]
    metrics = suite_metrics(rows)
    assert metrics["correctness"] == pytest.approx(0.75)  # failures count in the denominator
    assert metrics["fast_0_vs_eager"] == pytest.approx(0.75)
    assert metrics["fast_1_vs_eager"] == pytest.approx(0.5)  # 2.0x and 1.2x
    assert metrics["fast_1.5_vs_eager"] == pytest.approx(0.25)
    assert metrics["fast_2_vs_eager"] == pytest.approx(0.0)  # strictly faster than 2x
    assert metrics["geomean_vs_eager"] == pytest.approx((2.0 * 1.2 * 0.8) ** (1 / 3))
    assert metrics["geomean_vs_compile"] == pytest.approx((1.0 * 2.0 * 0.8) ** (1 / 3))
    assert metrics["median_roofline_fraction"] == pytest.approx(0.5)
    assert metrics["not_verified"] == ["d"]
    table = markdown(rows, metrics)
    assert "| a | verified | 0.1000 | 0.2000 |  | 0.1000 | 2.00× |  | 1.00× | 50% |" in table  # no TF32 baseline
    assert "failed: no template for aten.foo" in table


class FakeWorker:
    def __init__(self, gpu: int | None, log: list[str]) -> None:
        self.gpu = gpu
        self.log = log
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self.log.append(f"stop {self.gpu}")


def test_tasks_are_sharded_over_gpus_and_a_failure_stays_a_row(tmp_path: Path) -> None:
    paths = write_tasks(tmp_path / "suite", [f"t{i}" for i in range(6)])
    log: list[str] = []
    workers: list[FakeWorker] = []
    barrier = threading.Barrier(2, timeout=10)

    def make_worker(gpu: int | None) -> FakeWorker:
        worker = FakeWorker(gpu, log)
        workers.append(worker)
        return worker

    def job(path: Path, worker: FakeWorker, gpu: int | None) -> BenchRow:
        assert worker.gpu == gpu  # a GPU's tasks run on that GPU's own worker
        if path.stem == "t0":
            barrier.wait()  # both GPUs are busy at once
        if path.stem == "t1":
            barrier.wait()
        if path.stem == "t3":
            raise RuntimeError("the worker died (simulated)\ntraceback lines")
        return row(path.stem, 0.1, 0.2, 0.15)

    rows = run_bench(paths, BenchConfig(gpus=(0, 1)), tmp_path / "out", job=job, make_worker=make_worker)
    assert [r.task for r in rows] == [p.stem for p in paths]  # suite order, whatever finished first
    assert {r.gpu for r in rows} == {0, 1}
    failed = [r for r in rows if r.status == "failed"]
    assert [r.task for r in failed] == ["t3"]
    assert failed[0].reason == "RuntimeError: the worker died (simulated)"
    assert all(w.stopped for w in workers) and len(workers) == 2
    state = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert len(state["rows"]) == 6 and state["metrics"]["verified"] == 5
    assert "| t3 | failed:" in (tmp_path / "out" / "bench.md").read_text()


def test_a_stopped_bench_resumes_where_it_stopped(tmp_path: Path) -> None:
    paths = write_tasks(tmp_path / "suite", ["a", "b", "c", "d"])
    stop = threading.Event()
    ran: list[str] = []

    def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
        ran.append(path.stem)
        if path.stem == "b":
            stop.set()  # as if Ctrl-C arrived while b ran: b is recorded, c and d are not started
        return row(path.stem, 0.1, 0.2, 0.15)

    first = run_bench(paths, BenchConfig(), tmp_path / "out", job=job, make_worker=lambda g: IdleWorker(), stop=stop)
    assert [r.task for r in first] == ["a", "b"]
    ran.clear()
    second = run_bench(paths, BenchConfig(), tmp_path / "out", job=job, make_worker=lambda g: IdleWorker())
    assert ran == ["c", "d"]  # nothing recorded is run again
    assert [r.task for r in second] == ["a", "b", "c", "d"]
    state = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))
    assert [s["tasks_run"] for s in state["sessions"]] == [2, 2]  # each run's share, wall time and utilisation
    assert state["total_wall_s"] == pytest.approx(sum(s["wall_s"] for s in state["sessions"]), abs=0.2)
    report = (tmp_path / "out" / "bench.md").read_text(encoding="utf-8")
    assert "over 2 runs" in report and "Run 1 (2 tasks, " in report and "Run 2" not in report


def test_a_corrupt_state_file_is_one_clear_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(OptimlError, match="not a bench state file"):
        run_bench([], BenchConfig(), out, job=lambda *a: None, make_worker=lambda g: IdleWorker())  # type: ignore[arg-type]


def test_cli_rejects_bad_arguments_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from optiml.cli import app

    runner = CliRunner()
    missing = runner.invoke(app, ["bench", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "no task files" in missing.output
    write_tasks(tmp_path / "s", ["x"])
    bad = runner.invoke(app, ["bench", str(tmp_path / "s"), "--gpus", "zero"])
    assert bad.exit_code == 2 and "--gpus" in bad.output


def _fake_factory(workdir: Path):  # type: ignore[no-untyped-def]
    """Runs inside a Ray actor: a job that needs no GPU and proves the task file travelled."""

    class Worker:
        def stop(self) -> None:
            pass

    def job(path: Path, worker: object, gpu: int | None) -> BenchRow:
        text = path.read_text(encoding="utf-8")
        if "BROKEN" in text:
            raise ValueError("the reference failed (simulated)")
        import os

        from optiml.kernel.source import KernelSource
        from optiml.store import NodeRecord, RunStore
        from optiml.values import EvalResult, EvalStatus, TimingStats

        best = 0.1 if path.with_name(path.stem + ".naive.cu").is_file() else 0.2
        kernel = KernelSource(f"int {path.stem}_marker;\n")
        with RunStore(workdir / "runs.db") as store:  # a search run in the actor's store, as the real job keeps
            run = store.create_run(task_name=path.stem, task_path=str(path), task_digest="t", strategy="mcts",
                                   config_json="{}", root=kernel)  # fmt: skip
            node = NodeRecord(kernel.digest, None, None, depth=0, prior=1.0, seq=0, reward=None, closed_reason="")
            timing = TimingStats(median_ms=best, q1_ms=best, q3_ms=best, min_ms=best, max_ms=best, trials=5)
            result = EvalResult(status=EvalStatus.OK, message="ok", timing=timing)
            store.record_evaluation(run.id, node=node, kernel=kernel, result=result, elapsed_s=1.0, cost_usd=0.0)
        return BenchRow(path.stem, str(path), "verified", best_ms=best, baselines_ms={"eager": 0.2},
                        plan=f"pid {os.getpid()}", run_id=run.id)  # fmt: skip

    return job, lambda gpu: Worker()


def test_a_local_ray_cluster_runs_the_bench(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    import sys

    from optiml.bench.cluster import ray_workers

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the actors cannot import this test module
    paths = write_tasks(tmp_path / "suite", ["a", "b", "c", "d"])
    (tmp_path / "suite" / "b.naive.cu").write_text("// shipped kernel\n", encoding="utf-8")
    paths[2].write_text("BROKEN\n", encoding="utf-8")
    try:
        store_path = tmp_path / "out" / "runs.db"
        config, make_worker, job = ray_workers(None, BenchConfig(gpus=(0, 1)), _fake_factory, store_path)
        assert len(config.gpus) == 2  # no GPUs in this cluster: one CPU actor per requested slot
        rows = run_bench(paths, config, tmp_path / "out", job=job, make_worker=make_worker)
    finally:
        ray.shutdown()
    assert [r.task for r in rows] == ["a", "b", "c", "d"]
    by_task = {r.task: r for r in rows}
    assert by_task["b"].best_ms == 0.1 and by_task["a"].best_ms == 0.2  # the .naive.cu travelled with b
    assert by_task["c"].status == "failed" and "simulated" in by_task["c"].reason
    assert all(r.plan.startswith("pid ") for r in rows if r.verified)
    assert {r.plan for r in rows if r.verified} != set()
    state = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert state["metrics"]["verified"] == 3  # the driver wrote the same state a local bench writes
    with RunStore(store_path) as store:  # every actor's search run was gathered into the driver's store
        runs = {r.id: r for r in store.runs()}
        assert set(runs) == {r.run_id for r in rows if r.verified}
        for run_id, run in runs.items():
            assert store.verified_times(run_id) == {run.root_digest: by_task[run.task_name].best_ms}
            assert store.kernel(run.root_digest).code == f"int {run.task_name}_marker;\n"


def test_ray_missing_or_unreachable_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from optiml.bench.cluster import ray_workers

    with pytest.raises(OptimlError, match="cannot connect to a Ray cluster"):
        ray_workers("127.0.0.1:1", BenchConfig())
