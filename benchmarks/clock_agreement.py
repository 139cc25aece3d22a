"""Does the judge's clock agree with the user's? (issue 38) Each verified kernel of a suite, timed both ways
in one run on one GPU: through the judge (``optiml.session``'s evaluator, the clock searches and benches
use), then exported as KernelBench's ``ModelNew`` and measured in a fresh plain process
(:mod:`optiml.bench.user_clock`: KernelBench's cold ``time_execution_with_cuda_event`` and warm
back-to-back calls, beside eager and ``torch.compile`` in that process, and KernelBench's verdict).

Kernels: the best of each task's run in a bench folder (``--bench DIR``: its ``bench.json`` names the run,
its ``runs.db`` holds the kernel), else ``--kernel NAME=FILE.cu``, else (``--template-root``) the planner's
seed rendered on the CPU, else the task's ``.naive.cu``.
The judge's evaluator is closed before the user's process starts, so each has the GPU to itself. Each row
says where the judge's windows ended (``judge_window_end``: "device" where its calibration trusted the
GPU's end, see ``optiml.evaluate.device_end``); ``--also-host-end`` times the kernel through the judge
once more with windows ended at the candidate's reply, the earlier protocol (``ratio_host_end``).

    export PYTHONPATH=$PWD/src
    python benchmarks/clock_agreement.py tasks/large/ --bench bench-large --out benchmarks/results/clock_agreement.json

Resumable: tasks already in ``--out`` are skipped (``--fresh`` starts over); the file is rewritten after
every task, so a run cut short keeps what it measured. Summary: median and worst judge ÷ user ratio (cold
and warm), how many tasks move over 4 GiB, and the issue's targets (median within 5 %, every task within 10 %).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from result_file import head_commit, write_result

from optiml.bench.suite import discover_suite
from optiml.bench.user_clock import UserClockOptions, UserClockResult, agreement, measure_kernel
from optiml.errors import NoGPUError, OptimlError
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task

ROOT = Path(__file__).resolve().parents[1]
GiB = 1 << 30


BenchKernels = dict[str, tuple[KernelSource, float | None, Path]]


def bench_kernels(bench: Path) -> BenchKernels:
    """Task file (resolved) -> (the best kernel of its bench run, the time the bench recorded, the store)."""
    from optiml.search.queries import best_path
    from optiml.store import RunStore

    rows = json.loads((bench / "bench.json").read_text(encoding="utf-8"))["rows"]
    found: BenchKernels = {}
    with RunStore(bench / "runs.db") as store:
        for row in rows:
            if row.get("status") == "verified" and row.get("run_id"):
                kernel = best_path(store, row["run_id"]).best_kernel
                found[str(Path(row["file"]).resolve())] = (kernel, row["best_ms"], bench / "runs.db")
    return found


def template_root(task: Task) -> KernelSource | None:
    """The planner's own seed for ``task`` (its rule's variant and knobs), rendered on the CPU; None
    where no template serves the task."""
    from optiml.templates.kernels import template_kernels

    try:
        kernels = template_kernels(task)
        return kernels.render(next(iter(kernels.seeds(1))))
    except (OptimlError, StopIteration):
        return None


def kernel_for(
    task: Task, path: Path, from_bench: BenchKernels, given: dict[str, Path], templates: bool = False
) -> tuple[KernelSource | None, str, float | None, Path | None]:
    """(kernel, where it came from, the bench's time for it, the store verifying it), or (None, why not, ...).
    ``templates``: the planner's seed comes before the task's ``.naive.cu`` (no search needed)."""
    if str(path.resolve()) in from_bench:
        kernel, bench_ms, store = from_bench[str(path.resolve())]
        return kernel, "bench run", bench_ms, store
    if task.name in given:
        return KernelSource.from_file(given[task.name]), str(given[task.name]), None, None
    root = template_root(task) if templates else None
    if root is not None:
        return root, "template seed", None, None
    if task.naive_kernel_path:
        return KernelSource.from_file(task.naive_kernel_path), "naive kernel", None, None
    return None, "no verified kernel in the bench, no --kernel, no .naive.cu", None, None


def judge(task: Task, kernel: KernelSource, window_end: str = "auto") -> dict[str, Any]:
    """The kernel through the judge: verified and timed as `optiml eval` does (exact-fp32 eager beside it);
    ``window_end`` "host" times it as the judge did before windows could end on the device."""
    from optiml.session import SessionOptions, eval_config, make_evaluator

    begin = time.perf_counter()
    options = SessionOptions()
    config = replace(eval_config(options), window_end=window_end)
    with make_evaluator(task, options, config) as evaluator:
        result = evaluator.evaluate(kernel)
    eager = result.reference.get("eager")
    return {
        "judge_window_end": result.clock.get("window_end"),
        "judge_window_calls": result.clock.get("window_calls"),
        "judge_round_trip_ms": result.clock.get("round_trip_ms"),
        "judge_claimed_stream_ms": result.clock.get("claimed_stream_ms"),
        # what a window added to the call beyond the candidate stream's own events (a claim, for diagnosis)
        "judge_residual_ms": (
            result.time_ms - result.clock["claimed_stream_ms"]
            if result.ok and result.time_ms is not None and "claimed_stream_ms" in result.clock
            else None
        ),
        "judge_status": result.status.value,
        "judge_message": result.message.splitlines()[0] if result.message else "",
        "judge_ms": result.time_ms if result.ok else None,
        "judge_eager_ms": eager.median_ms if eager is not None else None,
        # the physics floor of the task's first timing case: bytes / measured bandwidth, or flops / the compute roof
        "floor_ms": result.floor_ms,
        "judge_wall_s": round(time.perf_counter() - begin, 1),
        # how the candidate process was confined (its sandbox, or unconfined and why): the task notes' line
        "judge_isolation": next(
            (n for n in result.task_notes if n.startswith(("candidate processes", "candidate isolation"))), None
        ),
    }


def user_figures(user: UserClockResult, judge_ms: float | None) -> dict[str, Any]:
    """The user's process, flattened: every subject's cold and warm medians, the ratios, the verdict."""
    figures: dict[str, Any] = {"user_error": user.error, "device": user.device}
    for subject in ("model_new", "op", "eager", "eager_tf32", "compile"):
        for clock in ("cold", "warm"):
            figures[f"{subject}_{clock}_ms"] = user.ms(subject, clock)
        timing = user.timings.get(subject)
        if timing is not None and timing.error:
            figures[f"{subject}_error"] = timing.error
    figures["user_ms"] = user.ms("model_new")
    figures["ratio"] = agreement(judge_ms, user, "cold")  # judge ÷ user, KernelBench's cold method
    figures["ratio_warm"] = agreement(judge_ms, user, "warm")
    figures["kernelbench_passed"] = user.verdict.passed if user.verdict is not None else None
    figures["kernelbench_reason"] = user.verdict.reason if user.verdict is not None else user.error
    figures["kernelbench_max_abs_diff"] = user.verdict.max_abs_diff if user.verdict is not None else None
    figures["kernelbench_speedup"] = user.kernelbench_speedup
    figures["speedup_vs_eager"] = user.speedup("eager")
    figures["speedup_vs_eager_tf32"] = user.speedup("eager_tf32")
    figures["speedup_vs_compile"] = user.speedup("compile")
    figures["input_bytes"] = user.input_bytes
    figures["output_bytes"] = user.output_bytes
    figures["over_4gib"] = user.input_bytes + user.output_bytes > 4 * GiB
    figures["user_wall_s"] = user.wall_s
    return figures


def roofline_fraction(floor_ms: float | None, ms: float | None) -> float | None:
    """The share of the physics floor a time reaches (1.0: at the floor), where both are known."""
    return floor_ms / ms if floor_ms and ms else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's figures over the tasks with both clocks: median ratio within ±5 %, every one within ±10 %."""
    done: dict[str, Any] = {"tasks": len(rows)}
    for key in ("ratio", "ratio_warm", "ratio_host_end"):
        ratios = [r[key] for r in rows if r.get(key) is not None]
        if not ratios:
            continue
        done[f"{key}_tasks"] = len(ratios)
        done[f"median_{key}"] = statistics.median(ratios)
        done[f"max_abs_{key}_minus_1"] = max(abs(x - 1.0) for x in ratios)
    residuals = [r["judge_residual_ms"] for r in rows if r.get("judge_residual_ms") is not None]
    if residuals:
        done["median_judge_residual_ms"] = statistics.median(residuals)
    fractions = [r["roofline_fraction_user"] for r in rows if r.get("roofline_fraction_user") is not None]
    if fractions:
        done["median_roofline_fraction_user"] = statistics.median(fractions)
    ratios = [r["ratio"] for r in rows if r.get("ratio") is not None]
    done["over_4gib"] = sum(1 for r in rows if r.get("over_4gib") and r.get("ratio") is not None)
    done["median_within_5pct"] = bool(ratios) and abs(statistics.median(ratios) - 1.0) <= 0.05
    done["all_within_10pct"] = bool(ratios) and all(abs(x - 1.0) <= 0.10 for x in ratios)
    done["kernelbench_passed"] = sum(1 for r in rows if r.get("kernelbench_passed"))
    done["not_measured"] = sorted(r["task"] for r in rows if r.get("ratio") is None)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="+", help="task folders, globs or list files (as `optiml bench` takes)")
    parser.add_argument("--bench", type=Path, action="append", default=[], help="a bench folder (repeatable)")
    parser.add_argument("--kernel", action="append", default=[], help="NAME=FILE.cu: the kernel for task NAME")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "clock_agreement.json")
    parser.add_argument("--perf-trials", type=int, default=100, help="KernelBench's timed trials (its default 100)")
    parser.add_argument(
        "--correct-trials",
        type=int,
        default=5,
        help="KernelBench's correctness trials (its default 5; each draws inputs on the CPU)",
    )
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile in the user's process")
    parser.add_argument("--op", action="store_true", help="also time the torch.library op export")
    parser.add_argument("--fresh", action="store_true", help="measure every task again (default: resume)")
    parser.add_argument(
        "--template-root", action="store_true", help="without a bench kernel, the planner's seed (before .naive.cu)"
    )
    parser.add_argument(
        "--also-host-end",
        action="store_true",
        help="time each kernel through the judge a second time with windows ended on the host (judge_ms_host_end)",
    )
    parser.add_argument("--commit", default=None, help="the commit to record (default: the checkout's HEAD)")
    args = parser.parse_args()
    commit = head_commit(args.commit)
    paths = [p for suite in args.suite for p in discover_suite(suite)]
    given = {name: Path(file) for name, file in (k.split("=", 1) for k in args.kernel)}
    from_bench: BenchKernels = {}
    for folder in args.bench:
        from_bench.update(bench_kernels(folder))
    rows: list[dict[str, Any]] = []
    if args.out.is_file() and not args.fresh:
        rows = json.loads(args.out.read_text(encoding="utf-8")).get("rows", [])
    done = {r["file"] for r in rows}
    options = UserClockOptions(
        perf_trials=args.perf_trials,
        correct_trials=args.correct_trials,
        torch_compile=not args.no_compile,
        torch_op=args.op,
    )
    for path in paths:
        if str(path.resolve()) in done:
            continue
        task = load_task(path)
        kernel, source, bench_ms, store = kernel_for(task, path, from_bench, given, args.template_root)
        row: dict[str, Any] = {"task": task.name, "file": str(path.resolve()), "kernel": source, "bench_ms": bench_ms}
        row["commit"] = commit  # a resumed run's rows may come from several commits
        if kernel is not None:
            try:
                row.update(judge(task, kernel))
            except NoGPUError as exc:  # the machine, not the task: stop, keeping what was measured
                raise SystemExit(f"error: {exc}") from None
            except OptimlError as exc:
                row.update(judge_status="error", judge_message=str(exc).splitlines()[0], judge_ms=None)
            if args.also_host_end:
                try:
                    host_end = judge(task, kernel, "host")
                    row.update(judge_ms_host_end=host_end["judge_ms"], judge_status_host_end=host_end["judge_status"])
                except OptimlError as exc:
                    row.update(judge_ms_host_end=None, judge_status_host_end=f"error: {str(exc).splitlines()[0]}")
            user = measure_kernel(task, kernel, options, store)  # the store labels the export with its verification
            row.update(user_figures(user, row["judge_ms"]))
            row["roofline_fraction_user"] = roofline_fraction(row.get("floor_ms"), row.get("user_ms"))
            row["ratio_host_end"] = agreement(row.get("judge_ms_host_end"), user, "cold")
        rows.append(row)
        shown = ("task", "judge_window_end", "judge_ms", "user_ms", "ratio", "ratio_host_end", "kernelbench_passed")
        print(json.dumps({k: row.get(k) for k in shown}))
        write_result(args.out, "clock_agreement", commit, rows=rows, summary=summary(rows), suite=args.suite)
    document = write_result(args.out, "clock_agreement", commit, rows=rows, summary=summary(rows), suite=args.suite)
    print(json.dumps(document["summary"], indent=1))


if __name__ == "__main__":
    main()
