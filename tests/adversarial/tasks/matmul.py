"""A compute-bound task: C = A @ B, float32. Its floor is flops over the compute roof, not bytes."""

import torch
import torch.nn as nn

N = 2048


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "square float32 matrix product",
    "shape_sets": [{"N": 1000}],
    "flops": "2 * N**3",
}
