"""Matmul + scale + residual in float32: (a @ b) * 0.125 + r."""

import torch
import torch.nn as nn

M = 4096
K = 2048
N = 4096

OPTIML = {
    "description": (
        "(A @ B) * 0.125 + R of float32 A [M, K], B [K, N] and a residual R [M, N]: the scale and the residual"
        " add fused into the GEMM's store, exact fp32."
    ),
    "dtype": "float32",
    # K = 2048 std-1 terms: |A @ B| ~ 45, and fp32 reordering moves it by ~5e-4 (tasks/matmul.py), 6e-5
    # after the scale; the residual add is exact-rounded. The default atol 1e-4 would be tight, so
    # atol 1e-3 (a ~15x margin); TF32 (errors ~2e-2 before the scale, 3e-3 after) fails.
    "atol": 1e-3,
    "rtol": 1e-4,
    "flops": "2*M*N*K + 2*M*N",
    "shape_sets": [{"M": 37, "K": 301, "N": 45}, {"M": 1000, "K": 513, "N": 2051}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b) * 0.125 + r


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
