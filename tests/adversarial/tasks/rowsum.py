"""Reduction float32: the sum of every row of an M x N matrix."""

import torch
import torch.nn as nn

M = 16384
N = 1024


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


def get_inputs():
    return [torch.rand(M, N)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "row sums of a float32 matrix",
    "dtype": "float32",
    "atol": 1e-4,
    "rtol": 1e-4,
    "shape_sets": [{"M": 1000, "N": 3001}],  # another row length: catches hard-coded shapes
    "flops": "M * N",
    "distributions": ["native", "normal"],
}
