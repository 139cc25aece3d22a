"""ReLU as KernelBench ships it: torch.rand inputs (all >= 0), no input distributions named.

On such inputs ReLU is the identity, so ``y = x`` passes; the default second distribution (signed
``normal`` inputs) is what tells them apart.
"""

import torch
import torch.nn as nn

N = 16777216  # 2**24 floats


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "ReLU over a float32 vector (KernelBench inputs: torch.rand)",
    "shape_sets": [{"N": 1000003}],
    "flops": "N",
}
