"""How long building one candidate takes: nvcc's steps one by one or two chains at once, the pool, and ``load_inline``.

For every starter kernel (``tasks/*.naive.cu``) and the first template seed of each ``--template-tasks``
task, ``--repeats`` fresh copies (a unique comment, so no cache hits) are built each way, taking turns:

* ``gencode``     — ``nvcc --shared … -gencode=arch=compute_90a,code=sm_90a``, nvcc called directly;
* ``serial``      — :meth:`Compiler.compile` with ``parallel_steps=False``: that build in the compile
  sandbox, with ``--keep`` and the binary digest, nvcc running its steps one after the other;
* ``new``         — :meth:`Compiler.compile` as it runs by default: nvcc's host chain (preprocessing,
  cudafe++) and device chain (preprocessing, cicc, ptxas) at once (:mod:`optiml.kernel.nvcc_steps`),
  the host code at ``HOST_OPTIMIZATION`` and linked by a fast linker where there is one;
* ``previous``    — the same schedule with the host code at ``-O3`` and GNU ld (before 2026-12-03);
* ``pool``        — all copies at once through :meth:`Compiler.compile_many` (the compile pool,
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
from optiml.task import load_task
from optiml.templates.kernels import template_kernels

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 40.0  # the target: >= 40x faster than load_inline


def fresh(code: str) -> str:
    return code + f"\n// fresh candidate {uuid.uuid4().hex}\n"


def nvcc_seconds(code: str, arch_flag: str) -> float:
    """One direct nvcc build (no sandbox, no --keep) in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="optiml-nvcc-") as tmp:
        source = Path(tmp) / "kernel.cu"
        source.write_text(code, encoding="utf-8")
        cmd = [
            find_nvcc(),
            "--shared",
            "-O3",
            *BASE_FLAGS,
            arch_flag,
            f"-I{include_dir()}",
            "-o",
            f"{tmp}/k.so",
            str(source),
        ]
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
    parser.add_argument(
        "--template-tasks",
        nargs="*",
        default=["tasks/softmax.py", "tasks/compute/sgemm_square.py", "tasks/compute/conv2d_fp16.py"],
    )
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()

    names = args.tasks or sorted(p.name.removesuffix(".naive.cu") for p in (ROOT / "tasks").glob("*.naive.cu"))
    sources = {name: (ROOT / "tasks" / f"{name}.naive.cu").read_text() for name in names}
    for path in args.template_tasks:
        kernels = template_kernels(load_task(ROOT / path))
        sources[f"{Path(path).stem} (template)"] = kernels.render(next(iter(kernels.seeds(1)))).code
    cache = Path(tempfile.mkdtemp(prefix="optiml-bench-kernels-"))
    compiler = Compiler(CompilerConfig(arch=args.arch, cache_dir=cache))
    serial = Compiler(CompilerConfig(arch=args.arch, cache_dir=cache, parallel_steps=False))
    previous = Compiler(CompilerConfig(arch=args.arch, cache_dir=cache, host_optimization="-O3", fast_linker=False))
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for name, code in sources.items():
        row: dict[str, Any] = {"task": name, "gencode_s": [], "serial_s": [], "previous_s": [], "new_s": []}
        for _ in range(args.repeats):
            row["gencode_s"].append(round(nvcc_seconds(fresh(code), gencode(args.arch)), 3))
            for key, builder in (("serial_s", serial), ("previous_s", previous), ("new_s", compiler)):
                built = builder.compile(KernelSource(fresh(code)))
                assert built.ok, built.error_summary()
                row[key].append(round(built.seconds, 3))
            row["sandbox"] = built.sandbox
        row["new_over_serial"] = round(statistics.median(row["new_s"]) / statistics.median(row["serial_s"]), 3)
        row["new_over_previous"] = round(statistics.median(row["new_s"]) / statistics.median(row["previous_s"]), 3)
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
        "median_gencode_s": median("gencode_s"),
        "median_serial_s": median("serial_s"),
        "median_new_s": median("new_s"),
        "median_previous_s": median("previous_s"),
        "new_over_serial": round(median("new_s") / median("serial_s"), 3),
        "new_over_previous": round(median("new_s") / median("previous_s"), 3),
        "host_flags": list(compiler.host_flags),
        "new_over_gencode": round(median("new_s") / median("gencode_s"), 3),
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
