"""Transformer LayerNorm: nn.LayerNorm over the hidden dimension of a float32 [BATCH, SEQ, HIDDEN] tensor."""

import torch
import torch.nn as nn

BATCH = 8
SEQ = 2048
HIDDEN = 4096

OPTIML = {
    "description": (
        "nn.LayerNorm over the last dimension (size HIDDEN, eps=1e-5, biased variance) of a float32"
        " [BATCH, SEQ, HIDDEN] tensor, followed by the elementwise affine weight * x_hat + bias."
    ),
    "dtype": "float32",
    # mean (1), variance (3), normalise and affine (4): ~8 floating-point operations per element.
    "flops": "8*BATCH*SEQ*HIDDEN",
    "shape_sets": [
        {"BATCH": 1, "SEQ": 1000, "HIDDEN": 3001},
        {"BATCH": 1, "SEQ": 3, "HIDDEN": 100003},
        {"BATCH": 64, "SEQ": 1024, "HIDDEN": 37},
    ],
}


class Model(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        # eps is part of the op (the ABI passes tensors, not hyperparameters).
        self.ln = nn.LayerNorm(hidden, eps=1e-5, elementwise_affine=True)
        # Non-trivial affine parameters (not ones/zeros), fixed by their own generator so they do not
        # depend on the harness seed. Created on the CPU explicitly so a CUDA default device works.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(hidden, generator=gen, device="cpu"))
            self.ln.bias.copy_(0.5 * torch.randn(hidden, generator=gen, device="cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs() -> list:
    return [HIDDEN]
