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
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import torch
from result_file import head_commit, write_result

from optiml.evaluate import harness as harness_module
from optiml.evaluate import judge as judge_module
from optiml.evaluate.abi import KernelLibrary
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.harness import CaseSeeds, Peaks, evaluate_candidate, verification_plan
from optiml.evaluate.inprocess import CandidateRunner
from optiml.evaluate.runtime import TaskRuntime
from optiml.evaluate.timing import DeviceTimer, StopRule, run_trials
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.values import EvalResult, TimingStats

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("load", "verify", "time", "recheck", "close")


def judge_side(task_path: Path, kernel: KernelSource, config: EvalConfig, repeats: int) -> dict[str, Any]:
    """The Evaluator's path. Repeats go to the worker directly: the Evaluator itself would reuse the
    first verdict for an equal binary and time nothing."""
    task = load_task(task_path)
    with Evaluator(task, config) as evaluator:
        start = time.perf_counter()
        facts = evaluator.prepare()
        prepare_s = time.perf_counter() - start
        prepared = evaluator.worker.request(
            {"op": "prepare", "task": str(task.path), "config": config.to_dict()}, timeout_s=600
        )
        so_path = evaluator.compiler.compile(kernel).so_path
        runs, details = [], []
        for _ in range(repeats):
            reply = evaluator.worker.request(
                {"op": "evaluate", "task": str(task.path), "so": so_path, "config": config.to_dict(), "peaks": {}},
                timeout_s=config.timeout_s,
            )
            result = EvalResult.from_dict(reply["evaluation"])
            assert result.ok and result.timing is not None, result.message
            runs.append(result)
            details.append(reply.get("judge"))
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
        "judge_detail": details[-1],
    }


def slowdown_side(task_path: Path, so_path: str, config: EvalConfig, repeats: int) -> dict[str, Any]:
    """Where the candidate process's kernel loses time against the in-process run: the judge in this
    process, its timed calls as they are and with one step left out (diagnostics, not a verdict).

    * ``judge``: as evaluations run (fresh contents written by the judge, L2 flushed, before each call);
    * ``no_fill``: the inputs keep the first fill's contents (no write by the judge's context between calls);
    * ``no_flush``: the judge's L2 flush skipped (the device is still synchronised).
    Each gives the judge's median and the candidate stream's own events (``claimed``)."""
    runtime = TaskRuntime(load_task(task_path), "cuda")
    runtime.settle(config.base_seed)
    real_fill, real_before = harness_module.FreshInputs.fill, judge_module.Judge.before_call
    remembered: dict[tuple[int, int], Any] = {}

    def fill_once(self: Any, buffers: Any) -> Any:
        key = (id(self), id(buffers))  # each buffer set of a timed window filled once
        if key not in remembered:
            remembered[key] = real_fill(self, buffers)
        return remembered[key]

    def synchronise_only(self: Any) -> None:
        torch.cuda.synchronize(self.device)

    variants = {"judge": {}, "no_fill": {"fill": fill_once}, "no_flush": {"before_call": synchronise_only}}
    rows: dict[str, dict[str, list[float]]] = {v: {"judge_ms": [], "claimed_ms": []} for v in variants}
    seeds = CaseSeeds()
    with tempfile.TemporaryDirectory() as workdir:
        judge = judge_module.Judge(torch.device("cuda"), Path(workdir))
        try:
            for _ in range(repeats):
                for name, patch in variants.items():
                    harness_module.FreshInputs.fill = patch.get("fill", real_fill)
                    judge_module.Judge.before_call = patch.get("before_call", real_before)
                    judged = evaluate_candidate(judge, runtime, so_path, config, Peaks(), None, seeds)
                    assert judged.result.ok and judged.result.timing is not None, judged.result.message
                    rows[name]["judge_ms"].append(judged.result.timing.median_ms)
                    rows[name]["claimed_ms"].append(judged.judge["claimed_stream_ms"])
        finally:
            harness_module.FreshInputs.fill, judge_module.Judge.before_call = real_fill, real_before
            judge.close()
    return {
        name: {key: statistics.median(values) for key, values in row.items()} | {"runs": row}
        for name, row in rows.items()
    }


def in_process_side(task_path: Path, so_path: str, config: EvalConfig, repeats: int) -> dict[str, Any]:
    """The previous design: candidate loaded here, verified and timed on its own stream's events."""
    runtime = TaskRuntime(load_task(task_path), "cuda")
    plan = [(p.seeds[0], p.shape_set, p.distribution) for p in verification_plan(runtime, config, CaseSeeds())]
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
    parser.add_argument("--commit", default=None, help="default: git rev-parse --short HEAD")
    args = parser.parse_args()
    commit = head_commit(args.commit)
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
            "slowdown": slowdown_side(task_path, compiled.so_path, config, args.repeats),
            "extra_s_per_evaluation": round(judge["evaluation_s_median"] - inproc["evaluation_s_median"], 4),
            "time_ratio_judge_over_in_process": judge["median_ms"] / inproc["median_ms"],
        }
        print(name, rows[name], flush=True)
        write_result(args.out, "judge_overhead", commit, config=config.to_dict(), tasks=rows)
    fulls = [r["judge"]["fresh_full_evaluation_s"] for r in rows.values() if r["judge"]["fresh_full_evaluation_s"]]
    summary = {
        "median_fresh_full_evaluation_s": statistics.median(fulls) if fulls else None,
        "median_extra_s_per_evaluation": statistics.median(r["extra_s_per_evaluation"] for r in rows.values()),
    }
    write_result(args.out, "judge_overhead", commit, config=config.to_dict(), tasks=rows, **summary)
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
