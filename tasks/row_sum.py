"""Row sum: torch.sum over the last dimension of a float32 matrix (keepdim=False)."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": "Sum of each row of a float32 M x N matrix, giving a vector of M sums.",
    "dtype": "float32",
    # Loosened atol: a row sums N=16384 values of std 1, so the result has std ~128 and an fp32
    # sequential (one thread per row) accumulation drifts by up to ~1e-3 from a tree reduction; a
    # near-zero sum gets no help from rtol. 1e-2 keeps a 10x margin yet is far below the size of
    # any single dropped or doubled element.
    "atol": 1e-2,
    "rtol": 1e-4,
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 50001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
