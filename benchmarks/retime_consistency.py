"""Does the final interleaved re-timing read the same kernel as its evaluation did, and eager as at the start?

For every task: the root from the templates (its evaluation is the first timing), a second evaluation
of the same kernel by a fresh evaluator, then interleaved re-timings of the root — alone and with
three other candidates, with and without an untimed settle call at each turn — each with eager timed
in the same rounds; then about ``--load-seconds`` of evaluations (the search's load on the GPU) and
the same re-timings again. The GPU's SM clock, temperature and power are read at every step.

    PYTHONPATH=src python3 benchmarks/retime_consistency.py --out benchmarks/results/retime_consistency.json \
        tasks/compute/linear_layernorm.py tasks/compute/conv2d_batchnorm_eval.py
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.evaluate.client import WorkerClient
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.generate.offline import generate_offline_root
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import load_task

VARIANTS = (("alone", 1, 0), ("with_three", 4, 0), ("with_three_settled", 4, 1), ("alone_settled", 1, 1))


def gpu_state() -> dict[str, str]:
    """nvidia-smi's SM clock, temperature and power draw now (empty where it cannot be read)."""
    query = "clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active"
    try:
        run = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True
        )
    except OSError:
        return {}
    values = [v.strip() for v in run.stdout.strip().split(",")]
    return dict(zip(query.split(","), values, strict=False)) if run.returncode == 0 else {}


def retimings(evaluator: Evaluator, kernels: list[KernelSource], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, count, settle in VARIANTS:
        if len(kernels) < count:
            continue
        retimed = evaluator.retime_interleaved(kernels[:count], rounds, references=("eager",), settle=settle)
        out[name] = {
            "kernel_ms": round(retimed.kernels[0].median_ms, 4),
            "eager_ms": round(retimed.references["eager"].median_ms, 4),
            "speedup_vs_eager": round(retimed.references["eager"].median_ms / retimed.kernels[0].median_ms, 3),
            "kernel_samples": [round(x, 4) for x in retimed.samples[0]],
            "window_calls": retimed.window_calls,
            "gpu": gpu_state(),
        }
    return out


def run_task(path: Path, worker: WorkerClient, config: EvalConfig, rounds: int, load_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        compiler = Compiler(CompilerConfig(cache_dir=Path(tmp) / "cache"))
        task = load_task(path)
        evaluator = Evaluator(task, config, compiler=compiler, worker=worker)
        evaluator.prepare()
        row: dict[str, Any] = {"task": task.name, "eager_at_start_ms": round(evaluator.reference["eager"].median_ms, 4)}
        row["gpu_at_start"] = gpu_state()
        offline = generate_offline_root(task, evaluator, seeds=4)
        verified = sorted(
            (c for c in offline.candidates if c.result.ok and c.result.time_ms), key=lambda c: c.result.time_ms or 0.0
        )
        if not verified:
            return {**row, "status": "no verified kernel"}
        kernels = [c.kernel for c in verified]
        row["first_evaluation_ms"] = round(verified[0].result.time_ms or 0.0, 4)

        def evaluate_again() -> float:
            result = Evaluator(task, config, compiler=compiler, worker=worker).evaluate(kernels[0])
            return round(result.time_ms or 0.0, 4)

        row["second_evaluation_ms"] = evaluate_again()
        row["before_load"] = retimings(evaluator, kernels, rounds)
        start, loads = time.perf_counter(), 0
        while time.perf_counter() - start < load_s:
            Evaluator(task, config, compiler=compiler, worker=worker).evaluate(kernels[loads % len(kernels)])
            loads += 1
        row["load_evaluations"] = loads
        row["after_load"] = retimings(evaluator, kernels, rounds)
        row["third_evaluation_ms"] = evaluate_again()
        row["gpu_at_end"] = gpu_state()
        return {**row, "status": "measured"}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant, the geomean of the re-timed kernel over its first evaluation, and of eager re-timed
    over eager at the start."""
    measured = [r for r in rows if r.get("status") == "measured"]
    summary: dict[str, Any] = {}
    for phase in ("before_load", "after_load"):
        for name, *_ in VARIANTS:
            pairs = [(r, r[phase][name]) for r in measured if name in r[phase]]
            if pairs:
                kernel = _geomean(c["kernel_ms"] / r["first_evaluation_ms"] for r, c in pairs)
                summary[f"{phase}.{name}"] = {
                    "kernel_over_first_evaluation": kernel,
                    "eager_over_start": _geomean(c["eager_ms"] / r["eager_at_start_ms"] for r, c in pairs),
                }
    return summary


def _geomean(values: Any) -> float:
    return round(statistics.geometric_mean(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--load-seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/retime_consistency.json"))
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    # the settings of benchmarks/offline_quality.py, so the figures speak to its runs
    config = EvalConfig(reference_modes=("eager",), seeds=2, timing_seconds=0.3, max_trials=30, warmup_calls=2)
    worker = WorkerClient()
    rows: list[dict[str, Any]] = []
    try:
        for path in args.tasks:
            rows.append(run_task(path, worker, config, args.rounds, args.load_seconds))
            print({k: rows[-1].get(k) for k in ("task", "first_evaluation_ms", "second_evaluation_ms")}, flush=True)
            write_result(args.out, "retime_consistency", args.commit, rows=rows, summary=summarize(rows))
    finally:
        worker.stop()
    print(summarize(rows))


if __name__ == "__main__":
    main()
