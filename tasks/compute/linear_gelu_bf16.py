"""Linear + GELU (tanh) in bfloat16: F.gelu(nn.Linear(K, N)(x), approximate="tanh"), an MLP up-projection."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
K = 4096
N = 11008

OPTIML = {
    "description": (
        "F.gelu(nn.Linear(K, N)(x), approximate='tanh') of a bfloat16 [M, K] input: a tensor-core GEMM"
        " with bias and GELU fused into its store, fp32 accumulation, bfloat16 output."
    ),
    "dtype": "bfloat16",
    # PyTorch rounds the linear output to bf16 before the GELU; a fused kernel keeps fp32 in between
    # and rounds once, so results differ by up to ~2 bf16 ulps (~1.6e-2 relative); |y| ~ 0.6 with
    # nn.Linear's init, so atol = rtol = 2e-2 (the bf16 default) admits that and little more.
    "flops": "2*M*N*K + 10*M*N",
    "shape_sets": [{"M": 37, "K": 301, "N": 45}, {"M": 1000, "K": 1032, "N": 2051}],
}


class Model(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x), approximate="tanh")


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K)]


def get_init_inputs() -> list:
    return [K, N]
