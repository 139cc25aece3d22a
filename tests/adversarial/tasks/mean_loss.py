"""A scalar loss: the mean squared difference of two float32 vectors (one 0-dim output).

The tolerance is a loss's usual one, wide enough that a mean estimated from a sixteenth of the
values passes on the task's own inputs; the verification's perturbed inputs (outliers, shifted or
scaled rows: optiml.evaluate.sensitivity) are what tell the estimate from the answer.
"""

import torch
import torch.nn as nn

N = 16777216


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mean((a - b) ** 2)


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "mean squared error of two float32 vectors",
    "dtype": "float32",
    "atol": 2e-3,
    "rtol": 2e-3,
    "shape_sets": [{"N": 3_000_017}],
    "flops": "3 * N",
    "distributions": ["native"],
}
