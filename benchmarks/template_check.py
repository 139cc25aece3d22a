"""Verify every template seed of every task on the GPU: status, time, eager time, floor.

    PYTHONPATH=src python3 benchmarks/template_check.py tasks/*.py tasks/memory/*.py --out $OUT/check.json

A fast correctness sweep over the templates (no search): each task's seed configurations are
compiled in parallel, verified on every shape set and timed; prints one line per candidate and
writes the whole table as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.task import load_task
from optiml.templates.kernels import template_kernels


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="+")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path("template_check.json"))
    args = parser.parse_args()
    rows = []
    for path in args.tasks:
        task = load_task(path)
        start = time.perf_counter()
        try:
            kernels = template_kernels(task)
            configs = kernels.seeds(args.seeds)
            sources = [kernels.render(c) for c in configs]
        except Exception as exc:  # a planning failure is a row, not a crash
            rows.append({"task": task.name, "status": "unplanned", "message": str(exc)})
            print(f"{task.name:28s} UNPLANNED {exc}", flush=True)
            continue
        with Evaluator(task, EvalConfig(timing_seconds=0.3, max_trials=30)) as evaluator:
            try:
                facts = evaluator.prepare()
            except Exception as exc:
                rows.append({"task": task.name, "status": "prepare_failed", "message": str(exc)})
                print(f"{task.name:28s} PREPARE FAILED {exc}", flush=True)
                continue
            results = evaluator.evaluate_many(sources)
            eager = evaluator.reference["eager"].median_ms
            floor = (facts.input_bytes + facts.output_bytes) / facts.bandwidth * 1e3
            for config, result in zip(configs, results, strict=True):
                label = " + ".join(c.label() for c in config)
                row = {
                    "task": task.name,
                    "plan": kernels.describe(),
                    "config": label,
                    "status": result.status.value,
                    "message": result.message[:300],
                    "time_ms": result.time_ms,
                    "eager_ms": eager,
                    "floor_ms": floor,
                }
                rows.append(row)
                speed = f"{eager / result.time_ms:6.2f}x eager, {floor / result.time_ms:5.0%} roof" if result.ok else ""
                print(
                    f"{task.name:28s} {result.status.value:13s} {speed:28s} {label} {result.message[:160]}", flush=True
                )
        print(f"  ({time.perf_counter() - start:.1f} s)", flush=True)
        args.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
