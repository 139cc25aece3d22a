"""Column sums of a float32 147456 x 8192 matrix (4.5 GiB): a reduction over the outer dimension."""

import torch
import torch.nn as nn

M = 147456
N = 8192

OPTIML = {
    "description": "Sum over dimension 0 (the M rows) of a float32 M x N matrix, giving N values (4.5 GiB read).",
    "dtype": "float32",
    "flops": "M*N",
    "shape_sets": [{"M": 3001, "N": 1000}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=0)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, N)]


def get_init_inputs() -> list:
    return []
