"""Tall-skinny float32 GEMM: C = A @ B with A 131072 x 128 and B 128 x 64."""

import torch
import torch.nn as nn

M = 131072
N = 64
K = 128

OPTIML = {
    "description": (
        "Float32 product C = A @ B of a tall M x K matrix (many rows, short K) and a small K x N one:"
        " low arithmetic intensity, exact fp32."
    ),
    "dtype": "float32",
    # K = 128 std-1 terms: |C| ~ 11; fp32 reordering moves it by ~2 * K * eps ~ 3e-5, within the
    # default atol = rtol = 1e-4, while TF32 (errors ~ sqrt(K) * 2^-11 ~ 6e-3) fails.
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 1001, "N": 17, "K": 33}, {"M": 65537, "N": 63, "K": 129}],
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
