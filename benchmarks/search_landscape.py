"""Strategies on the seeded synthetic landscape (CPU, deterministic): a cheap, repeatable ablation.

The GPU ablation (`search_ablation.py`) is the figure that counts; this one isolates the search
policy from timing noise and costs no GPU, so policy changes can be compared exactly. Reported:
the geometric mean over seeds of the *true* speedup (noise-free landscape time) of each
strategy's best kernel over the start, at each evaluation budget.

    PYTHONPATH=src python3 benchmarks/search_landscape.py --out benchmarks/results/search_landscape.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from result_file import write_result

from optiml.search import Budgets, SearchConfig, run_search
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel, read_knobs
from optiml.store import RunStore
from optiml.task import load_task

ROOT = Path(__file__).resolve().parent.parent
TASK_SOURCE = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    "def get_inputs():\n    return [torch.rand(4)]\ndef get_init_inputs():\n    return []\n"
)
VARIANTS: dict[str, SearchConfig] = {
    "greedy": SearchConfig(strategy="greedy"),
    "mcts": SearchConfig(strategy="mcts"),
    "mcts (breadth-first, deepen_first off)": SearchConfig(strategy="mcts", deepen_first=False),
    "mcts (deepen_first off, c_puct 2)": SearchConfig(strategy="mcts", deepen_first=False, c_puct=2.0),
    "best-of-n": SearchConfig(strategy="best-of-n"),
}


def true_speedup(config: SearchConfig, seed: int, evals: int, workdir: Path) -> float:
    task_file = workdir / "identity.py"
    task_file.write_text(TASK_SOURCE)
    landscape = Landscape(seed=seed)
    config = replace(
        config, budgets=Budgets(evals), parallel_evaluations=1, parallel_proposals=1, reproducible=True, retime_top_k=0
    )
    with RunStore(workdir / "runs.db") as store:
        outcome = run_search(
            load_task(task_file),
            landscape_kernel(),
            LandscapeEvaluator(landscape),
            [KnobProposer(seed)],
            None,
            store,
            config,
        )
    start = landscape.true_ms(read_knobs(landscape_kernel().code) or {})
    return start / landscape.true_ms(read_knobs(outcome.best_kernel.code) or {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", type=int, nargs="*", default=[12, 40])
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "search_landscape.json")
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for evals in args.budgets:
            for name, config in VARIANTS.items():
                speedups = [true_speedup(config, seed, evals, Path(tmp)) for seed in range(args.seeds)]
                results.setdefault(f"{evals} evaluations", {})[name] = round(statistics.geometric_mean(speedups), 3)
                print(f"{evals:4d} evals  {name:40s} geomean true speedup {results[f'{evals} evaluations'][name]:.3f}")
    write_result(
        args.out,
        "search_landscape",
        args.commit,
        gpu=False,
        seeds=args.seeds,
        proposer="KnobProposer (one knob one step, seeded)",
        geomean_true_speedup=results,
    )


if __name__ == "__main__":
    main()
