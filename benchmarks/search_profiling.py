"""What Nsight Compute profiling costs inside a search (run on the GPU machine).

For each task, the same MCTS search (heuristic proposer, seed 0, equal evaluation budget, fresh
compile cache each) runs twice on one evaluator: with profiling off, then on. Profiling goes
through the search's own path — candidates within ``profile_margin`` of the best are queued and
those that wait share one ncu launch (``profile_batch``) — and holds the GPU lock from when its
target is ready to the launch's end, so evaluations wait while ncu profiles. Reported per task: wall
time of both runs, candidates profiled, ncu launches and their batch sizes, profiler seconds per
profiled candidate (each launch's seconds, less the time its ready target waited for the lock; the
first also waits for the case, whose writing starts with the search, in the background), the GPU
lock's seconds per profiled candidate (what evaluations wait for), and wall time added per profiled
candidate ((wall_on - wall_off) / profiled).
The GPU's roofline peaks are measured before the timed runs (once per GPU, then cached on disk).

    PYTHONPATH=src python3 benchmarks/search_profiling.py --out benchmarks/results/search_profiling.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.propose.heuristic import HeuristicProposer
from optiml.search import Budgets, SearchConfig, run_search
from optiml.session import LockedProfiler
from optiml.store import RunStore
from optiml.task import load_task
from optiml.values import EvalResult

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS_PER_CANDIDATE = 2.5  # issue 12: ncu seconds per profiled candidate
TARGET_EVALS_PER_MINUTE = {"off": 60.0, "on": 35.0}


class TimedProfiler(LockedProfiler):
    """The search's profiler, recording per call (one ncu launch): the candidates it covered, its seconds
    less the time its ready target waited for the GPU lock, and the seconds it held that lock."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.calls: list[tuple[int, float, float]] = []

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[Any]:
        inner = self.profiler()
        held, waited = inner.gpu_held_s, inner.gpu_waited_s
        start = time.perf_counter()
        diagnoses = super().diagnose_many(items)
        seconds = time.perf_counter() - start - (inner.gpu_waited_s - waited)
        self.calls.append((len(items), seconds, inner.gpu_held_s - held))
        return diagnoses


def search_once(
    task_name: str, evaluator: Evaluator, profiler: TimedProfiler | None, evals: int, workdir: Path
) -> dict[str, Any]:
    label = "on" if profiler is not None else "off"
    root = KernelSource.from_file(ROOT / "tasks" / f"{task_name}.naive.cu")
    evaluator.compiler = Compiler(CompilerConfig(cache_dir=workdir / f"cache-{label}"))
    config = SearchConfig(strategy="mcts", budgets=Budgets(max_evaluations=evals, max_seconds=600))
    start = time.perf_counter()
    with RunStore(workdir / f"{label}.db") as store:
        outcome = run_search(evaluator.task, root, evaluator, [HeuristicProposer(seed=0)], profiler, store, config)
    wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 1),
        "evaluations": outcome.evaluations,
        "evals_per_minute": round(outcome.evaluations_per_minute, 1),
        "speedup_vs_root": round(outcome.speedup.value, 3),
        "best_roofline_fraction": outcome.roofline_fraction,
    }


def measure_task(task_name: str, evals: int) -> dict[str, Any]:
    task = load_task(ROOT / "tasks" / f"{task_name}.py")
    with tempfile.TemporaryDirectory() as tmp, Evaluator(task, EvalConfig(timing_seconds=0.5, max_trials=50)) as ev:
        ev.prepare()
        off = search_once(task_name, ev, None, evals, Path(tmp))
        profiler = TimedProfiler(task, ev)
        profiler.profiler().roofline()  # peaks: once per GPU, not per candidate
        profiler.prepare()  # as `optiml optimize` does: the case is written while the search starts
        on = search_once(task_name, ev, profiler, evals, Path(tmp))
        profiler.close()
    profiled = sum(n for n, _, _ in profiler.calls)
    profiler_seconds = sum(s for _, s, _ in profiler.calls)
    gpu_seconds = sum(g for _, _, g in profiler.calls)
    return {
        "task": task_name,
        "off": off,
        "on": on,
        "profiled_candidates": profiled,
        "ncu_launches": len(profiler.calls),
        "batch_sizes": [n for n, _, _ in profiler.calls],
        "launch_seconds": [round(s, 2) for _, s, _ in profiler.calls],
        "gpu_lock_seconds": [round(g, 2) for _, _, g in profiler.calls],
        "case_write_s": round(profiler.profiler().case_seconds, 2),
        "profiler_seconds_per_candidate": round(profiler_seconds / profiled, 2) if profiled else None,
        "gpu_lock_seconds_per_candidate": round(gpu_seconds / profiled, 2) if profiled else None,
        "wall_added_per_candidate_s": round((on["wall_s"] - off["wall_s"]) / profiled, 2) if profiled else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--evals", type=int, default=16)
    parser.add_argument("--tasks", nargs="*", default=["transpose", "layernorm"])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search_profiling.json")
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    for name in args.tasks:
        rows.append(measure_task(name, args.evals))
        print(json.dumps(rows[-1]), flush=True)
        document = write_document(args, rows)
    print(json.dumps(document["summary"], indent=2))


def write_document(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the JSON now (after every task, so a run cut short keeps what it measured)."""
    per_candidate = [r["profiler_seconds_per_candidate"] for r in rows if r["profiler_seconds_per_candidate"]]
    added = [r["wall_added_per_candidate_s"] for r in rows if r["wall_added_per_candidate_s"] is not None]
    locked = [r["gpu_lock_seconds_per_candidate"] for r in rows if r["gpu_lock_seconds_per_candidate"]]
    summary = {
        "median_profiler_seconds_per_candidate": statistics.median(per_candidate) if per_candidate else None,
        "median_wall_added_per_candidate_s": statistics.median(added) if added else None,
        "median_gpu_lock_seconds_per_candidate": statistics.median(locked) if locked else None,
        "evals_per_minute": {
            r["task"]: {"off": r["off"]["evals_per_minute"], "on": r["on"]["evals_per_minute"]} for r in rows
        },
        "target_seconds_per_candidate": TARGET_SECONDS_PER_CANDIDATE,
        "target_evals_per_minute": TARGET_EVALS_PER_MINUTE,
    }
    return write_result(
        args.out,
        "search_profiling",
        args.commit,
        evals_per_run=args.evals,
        strategy="mcts",
        proposer="heuristic",
        rows=rows,
        summary=summary,
    )


if __name__ == "__main__":
    main()
