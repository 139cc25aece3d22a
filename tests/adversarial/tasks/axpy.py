"""Elementwise float32: out = 2.5 * x + y. Large enough that hidden work shows up in host timings."""

import torch
import torch.nn as nn

N = 67108864  # 2**26 floats: 256 MiB per tensor, ~0.2 ms of HBM traffic per call on an H200


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 2.5 * x + y


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []


OPTIML = {
    "description": "out = 2.5 * x + y over float32 vectors",
    "dtype": "float32",
    "atol": 1e-4,
    "rtol": 1e-4,
    "shape_sets": [{"N": 3145735}],  # 3 * 2**20 + 7: odd length: tails and shape assumptions
    "flops": "2 * N",
    "distributions": ["native", "normal"],
}
