"""3-D convolution in float32: nn.Conv3d(C_IN, C_OUT, 3, padding=1) over a video clip."""

import torch
import torch.nn as nn

BATCH = 4
C_IN = 64
C_OUT = 64
DEPTH = 16
HEIGHT = 56
WIDTH = 56

OPTIML = {
    "description": (
        "nn.Conv3d(C_IN, C_OUT, 3, padding=1) with bias of a float32 [BATCH, C_IN, DEPTH, HEIGHT, WIDTH] input,"
        " exact fp32."
    ),
    "dtype": "float32",
    # C_IN * 27 terms with the default init: |y| ~ 0.6, fp32 reordering errors ~1e-6, inside the
    # default atol = rtol = 1e-4; TF32 (~3e-4) fails.
    "flops": "2*BATCH*C_OUT*DEPTH*HEIGHT*WIDTH*C_IN*27",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 3, "C_OUT": 5, "DEPTH": 5, "HEIGHT": 7, "WIDTH": 9},
        {"BATCH": 1, "C_IN": 32, "C_OUT": 33, "DEPTH": 7, "HEIGHT": 15, "WIDTH": 17},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
