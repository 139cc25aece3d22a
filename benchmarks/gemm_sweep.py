"""Sweep the GEMM template's configurations on large products, against cuBLAS in the same process.

    PYTHONPATH=$PWD/src python3 benchmarks/gemm_sweep.py --out $OUT/gemm_sweep.json \
        float32:4096:4096:4096:nn bfloat16:4096:4096:4096:nn

A problem is ``DTYPE:M:N:K:LAYOUT`` (layout ``nn`` = ``a @ b``, ``nt`` = ``a @ b.T`` as in a
linear layer, ``tn`` = ``a.T @ b``). For each, every legal configuration of the template's tiled
variant (``simt`` for float32, ``mma`` for half) is rendered, compiled in parallel, checked against
the reference product, and timed with CUDA events (median of ``--reps`` calls after warm-up);
cuBLAS (``torch.matmul``, TF32 off) is timed the same way. Prints the best configurations and
the planner's default with their fraction of cuBLAS.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from result_file import write_result

from optiml.evaluate.abi import KernelLibrary, TensorArray
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.task import load_task
from optiml.templates.base import GroupConfig
from optiml.templates.gemm import wgmma as gemm_wgmma
from optiml.templates.kernels import TemplateKernels

TASK = """
import torch
import torch.nn as nn
OPTIML = {{"description": "sweep", "dtype": "{dtype}", "atol": 1e-2, "rtol": 1e-2, "flops": "2*{m}*{n}*{k}"}}
class Model(nn.Module):
    def forward(self, a, b):
        return {expr}
def get_inputs():
    return [torch.randn({sa}), torch.randn({sb})]
def get_init_inputs():
    return []
"""
LAYOUTS = {
    "nn": ("a @ b", "{m}, {k}", "{k}, {n}"),
    "nt": ("a @ b.T", "{m}, {k}", "{n}, {k}"),
    "tn": ("a.T @ b", "{k}, {m}", "{k}, {n}"),
}


def task_file(directory: Path, dtype: str, m: int, n: int, k: int, layout: str) -> Path:
    expr, sa, sb = LAYOUTS[layout]
    dims = {"m": m, "n": n, "k": k}
    path = directory / f"gemm_{dtype}_{m}x{n}x{k}_{layout}.py"
    text = TASK.format(dtype=dtype, m=m, n=n, k=k, expr=expr, sa=sa.format(**dims), sb=sb.format(**dims))
    path.write_text(text, encoding="utf-8")
    return path


def configs_of(kernels: TemplateKernels, variant: str, limit: int) -> list[GroupConfig]:
    space = kernels.spaces[0]
    knobs = space.knobs[variant]
    out = []
    for combo in itertools.product(*knobs.values()):
        config = GroupConfig.of(variant, **dict(zip(knobs, combo, strict=True)))
        if space.reason_invalid(config) is None:
            out.append(config)
    return out[:limit]


def event_ms(fn: Any, reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def library_call(so_path: str, inputs: list[Any], outputs: list[torch.Tensor], stream: Any) -> Any:
    """A no-argument callable running the built library's ``optiml_forward`` on these tensors (with its
    workspace); raises on a nonzero return code."""
    library = KernelLibrary(so_path)
    ins, outs = TensorArray(inputs), TensorArray(outputs)
    needed = library.workspace_bytes(ins)
    workspace = torch.empty(needed, dtype=torch.uint8, device="cuda") if needed else None

    def call() -> None:
        rc = library.forward(ins, outs, workspace, stream)
        if rc != 0:
            raise RuntimeError(f"optiml_forward returned {rc}")

    return call


def sweep(
    spec: str, compiler: Compiler, directory: Path, reps: int, limit: int, match: str, variant: str
) -> dict[str, Any]:
    dtype, m, n, k, layout = spec.split(":")
    m, n, k = int(m), int(n), int(k)
    task = load_task(task_file(directory, dtype, m, n, k, layout))
    kernels = TemplateKernels.for_task(task)
    default = kernels.default()[0]
    variant = variant or ("mma" if dtype in ("float16", "bfloat16") else "simt")
    configs = [c for c in configs_of(kernels, variant, 10**6) if match in c.label()][:limit]
    if default not in configs and not match:
        configs.insert(0, default)
    start = time.perf_counter()
    built = compiler.compile_many([kernels.render([c]) for c in configs])
    compile_s = time.perf_counter() - start
    torch.backends.cuda.matmul.allow_tf32 = False
    tdtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a_shape, b_shape = {"nn": ((m, k), (k, n)), "nt": ((m, k), (n, k)), "tn": ((k, m), (k, n))}[layout]
    a = torch.randn(a_shape, device="cuda", generator=gen).to(tdtype)
    b = torch.randn(b_shape, device="cuda", generator=gen).to(tdtype)
    op = {"nn": lambda: a @ b, "nt": lambda: a @ b.T, "tn": lambda: a.T @ b}[layout]
    reference = op().float()
    cublas_ms = event_ms(op, reps)
    flops = 2.0 * m * n * k
    stream = torch.cuda.current_stream()
    rows = []
    for config, result in zip(configs, built, strict=True):
        row: dict[str, Any] = {"config": config.label(), "default": config == default}
        if not result.ok:
            row.update(status="compile_error", message=result.error_summary(3)[:300])
            rows.append(row)
            continue
        out = torch.empty((m, n), device="cuda", dtype=tdtype)
        call = library_call(str(result.so_path), [a, b], [out], stream)
        try:
            call()
            torch.cuda.synchronize()
        except Exception as exc:  # a failing configuration is a row
            row.update(status="runtime_error", message=str(exc)[:300])
            rows.append(row)
            continue
        err = (out.float() - reference).abs().max().item()
        scale = reference.abs().max().item()
        ms = event_ms(call, reps)
        row.update(
            status="ok",
            ms=round(ms, 4),
            tflops=round(flops / ms / 1e9, 2),
            of_cublas=round(cublas_ms / ms, 3),
            max_abs_err=err,
            rel_to_max=err / scale if scale else err,
        )
        rows.append(row)
    timed = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["ms"])
    default_row = next((r for r in rows if r["default"]), None)
    print(
        f"\n{spec}: cuBLAS {cublas_ms:.3f} ms ({flops / cublas_ms / 1e9:.1f} TFLOP/s), {len(configs)} configs, "
        f"compile {compile_s:.1f} s",
        flush=True,
    )
    for r in timed[:8]:
        print(f"  {r['of_cublas']:6.3f}x cuBLAS {r['tflops']:7.1f} TF/s  err {r['rel_to_max']:.1e}  {r['config']}")
    if default_row:
        print(f"  default: {default_row.get('of_cublas')} {default_row['config']} {default_row.get('message', '')}")
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed[:5]:
        print(f"  FAILED {r['status']} {r['config']}: {r.get('message', '')[:200]}")
    return {
        "problem": spec,
        "cublas_ms": round(cublas_ms, 4),
        "cublas_tflops": round(flops / cublas_ms / 1e9, 2),
        "compile_s": round(compile_s, 1),
        "best": timed[0] if timed else None,
        "default": default_row,
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--limit", type=int, default=400, help="at most this many configurations per problem")
    parser.add_argument("--out", type=Path, default=Path("gemm_sweep.json"))
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--match", default="", help="only configurations whose label contains this (e.g. for ncu)")
    parser.add_argument("--variant", default="", help="the template variant to sweep (default simt / mma)")
    parser.add_argument("--mn-swap", action="store_true", help="wgmma: swap LBO and SBO of MN-major descriptors")
    args = parser.parse_args()
    if args.mn_swap:  # an experiment on the descriptor convention (gemm_wgmma's docstring)
        gemm_wgmma.MN_PANEL_IS_LBO = not gemm_wgmma.MN_PANEL_IS_LBO
    if not torch.cuda.is_available():
        print("gemm_sweep: no CUDA GPU", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        compiler = Compiler(CompilerConfig(cache_dir=Path(tmp) / "cache"))
        for spec in args.problems:
            results.append(sweep(spec, compiler, Path(tmp), args.reps, args.limit, args.match, args.variant))
            write_result(args.out, "gemm_sweep", args.commit, problems=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
