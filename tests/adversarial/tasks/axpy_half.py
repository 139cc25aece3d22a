"""Elementwise float16: out = 2.5 * x + y, where half precision is the task's own dtype."""

import torch
import torch.nn as nn

N = 16777216  # 2**24


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 2.5 * x + y


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "out = 2.5 * x + y over float16 vectors",
    "dtype": "float16",
    "atol": 1e-2,
    "rtol": 1e-2,
    "shape_sets": [{"N": 1000003}],
    "flops": "2 * N",
}
