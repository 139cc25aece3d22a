"""Small-K float32 GEMM at KernelBench's size (level1/7): C = A @ B with A 32768 x 64 and B 64 x 32768."""

import torch
import torch.nn as nn

M = 32768
N = 32768
K = 64

OPTIML = {
    "description": (
        "Float32 product C = A @ B of an M x K and a K x N matrix with a short K (64): 4 GiB of output from"
        " 16 MiB of inputs, so writing C costs as much as the multiply-adds; exact fp32."
    ),
    "dtype": "float32",
    # K = 64 terms in [0, 1): |C| ~ 16; fp32 reordering moves it by ~2 * K * eps * 16 ~ 2e-4, far inside
    # rtol = 1e-4 of 16, while TF32 (relative errors ~ 2^-11) fails.
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 1001, "N": 3001, "K": 17}, {"M": 4099, "N": 129, "K": 64}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs() -> list:
    return []
