"""Full reduction: torch.sum(x) of a large float32 matrix to a 0-dim scalar."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": "Sum of all elements of a float32 M x N matrix, giving a 0-dim float32 scalar.",
    "dtype": "float32",
    # Loosened atol: the sum of M*N = 1.3e8 values of std 1 has std ~1.2e4, so its fp32 ulp is ~1e-3
    # and the order of accumulation matters: simulated block partials combined by atomics in random
    # order land up to ~0.06 from the exact sum (PyTorch's own fp32 sum ~4e-3). atol=0.5 keeps an 8x
    # margin; rtol=1e-4 of a typical |sum| ~1e4 adds ~1 on top, so a 0-dim sum cannot resolve single
    # elements, but a dropped or doubled block of a thousand elements (std ~32) almost always fails.
    "atol": 0.5,
    "rtol": 1e-4,
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
