"""RMSNorm written by hand: x * rsqrt(mean(x^2, -1) + eps) * weight over the hidden dimension."""

import torch
import torch.nn as nn

TOKENS = 16384
HIDDEN = 4096

OPTIML = {
    "description": (
        "RMSNorm over the last dimension (size HIDDEN, eps=1e-6) of a float32 TOKENS x HIDDEN matrix:"
        " x * rsqrt(mean(x^2) + eps) * weight with a float32 weight of shape [HIDDEN]."
    ),
    "dtype": "float32",
    # square and sum (2), scale by the rsqrt and by the weight (2): ~4 floating-point operations per element.
    "flops": "4*TOKENS*HIDDEN",
    "shape_sets": [
        {"TOKENS": 1000, "HIDDEN": 3001},
        {"TOKENS": 3, "HIDDEN": 100003},
        {"TOKENS": 65536, "HIDDEN": 37},
    ],
}


class Model(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        # eps is part of the op (the ABI passes tensors, not hyperparameters).
        self.eps = 1e-6
        # Non-trivial weight (not ones), fixed by its own generator so it does not depend on the
        # harness seed. Created on the CPU explicitly so a CUDA default device works.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(hidden, generator=gen, device="cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs() -> list:
    return [HIDDEN]
