"""Masked select: torch.where(mask, x, y) with a boolean mask input, elementwise over a matrix."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Elementwise torch.where(mask, x, y) of a bool M x N mask and two float32 M x N matrices x and y,"
        " giving a float32 M x N matrix."
    ),
    "dtype": "float32",
    # a select, no arithmetic: pure data movement (13 bytes per element).
    "flops": "0",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, mask: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, x, y)


def get_inputs() -> list[torch.Tensor]:
    # The bool mask keeps its dtype (only floating inputs are cast): one byte per element.
    return [torch.rand(M, N) > 0.5, torch.randn(M, N), torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
