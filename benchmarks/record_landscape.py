"""Record structural landscapes on the GPU: every configuration of a few template tasks, timed once.

For each task the planned template kernels' spaces are enumerated (`optiml.search.replay.space`:
every legal configuration of a one-kernel plan, per-kernel sweeps around the default for larger
plans), each configuration is rendered, compiled (in parallel on the CPU while the GPU verifies
and times others), verified and timed once by the real evaluator; then ``--repeats`` verified
configurations, drawn at random, are evaluated again (a second full verification and timing of
the same binary) to measure the run-to-run noise of a median. The JSON it writes is what
`benchmarks/search_ablation.py --replay` and the replay tests read
(`optiml.search.replay.RecordedLandscape`). Tasks already in ``--out`` are kept and skipped, so a
run cut short continues where it stopped.

    PYTHONPATH=src python3 benchmarks/record_landscape.py --out benchmarks/results/structural_landscape.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.search.replay.record import Measurement, RecordedLandscape
from optiml.search.replay.space import enumerate_space
from optiml.task import load_task
from optiml.templates.kernels import template_kernels
from optiml.values import EvalResult

ROOT = Path(__file__).resolve().parent.parent
#: one-kernel plans with several variants (softmax, layer norm, row sum, scan, transpose), a
#: one-variant element-wise kernel, and a two-kernel plan recorded as sweeps
TASKS = ("softmax", "layernorm", "prefix_scan", "transpose", "row_sum", "silu", "cross_entropy")


def record_task(name: str, eval_config: EvalConfig, repeats: int, deadline: float) -> RecordedLandscape | None:
    """Measure every configuration of ``name``; None when the deadline came first (nothing kept)."""
    task = load_task(ROOT / "tasks" / f"{name}.py")
    kernels = template_kernels(task)
    space = enumerate_space(kernels)
    sources = [kernels.render(list(configs)) for configs in space.configs]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        compiler = Compiler(CompilerConfig(cache_dir=Path(tmp) / "cache", libraries=task.meta.libraries))
        with Evaluator(task, eval_config, compiler=compiler) as evaluator:
            evaluator.prepare()
            workers = max(2, (os.cpu_count() or 2) - 2)  # compiles overlap the one GPU's work
            with ThreadPoolExecutor(workers) as pool:
                results = list(pool.map(lambda k: _evaluate(evaluator, k, deadline), sources))
            if any(r is None for r in results):
                return None
            measured = [_measurement(c, r) for c, r in zip(space.configs, results, strict=True) if r is not None]
            verified = [i for i, m in enumerate(measured) if m.ok]
            again = random.Random(f"repeats:{name}").sample(verified, min(repeats, len(verified)))
            repeated = [_measurement(space.configs[i], evaluator.evaluate(sources[i])) for i in sorted(again)]
            reference = dict(evaluator.reference)
    landscape = RecordedLandscape(
        task=name,
        task_digest=task.digest,
        plan=kernels.describe(),
        mode=space.mode,
        default=space.default,
        seeds=tuple(tuple(seed) for seed in kernels.seeds()),
        measurements=tuple(measured),
        repeats=tuple(repeated),
        reference=reference,
        gpu=_gpu_name(),
    )
    print(
        json.dumps({"task": name, "seconds": round(time.perf_counter() - started, 1), **landscape.summary()}),
        flush=True,
    )
    return landscape


def _evaluate(evaluator: Evaluator, kernel: Any, deadline: float) -> EvalResult | None:
    return evaluator.evaluate(kernel) if time.time() < deadline else None


def _measurement(configs: Any, result: EvalResult) -> Measurement:
    message = " ".join(result.message.split())[:200]
    return Measurement(tuple(configs), result.status, message, result.timing, result.floor_ms)


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "structural_landscape.json")
    parser.add_argument("--repeats", type=int, default=16, help="verified configurations evaluated twice (noise)")
    parser.add_argument("--timing-seconds", type=float, default=0.25)
    parser.add_argument("--max-trials", type=int, default=40)
    parser.add_argument("--minutes", type=float, default=9.0, help="stop starting tasks' work after this long")
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()

    deadline = time.time() + 60 * args.minutes
    eval_config = EvalConfig(timing_seconds=args.timing_seconds, max_trials=args.max_trials)
    kept: list[dict[str, Any]] = []
    if args.out.is_file():
        kept = [d for d in json.loads(args.out.read_text()).get("landscapes", []) if d["task"] in args.tasks]
    done = {d["task"] for d in kept}
    for name in [t for t in args.tasks if t not in done]:
        landscape = record_task(name, eval_config, args.repeats, deadline)
        if landscape is None:
            print(json.dumps({"task": name, "skipped": "time limit reached; run again to continue"}), flush=True)
            break
        kept.append(landscape.to_dict())
        write_result(
            args.out,
            "structural_landscape",
            args.commit,
            eval_config=eval_config.to_dict(),
            note="every template configuration of each task evaluated once; repeats measure run-to-run noise",
            landscapes=kept,
        )


if __name__ == "__main__":
    main()
