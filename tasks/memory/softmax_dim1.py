"""Channel softmax: torch.softmax over dim=1 of a float32 [B, C, L] tensor (not the last dimension)."""

import torch
import torch.nn as nn

B = 16
C = 1024
L = 4096

OPTIML = {
    "description": (
        "Softmax over dimension 1 (size C, the middle one, stride L) of a float32 [B, C, L] tensor,"
        " giving a float32 tensor of the same shape."
    ),
    "dtype": "float32",
    # Tightened atol: outputs are probabilities of about 1/C (~1e-3, ~1e-5 at C=100003), so the
    # default atol=1e-4 would accept almost any answer near zero. fp32 softmax is accurate to a few
    # ulps plus the sum rounding (relative error ~1e-6), well inside rtol=1e-4.
    "atol": 1e-6,
    "rtol": 1e-4,
    # max, subtract, exp, sum and divide: ~5 floating-point operations per element.
    "flops": "5*B*C*L",
    "shape_sets": [{"B": 5, "C": 1001, "L": 3001}, {"B": 1, "C": 100003, "L": 3}, {"B": 64, "C": 37, "L": 1024}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, C, L)]


def get_init_inputs() -> list:
    return []
