"""Prefix product: torch.cumprod along the last dimension of a float32 matrix with values near 1."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Inclusive prefix product along the last dimension of a float32 M x N matrix with values"
        " 1 + 0.01 * randn, same-shape output."
    ),
    "dtype": "float32",
    # Tightened atol: the k-th running product is exp(N(-5e-5 * k, 0.01 * sqrt(k))), between ~1e-2 and
    # ~50 by k=8192 and down to ~1e-5 at N=100003, where atol=1e-4 would accept zero. fp32 products
    # carry ~sqrt(k) * 6e-8 < 2e-5 relative error in any blocked order, inside rtol=1e-4.
    "atol": 1e-6,
    "rtol": 1e-4,
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    # Near 1 so running products of thousands of factors neither overflow nor underflow.
    return [1.0 + 0.01 * torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
