"""Fused SiLU chain: x * sigmoid(x) * 1.702 + bias, with a learned bias of shape [N] broadcast over rows."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Elementwise x * sigmoid(x) * 1.702 + bias of a float32 M x N matrix, where bias is a float32"
        " parameter of shape [N] broadcast over the M rows."
    ),
    "dtype": "float32",
    # exp, add, divide, multiply by x, multiply by the scale, add the bias: ~6 per element.
    "flops": "6*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        # The scale is a fixed constant of the op (the ABI passes tensors, not hyperparameters).
        self.scale = 1.702
        # Non-trivial bias from its own generator, so it does not depend on the harness seed; created on
        # the CPU explicitly so a CUDA default device works.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        self.bias = nn.Parameter(0.5 * torch.randn(features, generator=gen, device="cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + self.bias


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return [N]
