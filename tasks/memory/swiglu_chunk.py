"""SwiGLU on a fused projection: gate, up = x.chunk(2, dim=-1); F.silu(gate) * up, in float32."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 11008

OPTIML = {
    "description": (
        "A float32 M x 2N matrix (a fused gate-and-up projection) split into halves along the last dim,"
        " then F.silu(gate) * up, giving M x N; the halves are strided views eager PyTorch reads in place."
    ),
    "dtype": "float32",
    # silu (exp, add, divide, multiply) and the product with up: ~5 per output element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 4096, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, 2 * N)]


def get_init_inputs() -> list:
    return []
