"""How long building one candidate takes: old flags, today's path, the pool, and ``load_inline``.

For every starter kernel (``tasks/*.naive.cu``), ``--repeats`` fresh copies (a unique comment, so no
cache hits) are built each way:

* ``old_arch``    — ``nvcc --shared … -arch=sm_90a`` as before (also embeds compute_90a PTX);
* ``gencode``     — ``nvcc --shared … -gencode=arch=compute_90a,code=sm_90a``, nvcc called directly;
* ``new``         — :meth:`Compiler.compile`: the same gencode build in the compile sandbox, with
  ``--keep`` and the binary digest (what an evaluation pays today);
* ``pool``        — all tasks' copies at once through :meth:`Compiler.compile_many` (the compile pool,
  one build per CPU core): wall time divided by the number of builds, i.e. the cost per candidate
  when the pool is kept busy while the GPU times others;
* ``load_inline`` — the same kernel built the KernelBench way (``torch.utils.cpp_extension``), for
  ``--inline-tasks``; needs a CUDA build of torch (recorded as an error otherwise).

Runs without a GPU (``--arch`` defaults to sm_90a). Also records the machine's load average, since
nvcc's time on a shared machine moves with it.

    PYTHONPATH=src python3 benchmarks/compile_speed.py --out benchmarks/results/compile_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from eval_overhead import load_inline_build_seconds
from result_file import write_result

from optiml.kernel.compiler import BASE_FLAGS, Compiler, CompilerConfig, find_nvcc, gencode, include_dir
from optiml.kernel.source import KernelSource

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 40.0  # the target: >= 40x faster than load_inline


def fresh(code: str) -> str:
    return code + f"\n// fresh candidate {uuid.uuid4().hex}\n"


def nvcc_seconds(code: str, arch_flag: str) -> float:
    """One direct nvcc build (no sandbox, no --keep) in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="optiml-nvcc-") as tmp:
        source = Path(tmp) / "kernel.cu"
        source.write_text(code, encoding="utf-8")
        cmd = [find_nvcc(), "--shared", *BASE_FLAGS, arch_flag, f"-I{include_dir()}", "-o", f"{tmp}/k.so", str(source)]
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, cwd=tmp)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "compile_speed.json")
    parser.add_argument("--tasks", nargs="*", default=None, help="task names (default: every starter task)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--inline-tasks", nargs="*", default=["silu", "softmax"])
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()

    names = args.tasks or sorted(p.name.removesuffix(".naive.cu") for p in (ROOT / "tasks").glob("*.naive.cu"))
    sources = {name: (ROOT / "tasks" / f"{name}.naive.cu").read_text() for name in names}
    cache = Path(tempfile.mkdtemp(prefix="optiml-bench-kernels-"))
    compiler = Compiler(CompilerConfig(arch=args.arch, cache_dir=cache))
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for name, code in sources.items():
        row: dict[str, Any] = {"task": name, "old_arch_s": [], "gencode_s": [], "new_s": []}
        for _ in range(args.repeats):
            row["old_arch_s"].append(round(nvcc_seconds(fresh(code), f"-arch={args.arch}"), 3))
            row["gencode_s"].append(round(nvcc_seconds(fresh(code), gencode(args.arch)), 3))
            built = compiler.compile(KernelSource(fresh(code)))
            assert built.ok, built.error_summary()
            row["new_s"].append(round(built.seconds, 3))
            row["sandbox"] = built.sandbox
        if name in args.inline_tasks:
            try:
                row["load_inline_s"] = round(load_inline_build_seconds(name, code), 3)
            except Exception as exc:  # a CPU-only torch cannot build CUDA extensions
                row["load_inline_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
        rows.append(row)
        print(json.dumps(row), flush=True)

    batch = [KernelSource(fresh(code)) for code in sources.values() for _ in range(args.repeats)]
    start = time.perf_counter()
    built_all = compiler.compile_many(batch)
    pool_wall = time.perf_counter() - start
    assert all(b.ok for b in built_all)

    def median(key: str) -> float:
        return round(statistics.median(s for r in rows for s in r[key]), 3)

    inline = [r["load_inline_s"] for r in rows if "load_inline_s" in r]
    summary: dict[str, Any] = {
        "median_old_arch_s": median("old_arch_s"),
        "median_gencode_s": median("gencode_s"),
        "median_new_s": median("new_s"),
        "sandbox_overhead_s": round(median("new_s") - median("gencode_s"), 3),
        "pool_jobs": compiler.jobs,
        "pool_builds": len(batch),
        "pool_wall_s": round(pool_wall, 3),
        "pool_per_candidate_s": round(pool_wall / len(batch), 3),
        "median_load_inline_s": round(statistics.median(inline), 3) if inline else None,
        "load_inline_over_new": round(statistics.median(inline) / median("new_s"), 1) if inline else None,
        "target_load_inline_ratio": TARGET_RATIO,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    write_result(
        args.out,
        "compile_speed",
        args.commit,
        gpu=False,
        host=platform.node(),
        cpus=os.cpu_count(),
        nvcc=compiler.version,
        arch=args.arch,
        rows=rows,
        summary=summary,
    )
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
