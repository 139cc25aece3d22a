"""MCTS vs greedy vs best-of-N on the starter suite, heuristic proposer, equal evaluation budgets.

For each task, one evaluator (one worker, references timed once) serves the three strategies in
turn; each strategy gets its own fresh compile cache and run store, so no strategy profits from
another's compiles. Reported per task and strategy: the best verified speedup over the naive root
(after the search's own interleaved re-timing), whether it was confirmed beyond the noise, and
evaluations per minute of wall time.

    PYTHONPATH=src python3 benchmarks/search_ablation.py --evals 16 --out benchmarks/results/search_ablation.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from result_file import write_result

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.propose.heuristic import HeuristicProposer
from optiml.search import Budgets, SearchConfig, run_search
from optiml.store import RunStore
from optiml.task import load_task

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ("mcts", "greedy", "best-of-n")


def run_one(task_name: str, strategy: str, evaluator: Evaluator, evals: int, workdir: Path) -> dict[str, object]:
    task = evaluator.task
    root = KernelSource.from_file(ROOT / "tasks" / f"{task_name}.naive.cu")
    evaluator.compiler = Compiler(CompilerConfig(cache_dir=workdir / f"cache-{strategy}"))
    config = SearchConfig(strategy=strategy, budgets=Budgets(max_evaluations=evals, max_seconds=600))
    start = time.perf_counter()
    with RunStore(workdir / f"{strategy}.db") as store:
        outcome = run_search(task, root, evaluator, [HeuristicProposer(seed=0)], None, store, config)
    wall = time.perf_counter() - start
    return {
        "task": task_name,
        "strategy": strategy,
        "speedup_vs_root": round(outcome.speedup.value, 3),
        "speedup_band": [round(outcome.speedup.low, 3), round(outcome.speedup.high, 3)],
        "confirmed": outcome.confirmed,
        "speedup_vs_eager": round(s.value, 3) if (s := outcome.reference_speedups.get("eager")) else None,
        "root_ms": round(outcome.root_timing.median_ms, 4),
        "best_ms": round(outcome.best_timing.median_ms, 4),
        "evaluations": outcome.evaluations,
        "evals_per_minute": round(outcome.evaluations_per_minute, 1),
        "wall_s": round(wall, 1),
        "status_counts": outcome.status_counts,
        "path": [step.edit.summary(80) for step in outcome.path if step.edit is not None],
        "stop_reason": outcome.stop_reason,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evals", type=int, default=16)
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search_ablation.json")
    parser.add_argument("--commit", default="unknown")
    parser.add_argument(
        "--keep", action="store_true", help="Keep --out's rows for other tasks (same budget): a suite run in parts."
    )
    args = parser.parse_args()

    names = args.tasks or sorted(p.name.removesuffix(".naive.cu") for p in (ROOT / "tasks").glob("*.naive.cu"))
    rows = kept_rows(args.out, names, args.evals) if args.keep else []
    names = sorted({str(r["task"]) for r in rows} | set(names))
    eval_config = EvalConfig(timing_seconds=0.5, max_trials=50)
    for name in [n for n in names if not any(r["task"] == n for r in rows)]:
        task = load_task(ROOT / "tasks" / f"{name}.py")
        with tempfile.TemporaryDirectory() as tmp, Evaluator(task, eval_config) as evaluator:
            evaluator.prepare()
            for strategy in STRATEGIES:
                row = run_one(name, strategy, evaluator, args.evals, Path(tmp))
                rows.append(row)
                print(json.dumps(row), flush=True)

            write_document(args, names, rows)
    print(json.dumps(write_document(args, names, rows)["summary"], indent=2))


def kept_rows(out: Path, names: list[str], evals: int) -> list[dict[str, object]]:
    """Rows of an earlier part of the suite in ``out``: other tasks, same evaluation budget."""
    if not out.is_file():
        return []
    earlier = json.loads(out.read_text())
    if earlier.get("evals_per_strategy") != evals:
        return []
    return [r for r in earlier["rows"] if r["task"] not in names]


def write_document(args: argparse.Namespace, names: list[str], rows: list[dict[str, object]]) -> dict[str, object]:
    """Write the JSON now (after every run, so a run cut short keeps what it measured)."""
    summary: dict[str, object] = {}
    done = [n for n in names if sum(1 for r in rows if r["task"] == n) == len(STRATEGIES)]
    for strategy in STRATEGIES:
        mine = [r for r in rows if r["strategy"] == strategy and r["task"] in done]
        if mine:
            summary[strategy] = {
                "geomean_speedup_vs_root": round(
                    statistics.geometric_mean(float(r["speedup_vs_root"]) for r in mine), 3
                ),
                "median_evals_per_minute": statistics.median(float(r["evals_per_minute"]) for r in mine),
            }
    by_task = {n: {r["strategy"]: float(r["speedup_vs_root"]) for r in rows if r["task"] == n} for n in done}
    summary["mcts_ge_greedy_tasks"] = sum(1 for b in by_task.values() if b["mcts"] >= b["greedy"])
    summary["mcts_within_2pct_of_greedy_tasks"] = sum(1 for b in by_task.values() if b["mcts"] >= 0.98 * b["greedy"])
    summary["tasks_completed"] = len(done)
    return write_result(
        args.out,
        "search_ablation",
        args.commit,
        evals_per_strategy=args.evals,
        proposer="heuristic",
        profiling="off (ncu adds ~7 s per profiled candidate; the ablation measures search, not profiling)",
        rows=rows,
        summary=summary,
    )


if __name__ == "__main__":
    main()
