"""SiLU over a float32 4096 x 393216 matrix (6 GiB): KernelBench level 1's elementwise size."""

import torch
import torch.nn as nn

M = 4096
N = 393216

OPTIML = {
    "description": "SiLU, x * sigmoid(x), elementwise over a float32 M x N matrix (6 GiB at the file's size).",
    "dtype": "float32",
    # exp, add, divide and multiply: ~4 floating-point operations per element.
    "flops": "4*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, N)]


def get_init_inputs() -> list:
    return []
