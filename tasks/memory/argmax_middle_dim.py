"""torch.argmax over the middle dim of a float32 [B, M, N] tensor: a column reduction per batch."""

import torch
import torch.nn as nn

B = 16
M = 4096
N = 4095

OPTIML = {
    "description": (
        "torch.argmax(x, dim=1) of a float32 [B, M, N] tensor (KernelBench level 1's rows and columns, 16 of"
        " its 128 batches): the reduced dim is not the innermost, so each output column walks M strided"
        " values; int64 [B, N] out."
    ),
    "dtype": "float32",
    "flops": "B*M*N",
    "shape_sets": [{"B": 3, "M": 1001, "N": 33}, {"B": 2, "M": 5, "N": 70001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, M, N)]


def get_init_inputs() -> list:
    return []
