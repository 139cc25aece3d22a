"""Batched float32 GEMM: torch.bmm of [BATCH, M, K] and [BATCH, K, N], exact fp32."""

import torch
import torch.nn as nn

BATCH = 32
M = 1024
N = 1024
K = 512

OPTIML = {
    "description": "torch.bmm of float32 [BATCH, M, K] and [BATCH, K, N] tensors, exact fp32 (no TF32).",
    "dtype": "float32",
    # K = 512 std-1 terms: |C| ~ 23; fp32 reordering moves it by ~2 * K * eps ~ 1.2e-4, so atol 2e-3
    # keeps a ~10x margin while TF32 (errors ~ sqrt(K) * 2^-11 ~ 1e-2) fails.
    "atol": 2e-3,
    "rtol": 1e-4,
    "flops": "2*BATCH*M*N*K",
    "shape_sets": [{"BATCH": 3, "M": 37, "N": 45, "K": 29}, {"BATCH": 7, "M": 255, "N": 129, "K": 1001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs() -> list:
    return []
