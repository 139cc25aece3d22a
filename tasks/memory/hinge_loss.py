"""Hinge loss: torch.clamp(1 - predictions * targets, min=0).mean() with targets in {-1, +1}."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Mean over all elements of max(0, 1 - predictions * targets) for float32 M x N predictions and"
        " float32 M x N targets in {-1, +1}; 0-dim float32 output."
    ),
    "dtype": "float32",
    # Default tolerances: the loss is ~1.1 and a parallel fp32 mean of non-negative terms is accurate
    # to ~1e-6 relative, far inside rtol=1e-4.
    # multiply, subtract, clamp and sum: ~4 floating-point operations per element.
    "flops": "4*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1 - predictions * targets, min=0).mean()


def get_inputs() -> list[torch.Tensor]:
    # Targets are +-1 as floats (cast to the task dtype like the predictions).
    return [torch.randn(M, N), torch.randint(0, 2, (M, N)).float() * 2 - 1]


def get_init_inputs() -> list:
    return []
