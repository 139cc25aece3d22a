"""C = A @ B for float32 A (2048 x 8192) and B (8192 x 4096): KernelBench level 1's standard GEMM size."""

import torch
import torch.nn as nn

M = 2048
K = 8192
N = 4096

OPTIML = {
    "description": "Matrix product of a float32 M x K matrix and a K x N matrix (exact fp32, no TF32).",
    "dtype": "float32",
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 257, "K": 1001, "N": 130}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs() -> list:
    return []
