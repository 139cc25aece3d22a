"""Row sums of a float32 8192 x 147456 matrix (4.5 GiB): a reduction over the contiguous dimension."""

import torch
import torch.nn as nn

M = 8192
N = 147456

OPTIML = {
    "description": "Sum over the last dimension (keepdim) of a float32 M x N matrix (4.5 GiB at the file's size).",
    "dtype": "float32",
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(M, N)]


def get_init_inputs() -> list:
    return []
