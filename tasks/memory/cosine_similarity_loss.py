"""Cosine-similarity loss: (1 - F.cosine_similarity(a, b, dim=1)).mean() over rows of two float32 matrices."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32768
DIM = 2048

OPTIML = {
    "description": (
        "Mean over BATCH rows of 1 - cos(a_i, b_i), the cosine similarity over dim 1 (size DIM, eps=1e-8) of"
        " two float32 BATCH x DIM matrices; 0-dim float32 output."
    ),
    "dtype": "float32",
    # Default tolerances: the loss is ~1 (random rows are nearly orthogonal) and fp32 dot products and
    # norms of DIM terms are accurate to ~1e-6 relative, far inside rtol=1e-4.
    # dot product (2) and two squared norms (4) per element pair: ~6 floating-point operations.
    "flops": "6*BATCH*DIM",
    "shape_sets": [{"BATCH": 1000, "DIM": 3001}, {"BATCH": 3, "DIM": 100003}, {"BATCH": 65536, "DIM": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (1 - F.cosine_similarity(a, b, dim=1)).mean()


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs() -> list:
    return []
