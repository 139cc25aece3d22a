"""Row softmax: torch.softmax over the last dimension of a float32 matrix."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": "Softmax over the last dimension (each row) of a float32 M x N matrix.",
    "dtype": "float32",
    # Tightened atol: outputs are probabilities of about 1/N (~1e-4), so the default atol=1e-4
    # would accept almost any answer near zero. fp32 softmax is accurate to a few ulps plus the
    # row-sum rounding (relative error ~1e-6), well inside rtol=1e-4; atol=1e-6 only absorbs
    # absolute noise on tiny probabilities.
    "atol": 1e-6,
    "rtol": 1e-4,
    # max, subtract, exp, sum and divide: ~5 floating-point operations per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 5, "N": 50001}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
