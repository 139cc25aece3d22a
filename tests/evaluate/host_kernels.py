"""The axpy task and the host-library prelude the CPU judge tests build their candidates from: the real
protocol, with host libraries in the OptiML ABI (gcc) and file-mapped buffers instead of a GPU."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

TASK = """
import torch
import torch.nn as nn

N = 4099


class Model(nn.Module):
    def forward(self, x, y):
        return 2.5 * x + y


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []


OPTIML = {"dtype": "float32", "shape_sets": [{"N": 515}], "flops": "2 * N"}
"""

PRELUDE = r"""
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
typedef struct {
  void* data; int64_t shape[8]; int64_t stride[8]; int32_t ndim, dtype, memory, reserved;  // optiml.h, ABI 2
} optiml_tensor;
static int64_t numel(const optiml_tensor* t) {
  int64_t n = 1; for (int d = 0; d < t->ndim; ++d) n *= t->shape[d]; return n;
}
static void axpy(const optiml_tensor* in, optiml_tensor* out) {
  const float* x = (const float*)in[0].data; const float* y = (const float*)in[1].data; float* o = (float*)out[0].data;
  for (int64_t i = 0, n = numel(&in[0]); i < n; ++i) o[i] = 2.5f * x[i] + y[i];
}
"""

HONEST = (
    "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb,"
    " void* s) { axpy(in, out); return 0; }"
)


def build_host_libraries(folder: Path, prelude: str, kernels: dict[str, str], opt: str = "-O1") -> dict[str, str]:
    """Each kernel body (after ``prelude``) built with gcc into a shared library in ``folder``: name -> path."""
    built = {}
    for name, body in kernels.items():
        source = folder / f"{name}.c"
        source.write_text(prelude + textwrap.dedent(body))
        library = folder / f"{name}.so"
        subprocess.run(["gcc", "-shared", "-fPIC", opt, "-o", str(library), str(source)], check=True)
        built[name] = str(library)
    return built
