"""3-D convolution with few input channels in float32: nn.Conv3d(3, 64, (3, 3, 1)) over a volume."""

import torch
import torch.nn as nn

BATCH = 16
C_IN = 3
C_OUT = 64
HEIGHT = 128
WIDTH = 128
DEPTH = 10

OPTIML = {
    "description": (
        "nn.Conv3d(C_IN, C_OUT, (3, 3, 1)) without padding of a float32 [BATCH, C_IN, HEIGHT, WIDTH, DEPTH] input"
        " (KernelBench level 1's asymmetric 3-D convolution shape): 27 terms an output, so the input is"
        " re-read C_OUT times and the kernel choice decides the time, exact fp32."
    ),
    "dtype": "float32",
    # 27 terms of |x| ~ 1 and default-init weights: |y| ~ 0.5; TF32 inputs (10-bit mantissa) err ~3e-4,
    # over the default atol = rtol = 1e-4, so the kernel computes in exact fp32.
    "flops": "2*BATCH*C_OUT*(HEIGHT-2)*(WIDTH-2)*DEPTH*C_IN*9",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 3, "C_OUT": 5, "HEIGHT": 9, "WIDTH": 7, "DEPTH": 3},
        {"BATCH": 1, "C_IN": 3, "C_OUT": 17, "HEIGHT": 33, "WIDTH": 20, "DEPTH": 5},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv3d(c_in, c_out, (3, 3, 1), bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH, DEPTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
