"""Per-call host overhead of the exported ModelNew and custom op, against the kernel's own time.

For each task and shape set, the naive kernel is exported as a ModelNew and as a torch.library op, then
timed four ways on the same inputs (after a warm-up that builds the kernel and its argument block):

* ``kernel_ms``: CUDA events around one raw ABI call (pre-built descriptors, one ctypes call): the
  kernel's own time, the floor of any wrapper;
* ``model_new_ms`` / ``op_ms``: CUDA events around one ``model_new(*inputs)`` / ``torch.ops.ns.op(...)``
  call, as KernelBench times a ``ModelNew`` (calls made by the C++ launcher); ``model_new_ctypes_ms``
  the same ModelNew with the launcher off (OPTIML_EXPORT_LAUNCHER=ctypes); the forms take turns within
  each trial, and ``*_overhead_us`` is the median of the per-trial differences to the raw call: what the
  wrapper costs;
* ``*_host_us``: host wall time per call of a burst of calls queued without synchronising (fewer calls
  than the launch queue holds), i.e. the Python and ctypes work of one call;
* ``host_breakdown_us``: host time per call of each step of a ModelNew call (and of alternatives);
* ``first_call_ms``: a call on a new input signature (meta-device shape inference and the argument
  block; the library is already loaded), paid once per signature.

    PYTHONPATH=src python3 benchmarks/export_overhead.py --out benchmarks/results/export_overhead.json
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from result_file import head_commit, write_result

from optiml.evaluate.runtime import TaskRuntime
from optiml.export.kernelbench import render_model_new
from optiml.export.op import default_op_name, render_op
from optiml.kernel.source import KernelSource
from optiml.task import load_task

ROOT = Path(__file__).resolve().parent.parent


def import_file(path: Path) -> ModuleType:
    name = f"{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*exported UNVERIFIED.*")  # the naive kernels have no store record
        spec.loader.exec_module(module)
    return module


def event_ms(calls: dict[str, Callable[[], Any]], trials: int) -> dict[str, list[float]]:
    """CUDA-event time of single calls, synchronised between calls; the forms take turns within each trial,
    so clock drift over the run touches all of them alike and per-trial differences can be paired."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(trials):
        for name, call in calls.items():
            torch.cuda.synchronize()
            start.record()
            call()
            stop.record()
            stop.synchronize()
            times[name].append(start.elapsed_time(stop))
    return times


def paired_overhead_us(wrapped: list[float], raw: list[float]) -> float:
    """Median over trials of (wrapped − raw) in microseconds: what the wrapper adds, trial by trial."""
    return statistics.median(w - r for w, r in zip(wrapped, raw, strict=True)) * 1e3


def host_us(call: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median over ``repeats`` bursts of the host time per call of ``calls`` calls queued back to back."""
    bursts = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        begin = time.perf_counter()
        for _ in range(calls):
            call()
        bursts.append((time.perf_counter() - begin) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(bursts)


class RawCall:
    """One ABI call on descriptors of its own, written once: no checks, no look-ups, no allocations."""

    def __init__(self, block: Any, values: list[Any]) -> None:
        self.outputs = block(values)  # writes this call's pointers into the block; the copies below keep them
        self.inputs = type(block.inputs).from_buffer_copy(block.inputs)
        self.described = type(block.outputs).from_buffer_copy(block.outputs)
        self.n_inputs, self.n_outputs = block.n_inputs, len(block.output_slots)
        self.library, self.stream = block.library, torch.cuda.current_stream().cuda_stream
        self.workspace_bytes = block.workspace_bytes
        self.workspace = torch.empty(max(1, block.workspace_bytes), dtype=torch.uint8, device="cuda")

    def __call__(self) -> None:
        self.library.optiml_forward(
            self.inputs,
            self.n_inputs,
            self.described,
            self.n_outputs,
            self.workspace.data_ptr(),
            self.workspace_bytes,
            self.stream,
        )


def host_breakdown(module: ModuleType, model_new: Any, args: list[Any]) -> dict[str, float]:
    """Host microseconds per call of each step of ``model_new(*args)``, and of the alternatives one might
    use instead (the public stream API, ``new_empty``): where the wrapper's time goes."""
    values = [*args, *module._state_tensors(model_new)]
    block = module.argument_block(model_new, *args)
    index = block.index
    first = next(v for v in values if isinstance(v, torch.Tensor))
    shape, dtype = block.output_specs[0]
    device = block.device
    steps: dict[str, Callable[[], Any]] = {
        "values_list": lambda: [*args, *module._state_tensors(model_new)],
        "signature": lambda: module._signature(values),
        "block_lookup": lambda: module._block(model_new, args, values),
        "current_device": torch.cuda.current_device,
        "raw_stream": lambda: module._current_stream(index),
        "public_stream": lambda: torch.cuda.current_stream(index).cuda_stream,
        "empty_output": lambda: torch.empty(shape, dtype=dtype, device=device),
        "new_empty_output": lambda: first.new_empty(shape, dtype=dtype),
        "data_ptr": first.data_ptr,
        "block_call": lambda: block(values),
        "launcher_call": lambda: module.cpp_launcher().call(id(model_new), values),
        "forward": lambda: model_new.forward(*args),
        "module_call": lambda: model_new(*args),
    }
    return {name: round(host_us(step, 200, 5), 2) for name, step in steps.items()}


def measure(name: str, shape_set: int, work: Path, trials: int, burst: int) -> dict[str, Any]:
    task = load_task(ROOT / "tasks" / f"{name}.py")
    kernel = KernelSource.from_file(ROOT / "tasks" / f"{name}.naive.cu")
    model_file = work / f"{name}_model_new.py"
    model_file.write_text(render_model_new(task, kernel), encoding="utf-8")
    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    op_file = work / f"{name}_op.py"
    op_file.write_text(render_op(task, kernel, namespace=namespace), encoding="utf-8")
    model_module, op_module = import_file(model_file), import_file(op_file)
    del op_module  # importing it registered the op
    ctypes_module = import_file(model_file)
    ctypes_module._LAUNCHER.append(None)  # this copy's calls go through ctypes, as OPTIML_EXPORT_LAUNCHER=ctypes
    op = getattr(getattr(torch.ops, namespace), default_op_name(task))

    runtime = TaskRuntime(task, "cuda")
    case = runtime.case(0, shape_set)
    module = task.namespace(shape_set)
    torch.manual_seed(0)
    model_new = model_module.ModelNew(*module.get_init_inputs()).cuda().eval()
    model_new.load_state_dict(case.model.state_dict())
    through_ctypes = ctypes_module.ModelNew(*module.get_init_inputs()).cuda().eval()
    through_ctypes.load_state_dict(case.model.state_dict())
    args, values = case.args, case.abi_inputs
    with torch.no_grad():
        model_new(*args)  # builds the kernel (nvcc), the launcher (once) and the first argument block
        op(*values)
        block = model_module.argument_block(model_new, *args)
        raw = RawCall(block, [*args, *model_module._state_tensors(model_new)])
        forms: dict[str, Callable[[], Any]] = {
            "raw": raw,
            "model_new": lambda: model_new(*args),
            "model_new_ctypes": lambda: through_ctypes(*args),
            "op": lambda: op(*values),
        }
        for call in forms.values():  # warm-up
            for _ in range(5):
                call()
        launcher = model_module.cpp_launcher()
        if launcher is None or launcher.count(id(model_new)) != 1:
            raise SystemExit("the C++ launcher did not take over the ModelNew's calls (see the warning above)")
        times = event_ms({**forms, "eager": lambda: case.model(*args)}, trials)
        kernel, wrapped, as_op, eager = times["raw"], times["model_new"], times["op"], times["eager"]
        hosts = {f"{name}_host_us": host_us(call, burst, 5) for name, call in forms.items()}
        breakdown = host_breakdown(model_module, model_new, list(args))
        other = [args[0][:-1], *args[1:]]  # one row fewer: a signature not seen yet
        torch.cuda.synchronize()
        begin = time.perf_counter()
        try:
            model_new(*other)  # a new input signature: shape inference and a new block
            torch.cuda.synchronize()
            first_call_ms: float | None = (time.perf_counter() - begin) * 1e3
        except (RuntimeError, ValueError):  # a task whose inputs must agree in their first dimension
            first_call_ms = None
    median = statistics.median
    row = {
        "task": name,
        "shape_set": shape_set,
        "input_shapes": [list(a.shape) for a in args if isinstance(a, torch.Tensor)],
        "kernel_ms": median(kernel),
        "model_new_ms": median(wrapped),
        "model_new_ctypes_ms": median(times["model_new_ctypes"]),
        "op_ms": median(as_op),
        "eager_ms": median(eager),
        "model_new_overhead_us": paired_overhead_us(wrapped, kernel),
        "model_new_ctypes_overhead_us": paired_overhead_us(times["model_new_ctypes"], kernel),
        "op_overhead_us": paired_overhead_us(as_op, kernel),
        **hosts,
        "first_call_ms": first_call_ms,
        "host_breakdown_us": breakdown,
        "trials": trials,
    }
    print(
        f"{name} set {shape_set}: kernel {row['kernel_ms']:.4f} ms, ModelNew {row['model_new_ms']:.4f} ms "
        f"(+{row['model_new_overhead_us']:.1f} us), op {row['op_ms']:.4f} ms (+{row['op_overhead_us']:.1f} us); "
        f"host per call: raw {hosts['raw_host_us']:.1f} us, ModelNew {hosts['model_new_host_us']:.1f} us "
        f"(ctypes {hosts['model_new_ctypes_host_us']:.1f} us), op {hosts['op_host_us']:.1f} us",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "export_overhead.json")
    parser.add_argument("--tasks", nargs="*", default=["layernorm", "softmax", "silu", "row_sum"])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--burst", type=int, default=200, help="calls per host-time burst (below the launch queue)")
    parser.add_argument("--commit", default=None, help="default: git rev-parse --short HEAD")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("export_overhead needs a CUDA GPU")
    commit = head_commit(args.commit)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.tasks:
            task = load_task(ROOT / "tasks" / f"{name}.py")
            for shape_set in range(task.num_shape_sets):
                rows.append(measure(name, shape_set, Path(work), args.trials, args.burst))
                write_result(args.out, "export_overhead", commit, tasks=rows)
    summary = {
        "median_model_new_overhead_us": statistics.median(r["model_new_overhead_us"] for r in rows),
        "median_op_overhead_us": statistics.median(r["op_overhead_us"] for r in rows),
        "median_model_new_host_us": statistics.median(r["model_new_host_us"] for r in rows),
        "median_op_host_us": statistics.median(r["op_host_us"] for r in rows),
        "median_raw_host_us": statistics.median(r["raw_host_us"] for r in rows),
        "median_model_new_host_over_raw_us": statistics.median(r["model_new_host_us"] - r["raw_host_us"] for r in rows),
        "median_model_new_ctypes_host_over_raw_us": statistics.median(
            r["model_new_ctypes_host_us"] - r["raw_host_us"] for r in rows
        ),
        "median_op_host_over_raw_us": statistics.median(r["op_host_us"] - r["raw_host_us"] for r in rows),
    }
    write_result(args.out, "export_overhead", commit, tasks=rows, **summary)
    print(summary)


if __name__ == "__main__":
    main()
