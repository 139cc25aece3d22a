"""Matrix-vector product in float32: y = A @ x, A is M x K."""

import torch
import torch.nn as nn

M = 12288
K = 12288

OPTIML = {
    "description": "Float32 matrix-vector product y = A @ x of an M x K matrix and a K vector (GEMV), exact fp32.",
    "dtype": "float32",
    # K = 12288 std-1 terms: |y| ~ 111; fp32 reordering moves it by ~2 * K * eps ~ 3e-3, so atol
    # 3e-2 keeps a ~10x margin while TF32 (errors ~ sqrt(K) * 2^-11 ~ 5e-2 typical) fails.
    "atol": 3e-2,
    "rtol": 1e-4,
    "flops": "2*M*K",
    "shape_sets": [{"M": 37, "K": 1001}, {"M": 100003, "K": 129}, {"M": 3, "K": 65537}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K)]


def get_init_inputs() -> list:
    return []
