"""Linear + LayerNorm in float32: nn.LayerNorm(N)(nn.Linear(K, N)(x)), a transformer block's tail."""

import torch
import torch.nn as nn

M = 8192
K = 1024
N = 1024

OPTIML = {
    "description": (
        "nn.LayerNorm(N) (affine, eps 1e-5) of nn.Linear(K, N)(x) for a float32 [M, K] input: a GEMM with"
        " bias, then a row norm over its N outputs, exact fp32."
    ),
    "dtype": "float32",
    # nn.Linear's init keeps the pre-norm values ~0.6, fp32 reordering moves them by ~1e-6, and the
    # norm divides by their std (~0.6): ~2e-6 errors, inside the default atol = rtol = 1e-4; TF32
    # (~4e-4 before the norm) fails.
    "flops": "2*M*N*K + 8*M*N",
    "shape_sets": [{"M": 37, "K": 301, "N": 45}, {"M": 1001, "K": 257, "N": 4097}],
}


class Model(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(k, n)
        self.norm = nn.LayerNorm(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K)]


def get_init_inputs() -> list:
    return [K, N]
