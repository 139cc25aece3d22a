"""SwiGLU gate in bfloat16: F.silu(gate) * up, the elementwise half of a Llama MLP."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 11008

OPTIML = {
    "description": (
        "Elementwise F.silu(gate) * up of two bfloat16 M x N matrices (gate, up), bfloat16 output;"
        " N = 11008 is the Llama-7B MLP width."
    ),
    "dtype": "bfloat16",
    # bf16 tolerances (2e-2): PyTorch rounds silu(gate) to bf16 before the multiply, so a kernel that
    # keeps fp32 in between differs by up to ~1 bf16 ulp (~4e-3 relative).
    "atol": 2e-2,
    "rtol": 2e-2,
    # silu (exp, add, divide, multiply) and the product with up: ~5 per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up


def get_inputs() -> list[torch.Tensor]:
    # Generated in fp32 and cast to bfloat16 by the harness.
    return [torch.randn(M, N), torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
