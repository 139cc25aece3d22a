"""Conv2d + ReLU + MaxPool2d in float32: a VGG-style stage, conv then a 2x2 pool."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
C_IN = 64
C_OUT = 128
HEIGHT = 112
WIDTH = 112

OPTIML = {
    "description": (
        "F.max_pool2d(torch.relu(nn.Conv2d(C_IN, C_OUT, 3, padding=1)(x)), 2) of a float32 NCHW input: a"
        " convolution with bias and ReLU fused, then a 2x2 max pool; exact fp32."
    ),
    "dtype": "float32",
    # Conv outputs ~0.6 with fp32 reordering errors ~1e-6 (C_IN * 9 terms); ReLU and max select
    # elements without rounding, so the default atol = rtol = 1e-4 holds, and TF32 (~3e-4) fails.
    "flops": "2*BATCH*C_OUT*HEIGHT*WIDTH*C_IN*9 + 2*BATCH*C_OUT*HEIGHT*WIDTH",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 14, "WIDTH": 18},
        {"BATCH": 3, "C_IN": 32, "C_OUT": 33, "HEIGHT": 29, "WIDTH": 31},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(torch.relu(self.conv(x)), 2)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
