"""ABI 2 on a real shared object (host code only, so no GPU is needed): `optiml_workspace_bytes` sees
shapes, never buffers, once per shape signature; every entry says whether it is a host scalar or a
(possibly 0-dim) device tensor."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from optiml.evaluate.abi import ABI_VERSION, MEMORY_DEVICE, MEMORY_HOST, KernelLibrary, OptimlTensor, TensorArray
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource

HEADER = Path(__file__).resolve().parents[2] / "src" / "optiml" / "kernel" / "include" / "optiml.h"

PROBE = r"""
#include "optiml.h"
static int g_calls = 0, g_saw_data = 0, g_memory[8];
static int64_t g_scalar = -1;

OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {
  ++g_calls;
  for (int i = 0; i < n_inputs && i < 8; ++i) {
    g_memory[i] = inputs[i].memory;
    if (!optiml_is_host_scalar(&inputs[i]) && inputs[i].data != NULL) g_saw_data = 1;
    if (optiml_is_host_scalar(&inputs[i])) g_scalar = optiml_scalar_i64(&inputs[i]);
  }
  return (size_t)optiml_numel(&inputs[0]) * sizeof(float);
}

OPTIML_EXPORT int probe(int what) {
  if (what == 0) return g_calls;
  if (what == 1) return g_saw_data;
  if (what == 2) return (int)g_scalar;
  return g_memory[what - 3];
}

OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs, int n_outputs,
                                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return OPTIML_ABI_VERSION;
}
"""


def test_the_header_and_the_ctypes_struct_agree() -> None:
    text = HEADER.read_text()
    assert f"#define OPTIML_ABI_VERSION {ABI_VERSION}" in text
    assert ctypes.sizeof(OptimlTensor) == 8 + 8 * 8 * 2 + 4 * 4  # data, shape, stride, ndim, dtype, memory, reserved
    assert "int32_t memory;" in text and "OPTIML_HOST = 1" in text


def test_entries_say_where_their_data_lives() -> None:
    values = [torch.rand(3, 4), torch.tensor(5, dtype=torch.int64), 7, 2.5, True]
    array = TensorArray(values)
    memory = [array.array[i].memory for i in range(len(values))]
    assert memory == [MEMORY_DEVICE, MEMORY_DEVICE, MEMORY_HOST, MEMORY_HOST, MEMORY_HOST]
    assert array.array[1].ndim == 0 and array.array[1].data == values[1].data_ptr()
    shapes = TensorArray(values, shapes_only=True)
    assert shapes.array[0].data is None and shapes.array[1].data is None  # NULL
    assert ctypes.c_int64.from_address(shapes.array[2].data).value == 7  # scalars keep their values


@pytest.mark.nvcc
def test_workspace_bytes_gets_shapes_only_once_per_signature(tmp_path: Path) -> None:
    compiled = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "kernels")).compile(KernelSource(code=PROBE))
    assert compiled.ok and compiled.so_path, compiled.error_summary()
    library = KernelLibrary(compiled.so_path)
    probe = ctypes.CDLL(compiled.so_path).probe  # the same loaded object: its counters
    args = [torch.rand(3, 4), torch.tensor(9), 7]
    for _ in range(3):  # trials, timing, re-checks: one question per shape signature
        assert library.workspace_bytes(TensorArray(args)) == 12 * 4
    assert library.workspace_bytes([torch.rand(3, 4), torch.tensor(1), 7]) == 12 * 4  # new values, same shapes
    assert probe(0) == 1 and library.workspace_queries == 1
    assert library.workspace_bytes([torch.rand(5, 4), torch.tensor(9), 7]) == 20 * 4  # a new shape set
    assert probe(0) == 2
    assert probe(1) == 0, "optiml_workspace_bytes was handed a data pointer"
    assert probe(2) == 7
    assert [probe(3), probe(4), probe(5)] == [MEMORY_DEVICE, MEMORY_DEVICE, MEMORY_HOST]
