"""What the judge costs per evaluation, against the previous in-process design, in the same run.

Per task (starter tasks, naive kernels): the kernel is compiled once, then

* **judge** — evaluated ``--repeats`` times through the Evaluator (judge worker, the candidate in
  a process of its own, CUDA IPC buffers, the judge's clock, fresh inputs every timed call); the
  worker's phase times (load, verify, time, recheck) are what an evaluation costs past compile.
  A fresh candidate (new source, so the compile cache misses) gives the full evaluation time.
* **in-process** — the design before the judge, run in this process: the same verification plan
  and timing through ``optiml.evaluate.inprocess.CandidateRunner`` with CUDA events on the
  candidate's stream (no round trip, repeated timed inputs).

Both time the same kernel, so their medians should agree within noise once the judge's calibrated
round trip (also written: pipe + device-wide synchronisation + context switch) is removed.

    export PYTHONPATH=$PWD/src
    python benchmarks/judge_overhead.py --out benchmarks/results/judge_overhead.json
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import torch
from result_file import write_result

from optiml.evaluate.abi import KernelLibrary
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.harness import verification_plan
from optiml.evaluate.inprocess import CandidateRunner
from optiml.evaluate.runtime import TaskRuntime
from optiml.evaluate.timing import DeviceTimer, StopRule, run_trials
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.values import TimingStats

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("load", "verify", "time", "recheck")


def judge_side(task_path: Path, kernel: KernelSource, config: EvalConfig, repeats: int) -> dict[str, Any]:
    task = load_task(task_path)
    with Evaluator(task, config) as evaluator:
        start = time.perf_counter()
        facts = evaluator.prepare()
        prepare_s = time.perf_counter() - start
        prepared = evaluator.worker.request(
            {"op": "prepare", "task": str(task.path), "config": config.to_dict()}, timeout_s=600
        )
        runs = []
        for _ in range(repeats):
            evaluator.incumbent = None  # every repeat times in full (no early stop against itself)
            result = evaluator.evaluate(kernel)
            assert result.ok and result.timing is not None, result.message
            runs.append(result)
        so_path = evaluator.compiler.compile(kernel).so_path
        raw = evaluator.worker.request(  # the worker's own report: calibration and the candidate's claimed time
            {"op": "evaluate", "task": str(task.path), "so": so_path, "config": config.to_dict(), "peaks": {}},
            timeout_s=config.timeout_s,
        )
        fresh = evaluator.evaluate(KernelSource(kernel.code + f"\n// fresh {uuid.uuid4().hex}\n"))
    worker_s = [sum(r.phase_seconds.get(p, 0.0) for p in PHASES) for r in runs]
    return {
        "prepare_s": round(prepare_s, 3),
        "round_trip": prepared.get("round_trip"),
        "round_trip_ms": facts.round_trip_ms,
        "evaluation_s_median": round(statistics.median(worker_s), 4),
        "evaluation_s": [round(s, 4) for s in worker_s],
        "phases_s_median": {p: round(statistics.median(r.phase_seconds.get(p, 0.0) for r in runs), 4) for p in PHASES},
        "fresh_full_evaluation_s": fresh.phase_seconds.get("total"),
        "fresh_compile_s": fresh.phase_seconds.get("compile"),
        "fresh_status": fresh.status.value,
        "median_ms": statistics.median(r.timing.median_ms for r in runs if r.timing),
        "host_median_ms": statistics.median(r.timing.wall_median_ms for r in runs if r.timing),
        "trials": [r.timing.trials for r in runs if r.timing],
        "stop": [r.timing.stop for r in runs if r.timing],
        "reference_ms": {k: v.median_ms for k, v in runs[0].reference.items()},
        "judge_detail": raw.get("judge"),
    }


def in_process_side(task_path: Path, so_path: str, config: EvalConfig, repeats: int) -> dict[str, Any]:
    """The previous design: candidate loaded here, verified and timed on its own stream's events."""
    runtime = TaskRuntime(load_task(task_path), "cuda")
    plan = verification_plan(runtime, config)
    cases = [runtime.case(config.base_seed + i) for i in range(config.timing_inputs)]
    for seed, shape_set, distribution in [*plan, (config.base_seed + 97, 0, "native")]:
        runtime.case(seed, shape_set, distribution)  # build (and cache) every case before the clock starts
    rule = StopRule(config.min_trials, config.max_trials, config.timing_seconds, precision=0.0)
    seconds, medians = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        stream = torch.cuda.Stream()
        runner = CandidateRunner(runtime, KernelLibrary(so_path), stream)
        for seed, shape_set, distribution in plan:
            assert runner.trial(runtime.case(seed, shape_set, distribution)).passed
        samples = run_trials(DeviceTimer(stream), runner.timed_calls(cases), warmup=config.warmup_calls, rule=rule)
        assert runner.trial(runtime.case(config.base_seed + 97)).passed
        seconds.append(time.perf_counter() - start)
        medians.append(TimingStats.from_samples(samples.event_ms).median_ms)
    return {
        "evaluation_s_median": round(statistics.median(seconds), 4),
        "evaluation_s": [round(s, 4) for s in seconds],
        "median_ms": statistics.median(medians),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=["silu", "softmax", "layernorm", "matmul"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_overhead.json")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    compiler = Compiler(CompilerConfig())
    config = EvalConfig()
    rows: dict[str, Any] = {}
    for name in args.tasks:
        task_path = ROOT / "tasks" / f"{name}.py"
        kernel = KernelSource.from_file(ROOT / "tasks" / f"{name}.naive.cu")
        compiled = compiler.compile(kernel)
        assert compiled.ok and compiled.so_path, compiled.error_summary()
        judge = judge_side(task_path, kernel, config, args.repeats)
        inproc = in_process_side(task_path, compiled.so_path, config, args.repeats)
        rows[name] = {
            "judge": judge,
            "in_process": inproc,
            "extra_s_per_evaluation": round(judge["evaluation_s_median"] - inproc["evaluation_s_median"], 4),
            "time_ratio_judge_over_in_process": judge["median_ms"] / inproc["median_ms"],
        }
        print(name, rows[name], flush=True)
        write_result(args.out, "judge_overhead", commit.stdout.strip(), config=config.to_dict(), tasks=rows)
    fulls = [r["judge"]["fresh_full_evaluation_s"] for r in rows.values() if r["judge"]["fresh_full_evaluation_s"]]
    summary = {
        "median_fresh_full_evaluation_s": statistics.median(fulls) if fulls else None,
        "median_extra_s_per_evaluation": statistics.median(r["extra_s_per_evaluation"] for r in rows.values()),
    }
    write_result(args.out, "judge_overhead", commit.stdout.strip(), config=config.to_dict(), tasks=rows, **summary)
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
