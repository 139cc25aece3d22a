"""Frobenius normalization: x / torch.norm(x, p="fro") of a whole float32 4-D tensor."""

import torch
import torch.nn as nn

BATCH = 16
FEATURES = 64
DIM1 = 256
DIM2 = 256

OPTIML = {
    "description": (
        "A float32 [BATCH, FEATURES, DIM1, DIM2] tensor divided by its Frobenius norm (the square root of"
        " the sum of squares of all its elements, a 0-dim global reduction), same-shape output."
    ),
    "dtype": "float32",
    # Tightened atol: outputs have std 1/sqrt(numel) (~1.2e-4 at the default size), so the default
    # atol=1e-4 would accept any answer. A sum of squares of positive terms is well conditioned
    # (relative error ~1e-6 for any parallel order), well inside rtol=1e-4; but a few sequential fp32
    # accumulators over 6.7e7 terms lose ~0.5% and fail, as they should. PyTorch's CPU norm is such a
    # loop (0.5% off at the default size, fine at the small shape sets): build references on the GPU.
    "atol": 1e-7,
    "rtol": 1e-4,
    # square and sum (2), divide (1): ~3 floating-point operations per element.
    "flops": "3*BATCH*FEATURES*DIM1*DIM2",
    "shape_sets": [
        {"BATCH": 3, "FEATURES": 5, "DIM1": 33, "DIM2": 1001},
        {"BATCH": 1, "FEATURES": 1, "DIM1": 3, "DIM2": 100003},
        {"BATCH": 64, "FEATURES": 256, "DIM1": 3, "DIM2": 5},
    ],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p="fro")


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, FEATURES, DIM1, DIM2)]


def get_init_inputs() -> list:
    return []
