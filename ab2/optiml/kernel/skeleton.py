"""``optiml init-kernel``: a commented, compiling ABI skeleton for a task.

Argument order, shapes and dtypes come from running the task on PyTorch's ``meta`` device
(no memory, no compute); tasks whose ops have no meta kernel (or that need data, like
``.item()``) fall back to the CPU at their smallest shape set. A failure of the task's own code
(an import error, a wrong argument) is reported as it is, without a CPU retry.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch

from optiml.errors import TaskError
from optiml.task import Task
from optiml.task_runtime import TaskRunner, runs_on_the_cpu_instead, smallest_shape_set

_C_TYPES = {
    torch.float32: "float",
    torch.float16: "__half",
    torch.bfloat16: "__nv_bfloat16",
    torch.float64: "double",
    torch.int32: "int32_t",
    torch.int64: "int64_t",
    torch.int8: "int8_t",
    torch.uint8: "uint8_t",
    torch.bool: "bool",
    torch.int16: "int16_t",
}
_ABI_DTYPES = {
    torch.float32: "OPTIML_FLOAT32",
    torch.float16: "OPTIML_FLOAT16",
    torch.bfloat16: "OPTIML_BFLOAT16",
    torch.float64: "OPTIML_FLOAT64",
    torch.int32: "OPTIML_INT32",
    torch.int64: "OPTIML_INT64",
    torch.int8: "OPTIML_INT8",
    torch.uint8: "OPTIML_UINT8",
    torch.bool: "OPTIML_BOOL",
    torch.int16: "OPTIML_INT16",
}


@dataclass(frozen=True)
class ArgSpec:
    name: str
    kind: str  # "input" | "param" | "scalar" | "output"
    dtype: torch.dtype | None
    shape: tuple[int, ...]
    python_type: str = ""


def describe(task: Task) -> tuple[list[ArgSpec], list[ArgSpec]]:
    """ABI inputs (forward args, then state_dict entries) and outputs of a task at shape set 0 (on
    the meta device), or at its smallest shape set on the CPU where the meta device cannot run it."""
    try:
        return _describe_on(task, "meta", 0)
    except (TaskError, NotImplementedError, RuntimeError) as exc:
        if not runs_on_the_cpu_instead(exc):
            raise
    return _describe_on(task, "cpu", smallest_shape_set(TaskRunner(task, "cpu")))


def _describe_on(task: Task, device: str, shape_set: int) -> tuple[list[ArgSpec], list[ArgSpec]]:
    runtime = TaskRunner(task, device)
    args = runtime.make_args(0, shape_set)
    model = runtime.build_model(0, shape_set)
    outputs = runtime.run_reference(model, args)
    names = _forward_arg_names(model, len(args))
    inputs = [_spec(name, value, "input") for name, value in zip(names, args, strict=True)]
    inputs += [_spec(key, tensor, "param") for key, tensor in model.state_dict().items()]
    outs = [_spec(f"out{i}" if len(outputs) > 1 else "out", t, "output") for i, t in enumerate(outputs)]
    return inputs, outs


def _forward_arg_names(model: torch.nn.Module, count: int) -> list[str]:
    try:
        params = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        params = []
    names = [p for p in params if p not in ("self", "args", "kwargs")][:count]
    return names + [f"arg{i}" for i in range(len(names), count)]


def _spec(name: str, value: Any, kind: str) -> ArgSpec:
    clean = name.replace(".", "_")
    if isinstance(value, torch.Tensor):
        return ArgSpec(clean, kind, value.dtype, tuple(value.shape))
    return ArgSpec(clean, "scalar", None, (), type(value).__name__)


def render_skeleton(task: Task) -> str:
    inputs, outputs = describe(task)
    lines = [
        f"// OptiML kernel skeleton for task `{task.name}` ({task.path.name}).",
        f"// {task.meta.description}" if task.meta.description else "// (the task has no description)",
        "//",
        "// ABI (see optiml.h): inputs are forward() arguments, then Model.state_dict() tensors;",
        "// outputs are preallocated and poisoned with NaN/0xFF — write every element on every call.",
        "// Launch on `stream` only; return 0 on success. Sizes below are the default shape set;",
        "// read the real sizes from the optiml_tensor fields: other shape sets are verified too.",
        "//",
    ]
    for i, spec in enumerate(inputs):
        lines.append(f"//   inputs[{i}]  {_describe_spec(spec)}")
    for i, spec in enumerate(outputs):
        lines.append(f"//   outputs[{i}] {_describe_spec(spec)}")
    lines += ["", '#include "optiml.h"', ""]
    if any(s.dtype == torch.float16 for s in [*inputs, *outputs]):
        lines.insert(lines.index('#include "optiml.h"') + 1, "#include <cuda_fp16.h>")
    if any(s.dtype == torch.bfloat16 for s in [*inputs, *outputs]):
        lines.insert(lines.index('#include "optiml.h"') + 1, "#include <cuda_bf16.h>")
    out0 = outputs[0]
    out_type = _C_TYPES.get(out0.dtype, "float") if out0.dtype is not None else "float"
    lines += [
        "#define BLOCK_SIZE 256",
        "",
        "// TODO: replace this placeholder with the real computation. It only fills the first",
        "// output with zeros so that the file compiles and shows the calling pattern.",
        f"__global__ void placeholder_kernel({out_type}* __restrict__ out, int64_t n) {{",
        "  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;",
        "       i += (int64_t)gridDim.x * blockDim.x) {",
        f"    out[i] = ({out_type})0;",
        "  }",
        "}",
        "",
        "OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs,",
        "                                 optiml_tensor* outputs, int n_outputs,",
        "                                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {",
        f"  if (n_inputs != {len(inputs)} || n_outputs != {len(outputs)}) return -1;",
    ]
    for i, spec in enumerate(inputs):
        lines += _unpack_lines(f"inputs[{i}]", spec, const=True)
    for i, spec in enumerate(outputs):
        lines += _unpack_lines(f"outputs[{i}]", spec, const=False)
    lines += [
        "",
        "  const int64_t n = optiml_numel(&outputs[0]);",
        "  const int64_t blocks = optiml_cdiv(n, BLOCK_SIZE);",
        "  const unsigned grid = (unsigned)(blocks < 65535 ? blocks : 65535);",
        f"  placeholder_kernel<<<grid, BLOCK_SIZE, 0, stream>>>({outputs[0].name}, n);",
        "  return optiml_check_launch();",
        "}",
        "",
    ]
    return "\n".join(lines)


def _describe_spec(spec: ArgSpec) -> str:
    if spec.kind == "scalar":
        return f"{spec.name}: host scalar ({spec.python_type}), 0-dim, memory == OPTIML_HOST"
    dtype = str(spec.dtype).removeprefix("torch.")
    role = "parameter/buffer " if spec.kind == "param" else ""
    if not spec.shape:  # e.g. BatchNorm's num_batches_tracked: GPU memory, unlike a host scalar
        return f"{role}{spec.name}: {dtype} 0-dim DEVICE tensor (memory == OPTIML_DEVICE: data is on the GPU)"
    return f"{role}{spec.name}: {dtype} {list(spec.shape)} (contiguous)"


def _unpack_lines(slot: str, spec: ArgSpec, const: bool) -> list[str]:
    if spec.kind == "scalar":
        getter = {"int": "optiml_scalar_i64", "float": "optiml_scalar_f64", "bool": "optiml_scalar_bool"}
        ctype = {"int": "int64_t", "float": "double", "bool": "int"}.get(spec.python_type, "double")
        read = getter.get(spec.python_type, "optiml_scalar_f64")
        return [f"  [[maybe_unused]] const {ctype} {spec.name} = {read}(&{slot});"]
    assert spec.dtype is not None
    ctype = _C_TYPES[spec.dtype]
    qualifier = "const " if const else ""
    lines = [
        f"  if ({slot}.dtype != {_ABI_DTYPES[spec.dtype]} || {slot}.ndim != {len(spec.shape)}) return -2;",
        f"  [[maybe_unused]] {qualifier}{ctype}* {spec.name} = ({qualifier}{ctype}*){slot}.data;",
    ]
    for d in range(len(spec.shape)):
        lines.append(
            f"  [[maybe_unused]] const int64_t {spec.name}_size{d} = {slot}.shape[{d}];  // e.g. {spec.shape[d]}"
        )
    return lines
