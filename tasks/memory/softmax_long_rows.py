"""Row softmax over long rows: torch.softmax over the last dimension of a float32 matrix whose rows (1 MB each)
are too long for a block's registers and, all together, far larger than L2 (KernelBench's 23_Softmax class)."""

import torch
import torch.nn as nn

M = 512
N = 262144

OPTIML = {
    "description": (
        "Softmax over the last dimension (each row) of a float32 M x N matrix with long rows, same-shape output."
    ),
    "dtype": "float32",
    # Outputs are about 1/N (~4e-6): the default atol would pass all zeros; the harness tightens it to
    # rtol x max|ref| where a trivial output passes. rtol=1e-4 is far above the per-row sum's fp32 error.
    # max, subtract, exp, sum and divide: ~5 floating-point operations per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 64, "N": 300001}, {"M": 7, "N": 131071}, {"M": 300, "N": 65536}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
