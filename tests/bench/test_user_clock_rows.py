"""Bench rows and metrics with the user's clock: its figures are the headline, the judge's stay beside them
with the agreement, KernelBench's verdict is per row, and a failed measurement is a field, not a lost row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.bench import BenchConfig, BenchRow, suite_metrics
from optiml.bench import runner as bench_runner
from optiml.bench.metrics import FASTEST, JUDGE_CLOCK, USER_CLOCK, markdown
from optiml.bench.runner import read_state, write_state
from optiml.bench.user_clock import (
    RELEASE_BYTES,
    ClockStats,
    Timing,
    UserClockOptions,
    UserClockResult,
    Verdict,
    card_is_crowded,
    eval_block,
    judge_crowds_card,
    measure_for_bench,
)
from optiml.cli import app
from optiml.errors import WorkerError
from optiml.kernel.source import KernelSource
from optiml.store import RunStore
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]


class IdleWorker:
    """A GPU thread's worker for jobs that run nothing on it: only stopped at the end."""

    def stop(self) -> None:
        pass


def timing(ms: float) -> Timing:
    cold = ClockStats(median_ms=ms, mean_ms=ms * 1.1, std_ms=0.01, min_ms=ms * 0.9, max_ms=ms * 1.5, trials=100)
    warm = ClockStats(median_ms=ms * 0.8, mean_ms=ms * 0.8, std_ms=0.0, min_ms=ms * 0.8, max_ms=ms * 0.8, trials=10)
    return Timing(cold=cold, warm=warm)


def user(task: str, kernel: float, eager: float, default: float, compiled: float | None, passed: bool = True) -> dict:
    timings = {"model_new": timing(kernel), "eager": timing(eager), "eager_tf32": timing(default)}
    if compiled is not None:
        timings["compile"] = timing(compiled)
    reason = "" if passed else "differs from the reference"
    verdict = Verdict(passed, trials=5, passed_trials=5 * passed, tolerance=1e-4, max_abs_diff=1e-6, reason=reason)
    speedup = default * 1.1 / (kernel * 1.1)  # KernelBench's: mean over mean
    return UserClockResult(task, "H200", verdict=verdict, timings=timings, kernelbench_speedup=speedup).to_dict()


def row(task: str, judge: float, clock: dict | None) -> BenchRow:
    return BenchRow(task, f"/{task}.py", "verified", best_ms=judge, user_clock=clock,
                    baselines_ms={"eager": 2.0, "eager_tf32": 1.5, "compile": 1.0})  # fmt: skip


def test_the_user_s_clock_is_the_headline_and_the_judge_stays_beside_it() -> None:
    a_clock = user("a", 1.0, eager=2.0, default=1.5, compiled=1.2)
    a_clock["timings"]["compile"]["warm"]["median_ms"] = 0.72  # compile's launch cost, exposed cold, hides warm
    a = row("a", 3.0, a_clock)  # the judge read 3x slower
    b = row("b", 1.1, user("b", 1.0, eager=4.0, default=3.0, compiled=None, passed=False))
    assert a.clock == USER_CLOCK and a.speedup("eager") == pytest.approx(2.0)
    assert a.judge_speedup("eager") == pytest.approx(2.0 / 3.0)
    assert a.speedup(FASTEST) == pytest.approx(1.2) and b.speedup(FASTEST) == pytest.approx(3.0)  # no compile in b
    assert a.judge_speedup(FASTEST) == pytest.approx(1.0 / 3.0)
    assert a.agreement == pytest.approx(3.0) and b.agreement == pytest.approx(1.1)
    assert a.kernelbench == {"passed": True, "speedup": pytest.approx(1.5), "reason": ""}
    assert b.kernelbench is not None and b.kernelbench["passed"] is False
    metrics = suite_metrics([a, b, BenchRow("c", "/c.py", "failed", reason="no template")])
    assert metrics["clock"] == USER_CLOCK
    assert metrics["geomean_vs_eager"] == pytest.approx((2.0 * 4.0) ** 0.5)
    assert metrics["judge_geomean_vs_eager"] == pytest.approx((2.0 / 3.0 * 2.0 / 1.1) ** 0.5)
    assert metrics["fast_1.5_vs_fastest"] == pytest.approx(1 / 3)  # b only (3.0x); a is 1.2x; c counts as not fast
    assert metrics["median_agreement"] == pytest.approx(2.05) and metrics["max_agreement_error"] == pytest.approx(2.0)
    assert metrics["kernelbench_passed"] == 1 and metrics["kernelbench_pass_rate"] == pytest.approx(1 / 3)
    assert metrics["user_clock_failed"] == []
    # the judge's references (2.0, 1.5, 1.0 ms) against the user's process's: a timed all three, b no compile
    assert a.baseline_agreement == pytest.approx({"eager": 1.0, "eager_tf32": 1.0, "compile": 1.0 / 1.2})
    assert b.baseline_agreement == pytest.approx({"eager": 0.5, "eager_tf32": 0.5})
    assert metrics["median_eager_agreement"] == pytest.approx(0.75)
    assert metrics["median_compile_agreement"] == pytest.approx(1.0 / 1.2)
    # back to back, compile's launch cost hides: 0.72 ms a call against the kernel's 0.8 (cold: 1.2 against 1.0)
    assert metrics["warm_geomean_vs_compile"] == pytest.approx(0.9) and metrics["fast_1_vs_compile"] == pytest.approx(
        1 / 3
    )
    assert metrics["warm_fast_1_vs_compile"] == 0.0 and metrics["warm_geomean_vs_eager"] == metrics["geomean_vs_eager"]
    table = markdown([a, b], metrics)
    assert "| a | verified | 2.00× | 1.50× | 1.20× | 1.20× | 0.90× | 1.0000 | 3.0000 | 3.00 | pass | 1.50× |" in table
    failed = (
        "| b | verified | 4.00× | 3.00× |  | 3.00× |  | 1.0000 | 1.1000 | 1.10 | fail: differs from the reference |"
    )
    assert failed in table


def test_a_failed_measurement_is_a_field_and_takes_no_figure_from_the_judge(tmp_path: Path) -> None:
    failed = UserClockResult(task="a", error="the user's process timed out after 1800 s").to_dict()
    a = row("a", 1.0, failed)
    judged = row("b", 1.0, None)  # --no-user-clock, or a bench from before
    assert a.speedup("eager") is None and a.judge_speedup("eager") == pytest.approx(2.0)
    assert a.baseline_agreement == {} and judged.baseline_agreement == {}
    assert judged.clock == JUDGE_CLOCK and judged.speedup("eager") == pytest.approx(2.0)
    metrics = suite_metrics([a, judged])
    assert metrics["clock"] == f"{USER_CLOCK}; judge for the rest" and metrics["user_clock_failed"] == ["a"]
    assert metrics["fast_0_vs_eager"] == pytest.approx(0.5)  # a is verified but has no headline figure
    assert a.kernelbench == {"passed": None, "speedup": None, "reason": "the user's process timed out after 1800 s"}
    write_state(tmp_path, [a, judged], BenchConfig(), {})
    rows, _ = read_state(tmp_path)
    assert rows == [a, judged]  # the measurement survives the state file, and a resume reads it back
    document = json.loads((tmp_path / "bench.json").read_text())
    assert document["config"]["user_clock"] is True
    assert document["rows"][0]["kernelbench"]["reason"].endswith("timed out after 1800 s")
    assert "user clock: the user's process timed out" in (tmp_path / "bench.md").read_text()


def test_without_the_user_s_clock_the_metrics_and_table_are_the_judge_s() -> None:
    rows = [row("a", 1.0, None)]
    metrics = suite_metrics(rows)
    assert "clock" not in metrics and "judge_geomean_vs_eager" not in metrics and "median_agreement" not in metrics
    assert metrics["geomean_vs_fastest"] == pytest.approx(1.0)
    assert "| task | status | best ms | eager ms |" in markdown(rows, metrics)


def test_a_bench_measurement_that_cannot_run_is_a_field_not_an_exception() -> None:
    """No GPU here: the export is rendered, the child starts and cannot use CUDA; the row gets the reason."""
    task = load_task(ROOT / "tasks" / "silu.py")
    kernel = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")

    class Judge:  # the judge's worker, as far as the bench hook uses it: stopped to free a large task's GPU buffers
        stops = 0

        def stop(self) -> None:
            self.stops += 1

    judge = Judge()
    for footprint, crowded, stops in ((1 << 20, False, 0), (RELEASE_BYTES + 1, False, 1), (1 << 20, True, 2)):
        store = ROOT / "no-such-store.db"
        data = measure_for_bench(task, kernel, store, None, False, judge, footprint, crowded=crowded)
        result = UserClockResult.from_dict(data)
        assert result.task == "silu" and not result.ok
        assert result.error.startswith("loading the task or the export:") and "\n" not in result.error
        assert judge.stops == stops


def test_a_card_the_judge_holds_more_than_half_of_is_crowded() -> None:
    """31_VisionAttention's inputs are small, its reference's temporaries 8 GiB: with the judge's worker holding
    75 GiB of the card, KernelBench's check could not run its reference (H100, 2026-12-07)."""
    gib = 1 << 30
    assert card_is_crowded({"free_bytes": 2 * gib, "memory_bytes": 80 * gib})
    assert not card_is_crowded({"free_bytes": 60 * gib, "memory_bytes": 80 * gib})
    assert not card_is_crowded({"name": "a judge of an older version"})  # no figures: nothing to go by

    class Judge:
        def __init__(self, reply: dict | None) -> None:
            self.reply = reply

        def request(self, message: dict, timeout_s: float) -> dict:
            assert message == {"op": "hello"}
            if self.reply is None:
                raise WorkerError("the judge's worker exited (code 3)")
            return self.reply

    assert judge_crowds_card(Judge({"free_bytes": 2 * gib, "memory_bytes": 80 * gib}))
    assert not judge_crowds_card(Judge(None))  # a worker that died in the search costs the row nothing


def test_no_user_clock_reaches_the_bench_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "a.py").write_text("# never read\n", encoding="utf-8")
    seen: list[bool] = []

    def job_for(config: BenchConfig, out_dir: Path):  # type: ignore[no-untyped-def]
        seen.append(config.user_clock)
        return lambda path, worker, gpu: BenchRow(path.stem, str(path), "verified", best_ms=0.1)

    monkeypatch.setattr(bench_runner, "optimize_job", job_for)
    monkeypatch.setattr(bench_runner, "_worker_for", lambda gpu: IdleWorker())
    for flags, expected in (([], True), (["--no-user-clock"], False)):
        out = tmp_path / f"out{len(seen)}"
        result = CliRunner().invoke(app, ["bench", str(tmp_path / "suite"), "-o", str(out), *flags])
        assert result.exit_code == 0, result.output
        assert seen[-1] is expected
        assert json.loads((out / "bench.json").read_text())["config"]["user_clock"] is expected


@pytest.mark.parametrize("with_store", [False, True])  # optimize passes its run store (the export names it)
def test_the_eval_block_carries_the_measurement_its_speedups_and_the_agreement(
    with_store: bool, tmp_path: Path
) -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    kernel = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    options = UserClockOptions(device="cpu", correct_trials=1, perf_trials=2, torch_compile=False, warm_windows=1)
    store = None
    if with_store:
        store = tmp_path / "runs.db"
        RunStore(store).close()
    block = eval_block(task, kernel, judge_ms=1.0, options=options, store=store)
    assert block["error"] == ""  # the export was written and its process ran
    assert json.loads(json.dumps(block)) == block  # plain JSON for `optiml eval --json`
    assert block["task"] == "silu" and block["verdict"]["passed"] is False  # on the CPU the export needs CUDA
    assert set(block["speedups"]) == {"eager", "eager_tf32", "compile", "fastest"}
    assert block["agreement"] is None  # no ModelNew time to compare the judge's with


def test_the_roofline_share_is_on_the_headline_s_clock_with_the_judge_s_beside_it() -> None:
    a = row("a", 3.0, user("a", 1.0, eager=2.0, default=1.5, compiled=1.2))
    a.floor_ms = 0.9
    failed = row("b", 1.0, UserClockResult(task="b", error="out of memory").to_dict())
    failed.floor_ms = 0.5
    judged = row("c", 2.0, None)
    judged.floor_ms = 1.0
    assert a.roofline_fraction == pytest.approx(0.9) and a.judge_roofline_fraction == pytest.approx(0.3)
    assert failed.roofline_fraction is None and failed.judge_roofline_fraction == pytest.approx(0.5)
    assert judged.roofline_fraction == pytest.approx(0.5) == judged.judge_roofline_fraction
    metrics = suite_metrics([a, failed, judged])
    assert metrics["median_roofline_fraction"] == pytest.approx(0.7)  # a's 0.9 and c's 0.5
    assert metrics["judge_median_roofline_fraction"] == pytest.approx(0.5)  # 0.3, 0.5, 0.5
    assert a.to_dict()["judge_roofline_fraction"] == pytest.approx(0.3)


def test_a_row_whose_judge_left_compile_to_the_user_s_process_still_shows_its_compile_speedup() -> None:
    """With the user's clock on, the bench's judge times no torch.compile of its own: the row's speedups over
    compile (and the fastest) come from the user's process alone."""
    a = BenchRow("a", "/a.py", "verified", best_ms=1.0, baselines_ms={"eager": 2.0, "eager_tf32": 1.5},
                 user_clock=user("a", 1.0, eager=2.0, default=1.5, compiled=1.25))  # fmt: skip
    shown = a.to_dict()
    assert shown["speedups"]["compile"] == pytest.approx(1.25) and shown["speedups"][FASTEST] == pytest.approx(1.25)
    assert "compile" not in shown["judge_speedups"] and set(a.baseline_agreement) == {"eager", "eager_tf32"}
    assert suite_metrics([a])["geomean_vs_compile"] == pytest.approx(1.25)
