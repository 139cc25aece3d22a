"""The ctypes side of ``optiml.h``: marshal torch tensors and call a candidate's ``optiml_forward``.

ABI 2: every entry says where its ``data`` lives (``memory``: device tensor, 0-dim ones included, or
host scalar), and ``optiml_workspace_bytes`` is asked with shapes only (device ``data`` NULL), once
per distinct shape signature: it never sees a buffer, so no answer can be computed there, untimed.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import torch

MAX_DIMS = 8
ABI_VERSION = 2
MEMORY_DEVICE = 0
MEMORY_HOST = 1

DTYPE_CODES = {
    torch.float32: 0,
    torch.float16: 1,
    torch.bfloat16: 2,
    torch.float64: 3,
    torch.int32: 4,
    torch.int64: 5,
    torch.int8: 6,
    torch.uint8: 7,
    torch.bool: 8,
    torch.int16: 9,
}


class OptimlTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("stride", ctypes.c_int64 * MAX_DIMS),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("memory", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
    ]


class AbiError(Exception):
    """An argument cannot be expressed in the ABI, or the library lacks the entry point."""


def signature(values: Sequence[Any]) -> tuple[Any, ...]:
    """What a shapes-only view of ``values`` shows: tensor layouts and dtypes, scalar values."""
    return tuple(
        ("tensor", tuple(v.shape), v.stride(), str(v.dtype))
        if isinstance(v, torch.Tensor)
        else ("scalar", type(v).__name__, v)
        for v in values
    )


class TensorArray:
    """A ctypes array of ``optiml_tensor`` that keeps its tensors and scalar host buffers alive.

    ``shapes_only``: device ``data`` pointers are NULL (what ``optiml_workspace_bytes`` gets).
    """

    def __init__(self, values: Sequence[Any], shapes_only: bool = False) -> None:
        self.values = list(values)
        self.count = len(values)
        self.shapes_only = shapes_only
        self.array = (OptimlTensor * max(1, self.count))()
        self._keep: list[Any] = []
        for i, value in enumerate(values):
            self._fill(self.array[i], value)

    def _fill(self, slot: OptimlTensor, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            self._keep.append(value)  # the array holds raw pointers: keep the memory alive with it
            if value.dim() > MAX_DIMS:
                raise AbiError(f"a tensor has {value.dim()} dims; the ABI allows {MAX_DIMS}")
            if value.dtype not in DTYPE_CODES:
                raise AbiError(f"dtype {value.dtype} is not in the ABI")
            slot.data = None if self.shapes_only else value.data_ptr()
            slot.memory = MEMORY_DEVICE
            for d in range(value.dim()):
                slot.shape[d] = value.shape[d]
                slot.stride[d] = value.stride(d)
            slot.ndim = value.dim()
            slot.dtype = DTYPE_CODES[value.dtype]
            return
        if isinstance(value, bool):
            host: Any = ctypes.c_uint8(int(value))
            code = DTYPE_CODES[torch.bool]
        elif isinstance(value, int):
            host, code = ctypes.c_int64(value), DTYPE_CODES[torch.int64]
        elif isinstance(value, float):
            host, code = ctypes.c_double(value), DTYPE_CODES[torch.float64]
        else:
            raise AbiError(f"cannot pass a {type(value).__name__} through the ABI")
        self._keep.append(host)
        slot.data = ctypes.addressof(host)
        slot.ndim = 0
        slot.dtype = code
        slot.memory = MEMORY_HOST


class KernelLibrary:
    """A loaded candidate shared object."""

    def __init__(self, so_path: str) -> None:
        try:
            self._lib = ctypes.CDLL(so_path, mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            raise AbiError(f"cannot load the shared object: {exc}") from exc
        try:
            forward = self._lib.optiml_forward
        except AttributeError as exc:
            raise AbiError("the library does not export `optiml_forward` (use OPTIML_EXPORT)") from exc
        forward.restype = ctypes.c_int
        forward.argtypes = [
            ctypes.POINTER(OptimlTensor),
            ctypes.c_int,
            ctypes.POINTER(OptimlTensor),
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_void_p,
        ]
        self._forward = forward
        self._workspace_fn = getattr(self._lib, "optiml_workspace_bytes", None)
        if self._workspace_fn is not None:
            self._workspace_fn.restype = ctypes.c_size_t
            self._workspace_fn.argtypes = [ctypes.POINTER(OptimlTensor), ctypes.c_int]
        self._workspace_sizes: dict[tuple[Any, ...], int] = {}
        self.workspace_queries = 0  # calls actually made into optiml_workspace_bytes

    def workspace_bytes(self, inputs: TensorArray | Sequence[Any]) -> int:
        """Scratch bytes for inputs shaped like these: asked of the candidate with shapes only (device
        ``data`` NULL), once per shape signature, then remembered. The real buffers are never passed."""
        if self._workspace_fn is None:
            return 0
        values = inputs.values if isinstance(inputs, TensorArray) else list(inputs)
        key = signature(values)
        if key not in self._workspace_sizes:
            shapes = TensorArray(values, shapes_only=True)
            self.workspace_queries += 1
            self._workspace_sizes[key] = int(self._workspace_fn(shapes.array, shapes.count))
        return self._workspace_sizes[key]

    def forward(
        self,
        inputs: TensorArray,
        outputs: TensorArray,
        workspace: torch.Tensor | None,
        stream: torch.cuda.Stream,
    ) -> int:
        ptr = workspace.data_ptr() if workspace is not None else None
        size = workspace.numel() if workspace is not None else 0
        return int(
            self._forward(inputs.array, inputs.count, outputs.array, outputs.count, ptr, size, stream.cuda_stream)
        )
