"""Row minimum with keepdim: torch.amin(x, dim=-1, keepdim=True) of a float32 matrix."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": "Minimum over the last dimension of a float32 M x N matrix with keepdim=True, giving M x 1.",
    "dtype": "float32",
    # one comparison per element; the result is an input element, so it is exact.
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amin(x, dim=-1, keepdim=True)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
