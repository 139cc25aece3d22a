"""Profiling overhead and diagnoses of the starter tasks' naive kernels (run on the GPU machine).

For each ``tasks/<name>.py`` with a ``tasks/<name>.naive.cu``: evaluate the naive kernel (verify
and time, as a search would), then diagnose it — static analysis, one ncu launch, roofline —
and record the wall time profiling added, the bound, the top bottlenecks and the roofline
fraction. Candidates run in the torch-free light target (its case is written once per task:
``case_dump_s``, not counted per candidate). With ``--batch N`` the same kernel is also profiled N
times in one ncu launch — in the light target and, for comparison, in the torch target — to show
the per-candidate cost once ncu's start-up is shared, as the search shares it. Expectations
checked: the naive transpose is diagnosed as uncoalesced, the naive matmul as memory/latency-bound
far from the compute roof, and the median ncu time per profiled candidate (batched in the light
target) is at most 2.5 s (issue 12's target).

    PYTHONPATH=src python3 benchmarks/profile_overhead.py --out benchmarks/results/profile_overhead.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.evaluate.evaluator import Evaluator
from optiml.kernel.compiler import Compiler
from optiml.kernel.source import KernelSource
from optiml.profile import ProfileConfig, Profiler
from optiml.task import load_task

ROOT = Path(__file__).resolve().parent.parent
TARGET_MEDIAN_S = 2.5  # issue 12: seconds of ncu per profiled candidate


def profile_task(task_path: Path, config: ProfileConfig, batch: int) -> dict[str, Any]:
    task = load_task(task_path)
    naive = task.naive_kernel_path
    assert naive is not None
    kernel = KernelSource.from_file(naive)
    row: dict[str, Any] = {"task": task.name}
    with Evaluator(task) as evaluator:
        result = evaluator.evaluate(kernel)
        facts = evaluator.facts
        io_bytes = facts.input_bytes + facts.output_bytes if facts else None
        row.update(status=result.status.value, message=result.message, time_ms=result.time_ms)
        profiler = Profiler(task, evaluator.compiler, config, io_bytes=io_bytes)
        profiler.roofline()  # peaks are measured once per GPU; keep that out of the per-candidate figure
        start = time.perf_counter()
        case = profiler.light_case()  # once per task, also kept out of the per-candidate figure
        row["case_dump_s"] = round(time.perf_counter() - start, 3)
        row["light_target"] = isinstance(case, Path)
        row["light_target_problem"] = None if isinstance(case, Path) else case
        start = time.perf_counter()
        diagnosis = profiler.diagnose(kernel, result)
        row["diagnose_seconds"] = round(time.perf_counter() - start, 3)
        profile = diagnosis.profile
        row["ncu_seconds"] = round(profile.seconds, 3) if profile else None
        row["profile_errors"] = list(profile.errors) if profile else []
        row["kernels"] = [
            {"name": k.short_name, "ms": k.metrics.duration_ms} for k in (profile.kernels if profile else ())
        ]
        if batch > 1 and result.ok:
            start = time.perf_counter()
            profiles = profiler.profile([kernel] * batch)
            elapsed = time.perf_counter() - start
            row["batch"] = {
                "candidates": batch,
                "seconds": round(elapsed, 3),
                "per_candidate_seconds": round(elapsed / batch, 3),
                "ncu_seconds_per_candidate": round(statistics.mean(p.seconds for p in profiles), 3),
                "ok": sum(p.ok for p in profiles),
            }
            torch_profiler = Profiler(task, evaluator.compiler, replace(config, light_target=False), io_bytes=io_bytes)
            start = time.perf_counter()
            torch_profiles = torch_profiler.profile([kernel] * batch)
            elapsed = time.perf_counter() - start
            row["batch_torch_target"] = {
                "seconds": round(elapsed, 3),
                "per_candidate_seconds": round(elapsed / batch, 3),
                "ok": sum(p.ok for p in torch_profiles),
            }
        profiler.close()
    row.update(
        bound=diagnosis.bound,
        summary=diagnosis.summary,
        roofline_fraction=diagnosis.roofline_fraction,
        proxy_score=diagnosis.proxy_score,
        bottlenecks=[
            {"name": b.name, "severity": round(b.severity, 3), "evidence": b.evidence, "kernel": b.kernel}
            for b in diagnosis.bottlenecks[:3]
        ],
        missing_evidence=list(diagnosis.missing_evidence),
        rendered=diagnosis.render(),
    )
    return row


def expectations(rows: list[dict[str, Any]]) -> dict[str, bool]:
    by_task = {r["task"]: r for r in rows}
    checks: dict[str, bool] = {}
    if "transpose" in by_task:
        top = by_task["transpose"]["bottlenecks"]
        checks["transpose diagnosed as uncoalesced"] = bool(top) and top[0]["name"].startswith("uncoalesced")
    if "matmul" in by_task:
        matmul = by_task["matmul"]
        fraction = matmul["roofline_fraction"]
        checks["matmul memory/latency-bound far from the compute roof"] = (
            matmul["bound"] in {"memory", "latency"} and fraction is not None and fraction < 0.5
        )
    lone = [r["diagnose_seconds"] for r in rows if r.get("diagnose_seconds") is not None]
    if lone:  # one candidate per ncu launch (the search's first profile, or a lone one)
        checks[f"median diagnose of a lone candidate (one ncu launch) <= {TARGET_MEDIAN_S:g} s"] = (
            statistics.median(lone) <= TARGET_MEDIAN_S
        )
    batched = [r["batch"]["per_candidate_seconds"] for r in rows if r.get("batch")]
    if batched:
        checks[f"median ncu seconds per candidate, batched in one light-target launch <= {TARGET_MEDIAN_S:g} s"] = (
            statistics.median(batched) <= TARGET_MEDIAN_S
        )
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "profile_overhead.json")
    parser.add_argument("--tasks", nargs="*", default=None, help="task names (default: every starter task)")
    parser.add_argument("--batch", type=int, default=4, help="also profile N copies in one ncu launch (0: skip)")
    parser.add_argument("--raw-dir", type=Path, default=None, help="keep ncu's raw CSV per run here")
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()

    paths = sorted(p for p in (ROOT / "tasks").glob("*.py") if p.with_name(p.stem + ".naive.cu").is_file())
    if args.tasks:
        paths = [p for p in paths if p.stem in set(args.tasks)]
    config = ProfileConfig(raw_dir=args.raw_dir)
    rows: list[dict[str, Any]] = []
    report: dict[str, Any] = {"expectations": {}}
    for path in paths:
        try:
            row = profile_task(path, config, args.batch)
        except Exception as exc:  # one broken task must not lose the others' figures
            row = {"task": path.stem, "error": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
        print(
            json.dumps(
                {
                    k: row.get(k)
                    for k in (
                        "task",
                        "status",
                        "diagnose_seconds",
                        "ncu_seconds",
                        "bound",
                        "roofline_fraction",
                        "profile_errors",
                        "error",
                    )
                }
            ),
            flush=True,
        )
        if "rendered" in row:
            print(row["rendered"], "\n", flush=True)
        report = write_report(args, rows, config)
    checks = report["expectations"]
    for name, passed in checks.items():
        print(f"{'ok  ' if passed else 'FAIL'} {name}")
    errors = [r["task"] for r in rows if "error" in r]
    if errors:
        print(f"FAIL tasks that could not be profiled: {', '.join(errors)}")
    print(f"wrote {args.out}")
    return 0 if all(checks.values()) and not errors and rows else 1


def write_report(args: argparse.Namespace, rows: list[dict[str, Any]], config: ProfileConfig) -> dict[str, Any]:
    """Write the JSON now (after every task, so a run cut short keeps what it measured)."""
    peaks = Profiler(load_task(ROOT / "tasks" / f"{rows[0]['task']}.py"), Compiler(), config).peaks().to_dict()
    lone = [r["diagnose_seconds"] for r in rows if r.get("diagnose_seconds") is not None]
    batched = [r["batch"]["per_candidate_seconds"] for r in rows if r.get("batch")]
    torch_batched = [r["batch_torch_target"]["per_candidate_seconds"] for r in rows if r.get("batch_torch_target")]
    return write_result(
        args.out,
        "profile_overhead",
        args.commit,
        host=platform.node(),
        python=sys.version.split()[0],
        peaks=peaks,
        median_diagnose_seconds=statistics.median(lone) if lone else None,
        median_batched_per_candidate_seconds=statistics.median(batched) if batched else None,
        median_batched_per_candidate_seconds_torch_target=statistics.median(torch_batched) if torch_batched else None,
        batch=args.batch,
        target_median_s=TARGET_MEDIAN_S,
        expectations=expectations(rows),
        tasks=rows,
    )


if __name__ == "__main__":
    sys.exit(main())
