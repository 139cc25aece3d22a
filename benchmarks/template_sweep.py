"""Sweep the configurations of a task's first kernel, against eager PyTorch in the same process.

    PYTHONPATH=$PWD/src python3 benchmarks/template_sweep.py --variants wgmma,mma \
        --out $OUT/template_sweep.json tasks/compute/conv2d_fp16.py

For each task (KernelBench format), every legal configuration of the named variants of the plan's first
kernel (the rest keep the planner's choices) is rendered, compiled in parallel, run on the task's first
shape set, checked against the reference at the task's tolerance, and timed with CUDA events (median of
``--reps`` calls after warm-up). Eager PyTorch is timed the same way with TF32 off (exact fp32, what
the harness verifies against) and, for fp32 tasks, with PyTorch's default (TF32 convolutions). Prints
each task's fastest configurations and the planner's default with their speedup over eager.

``--member-wise-stores`` adds, for every configuration, the same source with each vector pack stored the way
it was before ``optiml_store_pack`` (a plain pack assignment, which nvcc compiles to one store per element):
the two store forms side by side in one run. ``--nc-loads`` adds the same with every vector pack read through
``__ldg`` (the read-only path), so the compiler may issue a later iteration's loads before this one's stores.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from gemm_sweep import configs_of, event_ms, library_call
from result_file import write_result

from optiml.evaluate.runtime import TaskRuntime
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.templates.base import GroupConfig
from optiml.templates.kernels import TemplateKernels


def legal_configs(
    kernels: TemplateKernels, variants: list[str], limit: int, where: dict[str, int] | None = None
) -> list[GroupConfig]:
    """The first kernel's legal configurations of ``variants`` (all of its variants when empty) whose knobs take
    the values ``where`` names."""
    space = kernels.spaces[0]
    wanted = [v for v in variants or list(space.variants) if v in space.variants]
    every = [c for v in wanted for c in configs_of(kernels, v, 100_000 if where else limit)]
    return [c for c in every if all(space.value(c, k) == v for k, v in (where or {}).items())][:limit]


def configs_to_time(
    kernels: TemplateKernels, variants: list[str], limit: int, seeds: bool, where: dict[str, int] | None = None
) -> list[GroupConfig]:
    """The first kernel's configurations to time, its default first: the root's seeds as optiml generates them
    (``seeds``), else the space's legal configurations of ``variants`` (those whose knobs take ``where``'s values)."""
    default = kernels.default()[0]
    if seeds:
        configs = list(dict.fromkeys(configs[0] for configs in kernels.seeds(limit)))
    else:
        configs = legal_configs(kernels, variants, limit, where)
    return configs if default in configs else [default, *configs]


_PACK_STORE = re.compile(r"optiml_store_pack<([^,>]+), VEC>\((.+), (so\d+)\);")


def member_wise_stores(source: KernelSource) -> KernelSource:
    """``source`` with every ``optiml_store_pack`` call written as a plain pack assignment."""
    return source.with_code(_PACK_STORE.sub(r"*reinterpret_cast<OptimlPack<\1, VEC>*>(\2) = \3;", source.code))


_FIRST_KERNEL = re.compile(r"^(template\s*<[^>]*>\s*\n)?__global__", re.MULTILINE)
_PACK_LOAD = re.compile(r"\*reinterpret_cast<const OptimlPack<([^,>]+), VEC>\*>")

#: A pack read through the read-only (non-coherent) path, ``__ldg`` on 4-, 8- or 16-byte words: the compiler may
#: then hoist a later iteration's loads above this one's stores. A plain read must assume the output aliases the
#: input, so an unrolled element-wise loop runs load, store, load, store: one load in flight a thread (SASS of the
#: 19_ReLU split_row kernel, 2026-12-06; with __ldg two 16-byte loads issue before the first store).
NC_PACK = """
template <typename T, int N>
__device__ __forceinline__ OptimlPack<T, N> optiml_nc_pack(const T* at) {
  OptimlPack<T, N> out;
  if constexpr (sizeof(out) == 16) {
    const uint4 w = __ldg(reinterpret_cast<const uint4*>(at)); memcpy(&out, &w, 16);
  } else if constexpr (sizeof(out) == 8) {
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(at)); memcpy(&out, &w, 8);
  } else if constexpr (sizeof(out) == 4) {
    const unsigned w = __ldg(reinterpret_cast<const unsigned*>(at)); memcpy(&out, &w, 4);
  } else {
    out = *reinterpret_cast<const OptimlPack<T, N>*>(at);
  }
  return out;
}
"""


def nc_loads(source: KernelSource) -> KernelSource:
    """``source`` with every pack read through :data:`NC_PACK` (inputs are never written during a call: the ABI's
    outputs and workspace are other buffers, and a plan's intermediates are written by an earlier launch)."""
    code = _PACK_LOAD.sub(r"optiml_nc_pack<\1, VEC>", source.code)
    first = _FIRST_KERNEL.search(code)  # the helper goes ahead of the first kernel and its template header
    return source.with_code(code[: first.start()] + NC_PACK + code[first.start() :] if first else code)


def eager_ms(model: torch.nn.Module, args: list[Any], reps: int, tf32: bool) -> float:
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        with torch.no_grad():
            return event_ms(lambda: model(*args), reps)
    finally:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False


#: A/B rewrites of every swept source, by name (``--member-wise-stores``, ``--nc-loads``).
REWRITES = {"member-wise stores": member_wise_stores, "nc loads": nc_loads}


def sweep(
    path: Path,
    compiler: Compiler,
    variants: list[str],
    reps: int,
    limit: int,
    rewrites: tuple[str, ...] = (),
    seeds: bool = False,
    where: dict[str, int] | None = None,
) -> dict[str, Any]:
    task = load_task(path)
    kernels = TemplateKernels.for_task(task)
    default = kernels.default()
    configs = configs_to_time(kernels, variants, limit, seeds, where)
    sources = [kernels.render([c, *default[1:]]) for c in configs]
    labels = [c.label() for c in configs]
    defaults = [c == default[0] for c in configs]
    plain = list(zip(sources, labels, strict=True))
    for name in rewrites:
        sources += [REWRITES[name](source) for source, _ in plain]
        labels += [f"{label} {name}" for _, label in plain]
        defaults += [False] * len(plain)
    start = time.perf_counter()
    built = compiler.compile_many(sources)
    compile_s = time.perf_counter() - start
    runtime = TaskRuntime(task, "cuda")
    case = runtime.case(0, 0)
    exact = eager_ms(case.model, case.args, reps, tf32=False)
    fast = eager_ms(case.model, case.args, reps, tf32=True) if task.meta.dtype == "float32" else None
    stream = torch.cuda.current_stream()
    rows = []
    for label, is_default, result in zip(labels, defaults, built, strict=True):
        row: dict[str, Any] = {"config": label, "default": is_default}
        if not result.ok:
            rows.append({**row, "status": "compile_error", "message": result.error_summary(3)[:300]})
            continue
        outs = [torch.empty_like(e) for e in case.expected]
        call = library_call(str(result.so_path), case.abi_inputs, outs, stream)
        try:
            call()
            torch.cuda.synchronize()
        except Exception as exc:  # a failing configuration is a row
            rows.append({**row, "status": "runtime_error", "message": str(exc)[:300]})
            continue
        wrong = [
            k
            for k, (got, want) in enumerate(zip(outs, case.expected, strict=True))
            if not torch.allclose(got.float(), want.float(), rtol=case.rtol, atol=case.atol[k])
        ]
        ms = event_ms(call, reps)
        row.update(status="wrong" if wrong else "ok", ms=round(ms, 4), vs_eager=round(exact / ms, 3))
        if fast is not None:
            row["vs_eager_tf32"] = round(fast / ms, 3)
        rows.append(row)
    timed = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["ms"])
    default_row = next((r for r in rows if r["default"]), None)
    tf32_note = f", eager with TF32 {fast:.4f} ms" if fast is not None else ""
    print(f"\n{path.stem}: eager {exact:.4f} ms{tf32_note}, {len(sources)} sources, compile {compile_s:.1f} s")
    for r in timed[:8]:
        print(f"  {r['vs_eager']:6.3f}x eager  {r['ms']:.4f} ms  {r['config']}")
    if default_row:
        print(f"  default: {default_row.get('vs_eager')} {default_row['config']} {default_row.get('message', '')}")
        for name in rewrites:
            other = next((r for r in rows if r["config"] == f"{default_row['config']} {name}"), None)
            if other:
                print(f"  default, {name}: {other.get('vs_eager')} {other.get('message', '')}")
    for r in [r for r in rows if r["status"] != "ok"][:5]:
        print(f"  FAILED {r['status']} {r['config']}: {r.get('message', '')[:200]}")
    return {
        "task": path.stem,
        "eager_ms": round(exact, 4),
        "eager_tf32_ms": round(fast, 4) if fast is not None else None,
        "compile_s": round(compile_s, 1),
        "best": timed[0] if timed else None,
        "default": default_row,
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--variants", default="", help="comma-separated variants of the first kernel (default: all)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--limit", type=int, default=64, help="at most this many configurations per task")
    parser.add_argument("--out", type=Path, default=Path("template_sweep.json"))
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--member-wise-stores", action="store_true", help="also time plain pack stores")
    parser.add_argument("--nc-loads", action="store_true", help="also time pack reads through __ldg")
    parser.add_argument("--seeds", action="store_true", help="time the root's seeds (up to --limit), not the space")
    parser.add_argument("--where", default="", help="only configurations with these knob values: items=0,ilp=2")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("template_sweep: no CUDA GPU", file=sys.stderr)
        return 2
    variants = [v for v in args.variants.split(",") if v]
    where = {k: int(v) for k, v in (pair.split("=", 1) for pair in args.where.split(",") if pair)}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        compiler = Compiler(CompilerConfig(cache_dir=Path(tmp) / "cache"))
        asked = (("member-wise stores", args.member_wise_stores), ("nc loads", args.nc_loads))
        rewrites = tuple(name for name, on in asked if on)
        for path in args.tasks:
            results.append(sweep(path, compiler, variants, args.reps, args.limit, rewrites, args.seeds, where))
            write_result(args.out, "template_sweep", args.commit, tasks=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
