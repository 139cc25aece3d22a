"""Matrix multiply: C = A @ B in float32 (no TF32), A is M x K and B is K x N."""

import torch
import torch.nn as nn

M = 2048
K = 2048
N = 2048

OPTIML = {
    "description": "Dense float32 matrix product C = A @ B of an M x K and a K x N matrix (fp32, no TF32).",
    "dtype": "float32",
    # Loosened atol: each output is a K=2048-term dot product of std-1 values (|C| ~ 45), and a
    # different fp32 summation order (sequential, tiled, split-K) moves it by up to ~5e-4, more
    # than the default atol on near-zero outputs. 5e-3 keeps a ~10x margin while TF32 or lower
    # precision (errors ~7e-2 at this size) still fails.
    "atol": 5e-3,
    "rtol": 1e-4,
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 333, "K": 517, "N": 259}, {"M": 1, "K": 1000, "N": 77}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs() -> list:
    return []
