"""Batched transpose: x.transpose(1, 2).contiguous() of a float32 [B, M, N] tensor (pure data movement)."""

import torch
import torch.nn as nn

B = 32
M = 2048
N = 1024

OPTIML = {
    "description": "Transpose of the last two dimensions of a float32 [B, M, N] tensor into a contiguous [B, N, M].",
    "dtype": "float32",
    "flops": "0",
    "shape_sets": [{"B": 3, "M": 1000, "N": 3001}, {"B": 1, "M": 3, "N": 100003}, {"B": 16384, "M": 37, "N": 13}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).contiguous()


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, M, N)]


def get_init_inputs() -> list:
    return []
