"""Depthwise-separable convolution in float16: a 3x3 depthwise conv, then a 1x1 pointwise conv (MobileNet)."""

import torch
import torch.nn as nn

BATCH = 32
C_IN = 128
C_OUT = 256
HEIGHT = 56
WIDTH = 56

OPTIML = {
    "description": (
        "nn.Conv2d(C_IN, C_IN, 3, padding=1, groups=C_IN) then nn.Conv2d(C_IN, C_OUT, 1), both with bias,"
        " of a float16 NCHW input: a direct depthwise kernel, then a pointwise GEMM; fp32 accumulation."
    ),
    "dtype": "float16",
    # The depthwise output is rounded to fp16 between the two convolutions, in the reference and in
    # a two-kernel plan alike; each conv accumulates in fp32 and rounds once: ~1 fp16 ulp (1e-3
    # relative) per stage on values ~0.6, inside the fp16 default atol = rtol = 1e-2.
    "flops": "2*BATCH*C_IN*HEIGHT*WIDTH*9 + 2*BATCH*C_OUT*HEIGHT*WIDTH*C_IN",
    # C_IN is the depthwise group count (a constant of the op).
    "shape_sets": [
        {"BATCH": 2, "C_OUT": 7, "HEIGHT": 13, "WIDTH": 17},
        {"BATCH": 3, "C_OUT": 65, "HEIGHT": 29, "WIDTH": 31},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in)
        self.pointwise = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
