"""Swish in half precision: x * torch.sigmoid(x) of a float16 matrix (elementwise)."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": "Elementwise swish x * sigmoid(x) of a float16 M x N matrix, float16 output.",
    "dtype": "float16",
    # fp16 tolerances (1e-2): PyTorch rounds sigmoid(x) to fp16 before the multiply, so a kernel that
    # keeps fp32 in between differs by up to ~1 fp16 ulp (~1e-3 relative).
    "atol": 1e-2,
    "rtol": 1e-2,
    # exp, add, divide and multiply: ~4 floating-point operations per element.
    "flops": "4*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def get_inputs() -> list[torch.Tensor]:
    # Generated in fp32 and cast to float16 by the harness.
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
