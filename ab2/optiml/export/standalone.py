"""Render a kernel as a standalone ``.cu`` with a ``main()``, plus the data file it checks against.

The data file holds one case the exporter computed with PyTorch on the CPU: the inputs, the
parameters and the reference outputs of one shape set (the smallest by default) for a fixed seed, in
the ABI's order and dtypes (the same inputs the harness would make). ``main()`` reads it, runs the
kernel on poisoned outputs, compares with the task's tolerances, times with CUDA events and checks
again after timing. Format: ``OPTIMLD1``, int64 count, then per entry int32 role (0 tensor input,
1 scalar input, 2 reference output), dtype code, ndim, padding; int64 shape[8]; int64 byte count; the
little-endian row-major bytes.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from optiml.export.rendering import common_context, render
from optiml.export.signature import ExportError, read_signature
from optiml.export.verification import Verification
from optiml.kernel.compiler import DEFAULT_ARCH, SHIPPED_INCLUDE, abi_header, gencode, included_helper_headers
from optiml.kernel.source import KernelSource
from optiml.task import Task

MAGIC = b"OPTIMLD1"
MAX_DATA_BYTES = 512 * 10**6
TENSOR_INPUT, SCALAR_INPUT, EXPECTED_OUTPUT = 0, 1, 2


def record_case(task: Task, shape_set: int | None = None, seed: int = 0) -> tuple[int, bytes]:
    """The shape set used and the data file: inputs, parameters and reference outputs on the CPU."""
    from optiml.evaluate.runtime import TaskRuntime
    from optiml.task_runtime import smallest_shape_set

    runtime = TaskRuntime(task, "cpu")
    chosen = smallest_shape_set(runtime) if shape_set is None else shape_set
    if not 0 <= chosen < task.num_shape_sets:
        raise ExportError(f"--shape-set {chosen}: {task.shown} has shape sets 0 to {task.num_shape_sets - 1}")
    size = _case_bytes(task, chosen)
    if size > MAX_DATA_BYTES:
        raise ExportError(
            f"{task.shown}: shape set {chosen} needs {size / 1e6:.0f} MB of recorded data (over "
            f"{MAX_DATA_BYTES / 1e6:.0f} MB); choose a smaller one with --shape-set"
        )
    case = runtime.case(seed, chosen)
    entries = [_entry(TENSOR_INPUT if _is_tensor(v) else SCALAR_INPUT, v) for v in case.abi_inputs]
    entries += [_entry(EXPECTED_OUTPUT, out) for out in case.expected]
    return chosen, MAGIC + struct.pack("<q", len(entries)) + b"".join(entries)


def _case_bytes(task: Task, shape_set: int) -> int:
    """Bytes of a shape set's inputs, parameters and outputs, from a meta-device run (nothing allocated)."""
    from optiml.evaluate.runtime import TaskRuntime

    runtime = TaskRuntime(task, "meta")
    args = runtime.make_args(0, shape_set)
    model = runtime.build_model(0, shape_set)
    tensors = [a for a in args if _is_tensor(a)] + list(model.state_dict().values())
    tensors += runtime.run_reference(model, args)
    return sum(t.numel() * t.element_size() for t in tensors)


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _entry(role: int, value: Any) -> bytes:
    from optiml.evaluate.abi import DTYPE_CODES, MAX_DIMS

    if _is_tensor(value):
        tensor = value.detach().contiguous().cpu()
        shape = list(tensor.shape)
        code = DTYPE_CODES[tensor.dtype]
        # raw bytes whatever the dtype (numpy has no bfloat16): view as bytes, then copy out
        payload = tensor.reshape(-1).view(_uint8()).numpy().tobytes() if tensor.numel() else b""
    else:  # a Python scalar: the ABI hands it over as an int64, float64 or uint8 in host memory
        shape = []
        if isinstance(value, bool):
            code, payload = 8, struct.pack("<B", int(value))
        elif isinstance(value, int):
            code, payload = 5, struct.pack("<q", value)
        else:
            code, payload = 3, struct.pack("<d", float(value))
    header = struct.pack("<4i", role, code, len(shape), 0)
    dims = struct.pack(f"<{MAX_DIMS}q", *(shape + [0] * (MAX_DIMS - len(shape))))
    return header + dims + struct.pack("<q", len(payload)) + payload


def _uint8() -> Any:
    import torch

    return torch.uint8


def inline_header(kernel_code: str) -> str:
    """The kernel with its includes of our headers (``optiml.h``, ``optiml_tma.h``) replaced by a note (the
    headers are inlined above it)."""
    return SHIPPED_INCLUDE.sub(lambda m: f'// #include "{m[1]}" (inlined above)', kernel_code)


def inlined_headers(kernel_code: str) -> str:
    """``optiml.h`` and the helper headers ``kernel_code`` includes, in that order."""
    helpers = [text.rstrip() + "\n" for text in included_helper_headers(kernel_code).values()]
    return "\n".join([abi_header().rstrip() + "\n", *helpers])


def render_standalone(
    task: Task,
    kernel: KernelSource,
    verification: Verification | None = None,
    store: str = "",
    shape_set: int | None = None,
    file_name: str = "",
    arch: str = DEFAULT_ARCH,
) -> tuple[str, bytes]:
    """The ``.cu`` text and its data file (written beside it as ``<stem>.bin``; ``file_name`` is the
    ``.cu``'s name, for the build line)."""
    chosen, data = record_case(task, shape_set)
    file_name = file_name or f"{task.name}_standalone.cu"
    binary = file_name.removesuffix(".cu")
    context = common_context(task, kernel, read_signature(task), verification, store)
    flags = " ".join(kernel.flags)
    libraries = " ".join(f"-l{name}" for name in task.meta.libraries)
    build = f"nvcc -O3 -std=c++17 {gencode(arch)} {flags} -o {binary} {file_name} {libraries}"
    if verification is not None:
        verified_lines = ["Verified against the reference by OptiML, in its isolated harness:", *verification.lines()]
    else:
        verified_lines = [
            f"UNVERIFIED. OptiML holds no verified evaluation of this kernel (digest {kernel.digest}) for this",
            f"task (digest {task.digest}) in {context['store']}: it may not compile, and its results may be wrong.",
        ]
    text = render(
        "standalone.cu.j2",
        verified_lines=verified_lines,
        data_name=f"{binary}.bin",
        shape_set=chosen,
        seed=0,
        atol=repr(task.meta.atol),
        rtol=repr(task.meta.rtol),
        build_command=re.sub(r" +", " ", build).strip(),
        binary=binary,
        header=inlined_headers(kernel.code),
        kernel=inline_header(kernel.code).rstrip() + "\n",
        **{k: v for k, v in context.items() if k in ("task_name", "version")},
    )
    return text, data
