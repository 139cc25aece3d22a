"""Mean squared error: F.mse_loss(predictions, targets) of two float32 matrices, mean reduction."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Mean over all elements of (predictions - targets)^2 for two float32 M x N matrices; 0-dim float32 output."
    ),
    "dtype": "float32",
    # Default tolerances: the loss is ~2 (the difference of two std-1 inputs has variance 2), and a
    # parallel fp32 mean of positive terms is accurate to ~1e-6 relative, far inside rtol=1e-4.
    # subtract, square and sum: ~3 floating-point operations per element.
    "flops": "3*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N), torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
