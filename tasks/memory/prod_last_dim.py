"""Row product: torch.prod(x, dim=-1) of a float32 matrix whose values lie near 1."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": (
        "Product over the last dimension of a float32 M x N matrix with values 1 + 0.01 * randn, giving M products."
    ),
    "dtype": "float32",
    # Tightened atol: log(product) ~ N(-5e-5 * N, 0.01 * sqrt(N)), so products span ~1e-3..40 at
    # N=16384 and are ~7e-3 (down to ~1e-6) at N=100003, where atol=1e-4 would accept zero. fp32 products
    # carry ~sqrt(N) * 6e-8 < 2e-5 relative error whatever the multiplication order, well inside
    # rtol=1e-4; atol=1e-6 only absorbs noise on the smallest products.
    "atol": 1e-6,
    "rtol": 1e-4,
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.prod(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    # Near 1 so products of thousands of factors neither overflow nor underflow.
    return [1.0 + 0.01 * torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
