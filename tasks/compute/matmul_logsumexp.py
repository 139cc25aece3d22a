"""Matmul + row logsumexp in float32: torch.logsumexp(a @ b, dim=1)."""

import torch
import torch.nn as nn

M = 4096
K = 1024
N = 4096

OPTIML = {
    "description": (
        "torch.logsumexp(A @ B * 0.03125, dim=1) of float32 A [M, K] and B [K, N]: a GEMM with a scaling"
        " epilogue and a row logsumexp tail, exact fp32 (a [M] output)."
    ),
    "dtype": "float32",
    # The scaled products are K-term sums of std-1 values over sqrt(K) = 32: ~N(0, 1), fp32 reordering
    # moves them by ~1e-6; logsumexp ~ log(N) + 0.5 ~ 9 keeps that error: the default atol = rtol =
    # 1e-4 holds with a wide margin, while TF32 (~5e-4 per logit) fails.
    "flops": "2*M*N*K + 4*M*N",
    "shape_sets": [{"M": 37, "K": 1024, "N": 45}, {"M": 1001, "K": 1024, "N": 3001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(a @ b * 0.03125, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs() -> list:
    return []
