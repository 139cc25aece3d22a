"""Row L1 normalization: x / sum(|x|, dim=1, keepdim=True) of a float32 matrix."""

import torch
import torch.nn as nn

M = 4096
N = 16384

OPTIML = {
    "description": (
        "Each row of a float32 M x N matrix divided by its L1 norm (x / sum(|x|) over dim 1, no eps),"
        " same-shape output."
    ),
    "dtype": "float32",
    # Tightened atol: outputs have magnitude ~1.25/N (~8e-5, ~1e-5 at N=100003), so the default
    # atol=1e-4 would accept any answer. A sum of absolute values is well conditioned (relative
    # error ~1e-6 in any order), well inside rtol=1e-4; atol=1e-7 only absorbs absolute noise.
    "atol": 1e-7,
    "rtol": 1e-4,
    # abs and sum (2), divide (1): ~3 floating-point operations per element.
    "flops": "3*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.sum(torch.abs(x), dim=1, keepdim=True)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
