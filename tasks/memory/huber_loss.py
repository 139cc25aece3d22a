"""Huber loss: F.huber_loss(predictions, targets, delta=1.0) of two float32 matrices, mean reduction."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Mean Huber loss (delta=1: 0.5*d^2 where |d| < 1, else |d| - 0.5, with d = predictions - targets) of"
        " two float32 M x N matrices; 0-dim float32 output."
    ),
    "dtype": "float32",
    # Default tolerances: the loss is ~0.7 and a parallel fp32 mean of positive terms is accurate to
    # ~1e-6 relative. The difference has std sqrt(2), so both branches are taken often.
    # subtract, abs, compare, square or subtract, sum: ~5 floating-point operations per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=1.0)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N), torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
