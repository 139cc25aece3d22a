"""What `optiml optimize` gives without an LLM, against eager PyTorch, torch.compile and the roofline.

For every task: the root from the templates (the fastest verified of a few seed configurations and
the kernel the task ships, as `optiml optimize` does), then MCTS with the structural proposer for
the rest of the evaluation budget, then the search's interleaved re-timing of the best against the
root. The figures come from a last re-timing of the best kernel interleaved, round by round, with
eager and torch.compile (and any other ``--modes``) in the same worker: each ratio is read in one
state of the GPU (at the start of a task, before the search's load, eager can read faster). The
floor is the task's bytes at the copy bandwidth that worker measured.

Then, unless ``--no-user-clock``, the user's clock (issue 38): the best kernel exported as ``ModelNew`` and timed in
a fresh process as KernelBench times it, beside eager (exact fp32 and PyTorch's defaults) and ``torch.compile`` in
that process, with KernelBench's verdict (:mod:`optiml.bench.user_clock`, the judge's build loaded by the export).
Its ratios are ``user_speedup_vs_*`` and the summary's ``user_geomean_vs_*``; ``agreement`` is judge ÷ user.

    PYTHONPATH=src python3 benchmarks/offline_quality.py --evals 30 --out benchmarks/results/offline_quality.json \
        tasks/*.py tasks/memory/*.py

Rows are written after every task (a run cut short keeps what it measured); `--keep` merges the rows
of an earlier part of the suite from the same file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.bench.user_clock import Prebuilt, UserClockResult, measure_for_bench
from optiml.errors import OptimlError
from optiml.evaluate.client import WorkerClient, WorkerCrashed, WorkerReplyError, WorkerTimeout
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.generate.offline import generate_offline_root
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.propose.factory import make_proposer
from optiml.search import Budgets, SearchConfig, run_search
from optiml.store import RunStore
from optiml.task import load_task

FINAL_ROUNDS = 6


def run_task(
    path: Path, evaluator: Evaluator, evals: int, seeds: int, workdir: Path, user_clock: bool = True
) -> dict[str, Any]:
    task = evaluator.task
    start = time.perf_counter()
    facts = evaluator.prepare()
    row: dict[str, Any] = {"task": task.name, "file": str(path)}
    row["eager_ms"] = round(evaluator.reference["eager"].median_ms, 4)
    compiled = evaluator.reference.get("compile")
    row["compile_ms"] = round(compiled.median_ms, 4) if compiled else None
    row["floor_ms"] = round((facts.input_bytes + facts.output_bytes) / facts.bandwidth * 1e3, 4)
    # every reference the worker timed (eager exact fp32, eager with PyTorch's default TF32, compile, ...)
    row["reference_ms"] = {mode: round(t.median_ms, 4) for mode, t in evaluator.reference.items()}
    flops, peak = getattr(facts, "flops", None), getattr(facts, "peak_flops", 0.0)
    if flops and peak:
        row["floor_ms"] = max(row["floor_ms"], round(flops / peak * 1e3, 4))
    naive = task.naive_kernel_path
    offline = generate_offline_root(
        task, evaluator, seeds=seeds, naive=KernelSource.from_file(naive) if naive else None
    )
    row["plan"] = offline.plan or None
    row["root_candidates"] = [
        {"label": c.label, "status": c.result.status.value, "ms": c.result.time_ms, "message": c.result.message[:200]}
        for c in offline.candidates
    ]
    best = offline.best
    if best is None:
        row.update(status="no verified kernel", reason=offline.error or "no root candidate verified")
        return row
    config = SearchConfig(
        strategy="mcts",
        budgets=Budgets(max_evaluations=max(1, evals - len(offline.candidates)), max_seconds=45),
        retime_top_k=3,
        retime_rounds=6,
    )
    with RunStore(workdir / "runs.db") as store:
        outcome = run_search(task, best.kernel, evaluator, [make_proposer("offline")], None, store, config)
    # The figures: the best kernel and every reference mode timed again, interleaved in the same rounds,
    # so each ratio is read in one state of the GPU (the start-of-task references stay in the row).
    row["reference_ms_at_start"] = row["reference_ms"]
    try:
        final = evaluator.retime_interleaved([outcome.best_kernel], FINAL_ROUNDS, references=tuple(row["reference_ms"]))
    except (OptimlError, WorkerReplyError, WorkerTimeout, WorkerCrashed) as exc:  # the search's figures stand, said so
        row["final_retime_error"] = str(exc)[:300]
        best_ms = outcome.best_timing.median_ms
    else:
        best_ms = final.kernels[0].median_ms
        row["reference_ms"] = {mode: round(t.median_ms, 4) for mode, t in final.references.items()}
        row["eager_ms"] = row["reference_ms"]["eager"]
        row["compile_ms"] = row["reference_ms"].get("compile")
    row.update(
        status="verified",
        root=best.label,
        best_ms=round(best_ms, 4),
        search_best_ms=round(outcome.best_timing.median_ms, 4),
        best_config=outcome.best_kernel.code.splitlines()[0][:400],
        speedup_vs_eager=round(row["eager_ms"] / best_ms, 3),
        speedup_vs_compile=round(row["compile_ms"] / best_ms, 3) if row["compile_ms"] else None,
        roofline_fraction=round(row["floor_ms"] / best_ms, 3),
        speedup_vs_reference={mode: round(ms / best_ms, 3) for mode, ms in row["reference_ms"].items()},
        search_gain=round(outcome.speedup.value, 3),
        search_confirmed=outcome.confirmed,
        evaluations=outcome.evaluations + len(offline.candidates),
        path=[step.edit.summary(90) for step in outcome.path if step.edit is not None],
        **_compute_terms(flops, peak, best_ms),
    )
    if user_clock:
        footprint = facts.input_bytes + facts.output_bytes
        row.update(_user_clock(evaluator, outcome.best_kernel, workdir, best_ms, footprint))
    row["wall_s"] = round(time.perf_counter() - start, 1)
    return row


def _user_clock(
    evaluator: Evaluator, kernel: KernelSource, workdir: Path, judge_ms: float, footprint: int
) -> dict[str, Any]:
    """The row's user's-clock fields: the measurement, its speedups over every baseline in that process, and the
    agreement judge ÷ user (cold, KernelBench's clock)."""
    built = evaluator.compiler.compile(kernel)  # the judge's build, from its cache
    prebuilt = Prebuilt(Path(built.so_path), evaluator.compiler.arch) if built.so_path else None
    compile_ = "compile" in evaluator.reference
    data = measure_for_bench(
        evaluator.task, kernel, workdir / "runs.db", None, compile_, evaluator.worker, footprint, prebuilt
    )
    result = UserClockResult.from_dict(data)
    user_ms = result.ms("model_new")
    speedups = {f"user_speedup_vs_{b}": result.speedup(b) for b in ("eager", "eager_tf32", "compile", "fastest")}
    return {
        "user_clock": data,
        "user_ms": round(user_ms, 4) if user_ms else None,
        **{k: round(v, 3) if v else None for k, v in speedups.items()},
        "agreement": round(judge_ms / user_ms, 3) if user_ms else None,
        "kernelbench_passed": result.verdict.passed if result.verdict else None,
    }


def _compute_terms(flops: float | None, peak: float, best_ms: float) -> dict[str, Any]:
    """TFLOP/s of the best kernel and its fraction of the task's compute roof (tasks declaring flops)."""
    if not flops:
        return {}
    terms: dict[str, Any] = {"tflops": round(flops / best_ms / 1e9, 2)}
    if peak:
        terms["compute_roof_tflops"] = round(peak / 1e12, 1)
        terms["compute_roof_fraction"] = round(flops / best_ms * 1e3 / peak, 3)
    return terms


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if r.get("status") == "verified"]
    summary: dict[str, Any] = {"tasks": len(rows), "verified": len(done)}
    if done:
        summary["geomean_vs_eager"] = round(statistics.geometric_mean(r["speedup_vs_eager"] for r in done), 3)
        with_compile = [r for r in done if r.get("speedup_vs_compile")]
        if with_compile:
            summary["geomean_vs_compile"] = round(
                statistics.geometric_mean(r["speedup_vs_compile"] for r in with_compile), 3
            )
        summary["median_roofline_fraction"] = round(statistics.median(r["roofline_fraction"] for r in done), 3)
        for baseline in ("eager", "eager_tf32", "compile", "fastest"):
            user = [r[f"user_speedup_vs_{baseline}"] for r in done if r.get(f"user_speedup_vs_{baseline}")]
            if user:
                summary[f"user_geomean_vs_{baseline}"] = round(statistics.geometric_mean(user), 3)
        agreement = [r["agreement"] for r in done if r.get("agreement")]
        if agreement:
            summary["median_agreement"] = round(statistics.median(agreement), 3)
            summary["max_agreement_error"] = round(max(abs(a - 1) for a in agreement), 3)
        summary["below_0.9x_eager"] = sorted(r["task"] for r in done if r["speedup_vs_eager"] < 0.9)
        by_mode: dict[str, list[float]] = {}
        for r in done:
            for mode, value in r.get("speedup_vs_reference", {}).items():
                by_mode.setdefault(mode, []).append(value)
        summary["geomean_vs_reference"] = {m: round(statistics.geometric_mean(v), 3) for m, v in by_mode.items()}
    summary["not_verified"] = sorted(r["task"] for r in rows if r.get("status") != "verified")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--evals", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=4, help="Template seed configurations tried for the root.")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/offline_quality.json"))
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--keep", action="store_true", help="Keep --out's rows of other tasks.")
    parser.add_argument("--no-compile", action="store_true", help="Skip the torch.compile baseline.")
    parser.add_argument("--modes", default="", help="Reference modes to time (comma-separated; default eager,compile).")
    parser.add_argument("--no-user-clock", action="store_true", help="Skip the fresh-process (user's clock) timing.")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    if args.keep and args.out.is_file():
        names = {p.stem for p in args.tasks}
        rows = [r for r in json.loads(args.out.read_text())["rows"] if r["task"] not in names]
    modes = ("eager",) if args.no_compile else ("eager", "compile")
    if args.modes:
        modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    eval_config = EvalConfig(reference_modes=modes, seeds=2, timing_seconds=0.3, max_trials=30, warmup_calls=2)
    worker = WorkerClient()  # one worker for the whole suite (it keeps one task in memory at a time)
    try:
        for path in args.tasks:
            with tempfile.TemporaryDirectory() as tmp:
                evaluator = Evaluator(
                    load_task(path),
                    eval_config,
                    compiler=Compiler(CompilerConfig(cache_dir=Path(tmp) / "cache")),
                    worker=worker,
                )
                try:
                    row = run_task(path, evaluator, args.evals, args.seeds, Path(tmp), not args.no_user_clock)
                except OptimlError as exc:
                    row = {"task": path.stem, "file": str(path), "status": "failed", "reason": str(exc)[:300]}
            rows.append(row)
            print(
                json.dumps(
                    {
                        k: row.get(k)
                        for k in (
                            "task",
                            "status",
                            "best_ms",
                            "eager_ms",
                            "compile_ms",
                            "floor_ms",
                            "speedup_vs_eager",
                            "speedup_vs_compile",
                            "roofline_fraction",
                            "user_speedup_vs_eager",
                            "user_speedup_vs_compile",
                            "agreement",
                            "wall_s",
                        )
                    }
                ),
                flush=True,
            )
            write_result(
                args.out, "offline_quality", args.commit, evals_per_task=args.evals, rows=rows, summary=summarize(rows)
            )
    finally:
        worker.stop()
    print(json.dumps(summarize(rows), indent=2))


if __name__ == "__main__":
    main()
