"""Square float32 GEMM: C = A @ B with M = N = K = 4096, exact fp32 (no TF32)."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096

OPTIML = {
    "description": "Dense float32 matrix product C = A @ B of an M x K and a K x N matrix, exact fp32 (no TF32).",
    "dtype": "float32",
    # Each output is a K-term dot product of std-1 values (|C| ~ sqrt(K) = 64). Another fp32 summation
    # order (tiled, split) moves it by ~2 * K * eps ~ 1e-3 at K = 4096, more than the default atol on
    # near-zero outputs: atol 1e-2 keeps a ~10x margin, while TF32 (products rounded to 10 bits:
    # errors ~ sqrt(K) * 2^-11 ~ 3e-2 typical, 1e-1 worst) still fails.
    "atol": 1e-2,
    "rtol": 1e-4,
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 333, "N": 259, "K": 517}, {"M": 1023, "N": 1029, "K": 2049}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs() -> list:
    return []
