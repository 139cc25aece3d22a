"""Strided 2-D convolution in float32: nn.Conv2d(C_IN, C_OUT, 3, stride=2, padding=1), a downsampling layer."""

import torch
import torch.nn as nn

BATCH = 32
C_IN = 128
C_OUT = 256
HEIGHT = 112
WIDTH = 112

OPTIML = {
    "description": (
        "nn.Conv2d(C_IN, C_OUT, 3, stride=2, padding=1) with bias of a float32 NCHW input (a ResNet"
        " downsampling convolution), exact fp32 (no TF32)."
    ),
    "dtype": "float32",
    # C_IN * 9 terms with the default init: |y| ~ 0.6, fp32 reordering errors ~1e-6, inside the
    # default atol = rtol = 1e-4; TF32 (~3e-4) fails.
    "flops": "2*BATCH*C_OUT*((HEIGHT-1)//2+1)*((WIDTH-1)//2+1)*C_IN*9",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 13, "WIDTH": 18},
        {"BATCH": 3, "C_IN": 64, "C_OUT": 65, "HEIGHT": 57, "WIDTH": 31},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
