"""1-D convolution in float32: nn.Conv1d(C_IN, C_OUT, 5, padding=2) over a long sequence."""

import torch
import torch.nn as nn

BATCH = 32
C_IN = 256
C_OUT = 256
LENGTH = 4096

OPTIML = {
    "description": (
        "nn.Conv1d(C_IN, C_OUT, 5, padding=2) with bias of a float32 [BATCH, C_IN, LENGTH] input, exact fp32."
    ),
    "dtype": "float32",
    # C_IN * 5 terms with the default init: |y| ~ 0.6, fp32 reordering errors ~1e-6, inside the
    # default atol = rtol = 1e-4; TF32 (~3e-4) fails.
    "flops": "2*BATCH*C_OUT*LENGTH*C_IN*5",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "LENGTH": 101},
        {"BATCH": 3, "C_IN": 64, "C_OUT": 33, "LENGTH": 1001},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, 5, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, LENGTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
