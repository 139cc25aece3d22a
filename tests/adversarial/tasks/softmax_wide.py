"""Row softmax over very wide rows: every output is below 1e-4, the task's atol.

Like KernelBench's 23_Softmax (rows of 393216, outputs below ~4e-6), an all-zero output is within
atol=1e-4 of the reference everywhere; preparing the task tightens atol to rtol x max|ref|.
"""

import torch
import torch.nn as nn

B = 256
D = 131072


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(B, D)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "softmax over rows of 131072 float32 values",
    "atol": 1e-4,
    "rtol": 1e-4,
    "shape_sets": [{"B": 7, "D": 100003}],
    "flops": "5 * B * D",
}
