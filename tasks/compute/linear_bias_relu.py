"""Linear + bias + ReLU in float32: torch.relu(nn.Linear(K, N)(x)), one GEMM with a fused epilogue."""

import torch
import torch.nn as nn

M = 4096
K = 4096
N = 4096

OPTIML = {
    "description": (
        "torch.relu(nn.Linear(K, N)(x)) of a float32 [M, K] input: a GEMM against the stored [N, K] weight"
        " with the bias and ReLU fused into its store, exact fp32."
    ),
    "dtype": "float32",
    # nn.Linear's init keeps |y| ~ 0.6 at any K; fp32 reordering moves the K-term sum by
    # ~sqrt(K) * eps * |x w| ~ 1e-6, inside the default atol = rtol = 1e-4, while TF32 (errors
    # ~ sqrt(K) * 2^-11 * |x w| ~ 5e-4) fails.
    "flops": "2*M*N*K + 2*M*N",
    "shape_sets": [{"M": 37, "K": 301, "N": 45}, {"M": 1025, "K": 999, "N": 513}],
}


class Model(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K)]


def get_init_inputs() -> list:
    return [K, N]
