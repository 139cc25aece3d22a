"""MCTS vs greedy vs best-of-N at equal evaluations, several seeds per cell, with 95 % intervals.

Two modes, one report (`optiml.search.replay.ablation.summarise`): per task and strategy the
geometric-mean speedup over the root with its t-interval, and per pair of strategies the paired
difference (same seeds) with its interval — a strategy is *ahead* only when that interval is
above 1.

``replay`` (CPU, no GPU): searches on replayed landscapes — recorded ones
(``--landscapes benchmarks/results/structural_landscape.json``, from `record_landscape.py`) and
modelled look-ahead ones over the real template spaces of ``--model`` tasks
(`optiml.search.replay.model`) — with the structural proposer; a run is scored by the recorded
(noise-free) time of the kernel it returns. ``seed`` seeds the proposer's tie-breaks and the
replayed timing noise.

    PYTHONPATH=src python3 benchmarks/search_ablation.py replay --model softmax layernorm --seeds 5 \\
        --out benchmarks/results/search_ablation_replay.json

``gpu`` (one GPU): the real suite, offline proposer (structural edits of the template root), the
same root for every strategy and seed (offline generation runs once per task), one evaluator and
one compile cache per task; a run is scored by its own interleaved re-timing against the root.

    PYTHONPATH=src python3 benchmarks/search_ablation.py gpu --tasks softmax layernorm --seeds 5 --evals 8 \\
        --out benchmarks/results/search_ablation.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.search import Budgets, SearchConfig
from optiml.search.replay.ablation import ScoredRun, replay_search, summarise
from optiml.search.replay.record import RecordedLandscape, load_landscapes
from optiml.task import Task, load_task

ROOT = Path(__file__).resolve().parent.parent
#: the strategies compared; the MCTS variants show what its settings do on the same landscapes
VARIANTS: dict[str, SearchConfig] = {
    "mcts": SearchConfig(strategy="mcts"),
    "mcts (c_puct 0.25)": SearchConfig(strategy="mcts", c_puct=0.25),
    "mcts (c_puct 2)": SearchConfig(strategy="mcts", c_puct=2.0),
    "mcts (deepen_first off)": SearchConfig(strategy="mcts", deepen_first=False),
    "mcts (deepen_first off, c_puct 1)": SearchConfig(strategy="mcts", deepen_first=False, c_puct=1.0),
    "mcts (deepen_first off, c_puct 2)": SearchConfig(strategy="mcts", deepen_first=False, c_puct=2.0),
    "greedy": SearchConfig(strategy="greedy"),
    "best-of-n": SearchConfig(strategy="best-of-n"),
}


@dataclass(frozen=True)
class Job:
    task: str
    landscape: RecordedLandscape
    variant: str
    seed: int
    evals: int


@cache
def _task(name: str) -> tuple[Task, Any]:
    from optiml.templates.kernels import template_kernels

    task = load_task(ROOT / "tasks" / f"{name}.py")
    return task, template_kernels(task)


def _run(job: Job) -> dict[str, Any]:
    task, kernels = _task(job.task)
    run = replay_search(job.landscape, task, kernels, VARIANTS[job.variant], seed=job.seed, evals=job.evals)
    return {**asdict(run), "strategy": job.variant, "evals_budget": job.evals}


def replay(args: argparse.Namespace) -> None:
    from optiml.search.replay.model import modelled_landscape

    landscapes: list[tuple[str, RecordedLandscape]] = []
    for path in args.landscapes:
        landscapes += [(ls.task, ls) for ls in load_landscapes(path)]
    for name in args.model:
        task, kernels = _task(name)
        landscapes += [(name, modelled_landscape(name, task, kernels, seed=s)) for s in range(args.model_seeds)]
    jobs = [
        Job(task, landscape, variant, seed, evals)
        for evals in args.evals
        for task, landscape in landscapes
        for variant in args.strategies
        for seed in range(args.seeds)
    ]
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for row in pool.map(_run, jobs):
            rows.append(row)
            print(json.dumps(row), flush=True)
    summaries = {
        f"{evals} evaluations": summarise([_scored(r) for r in rows if r["evals_budget"] == evals], args.strategies)
        for evals in args.evals
    }
    write_result(
        args.out,
        "search_ablation_replay",
        args.commit,
        gpu=False,
        proposer="structural (seeded)",
        seeds=args.seeds,
        landscapes={name: ls.summary() for name, ls in ((ls.task, ls) for _, ls in landscapes)},
        strategies={name: json.loads(VARIANTS[name].to_json()) for name in args.strategies},
        cpu_seconds=round(time.perf_counter() - started, 1),
        summary=summaries,
        rows=rows,
    )
    print(json.dumps(summaries, indent=1))


def _scored(row: dict[str, Any]) -> ScoredRun:
    return ScoredRun(**{k: row[k] for k in ScoredRun.__dataclass_fields__})


def gpu(args: argparse.Namespace) -> None:
    from optiml.evaluate.config import EvalConfig
    from optiml.evaluate.evaluator import Evaluator
    from optiml.generate.offline import generate_offline_root
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.propose.factory import make_proposer
    from optiml.search import run_search
    from optiml.store import RunStore

    deadline = time.time() + 60 * args.minutes
    rows: list[dict[str, Any]] = []
    for name in args.tasks:
        task = load_task(ROOT / "tasks" / f"{name}.py")
        with tempfile.TemporaryDirectory() as tmp:
            compiler = Compiler(CompilerConfig(cache_dir=Path(tmp) / "cache", libraries=task.meta.libraries))
            with Evaluator(task, EvalConfig(timing_seconds=0.5, max_trials=50), compiler=compiler) as evaluator:
                evaluator.prepare()
                best = generate_offline_root(task, evaluator).best
                if best is None:
                    print(json.dumps({"task": name, "skipped": "no verified template root"}), flush=True)
                    continue
                for seed in range(args.seeds):
                    for variant in args.strategies:
                        if time.time() > deadline:
                            break
                        config = VARIANTS[variant]
                        config = config.with_budgets(Budgets(max_evaluations=args.evals, max_seconds=600))
                        start = time.perf_counter()
                        with RunStore(Path(tmp) / f"{variant}-{seed}.db") as store:
                            proposer = make_proposer("offline", seed=seed)
                            outcome = run_search(task, best.kernel, evaluator, [proposer], None, store, config)
                        speedup, confirmed = outcome.speedup.value, outcome.confirmed
                        run = ScoredRun(name, variant, seed, outcome.evaluations, speedup, confirmed, 0)
                        row = {
                            **asdict(run),
                            "evals_budget": args.evals,
                            "root_ms": round(outcome.root_timing.median_ms, 5),
                            "best_ms": round(outcome.best_timing.median_ms, 5),
                            "wall_s": round(time.perf_counter() - start, 1),
                            "path": [step.edit.summary(80) for step in outcome.path],
                        }
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                        write_gpu(args, rows)
    print(json.dumps(write_gpu(args, rows)["summary"], indent=1))


def write_gpu(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the JSON now (after every run, so a run cut short keeps what it measured)."""
    return write_result(
        args.out,
        "search_ablation",
        args.commit,
        evals_per_run=args.evals,
        seeds=args.seeds,
        proposer="offline (structural edits of the template root), seeded",
        profiling="off (the ablation measures search, not profiling)",
        summary=summarise([_scored(r) for r in rows], args.strategies),
        rows=rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = parser.add_subparsers(dest="mode", required=True)
    on_replay = modes.add_parser("replay", help="replayed landscapes, on the CPU")
    on_replay.add_argument("--landscapes", nargs="*", type=Path, default=[], help="recorded landscape JSON files")
    on_replay.add_argument("--model", nargs="*", default=[], help="tasks to build modelled look-ahead landscapes of")
    on_replay.add_argument("--model-seeds", type=int, default=1)
    on_replay.add_argument("--evals", type=int, nargs="+", default=[30])
    on_replay.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    on_replay.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search_ablation_replay.json")
    on_gpu = modes.add_parser("gpu", help="the real suite, on one GPU")
    on_gpu.add_argument("--tasks", nargs="+", default=["softmax", "layernorm"])
    on_gpu.add_argument("--evals", type=int, default=8)
    on_gpu.add_argument("--minutes", type=float, default=3.5, help="start no run after this long")
    on_gpu.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search_ablation.json")
    for mode in (on_replay, on_gpu):
        mode.add_argument("--seeds", type=int, default=5)
        mode.add_argument("--strategies", nargs="+", default=["mcts", "greedy", "best-of-n"], choices=list(VARIANTS))
        mode.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    replay(args) if args.mode == "replay" else gpu(args)


if __name__ == "__main__":
    main()
