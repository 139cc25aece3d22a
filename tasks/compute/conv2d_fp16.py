"""2-D convolution in float16: nn.Conv2d(C_IN, C_OUT, 3, padding=1) on tensor cores."""

import torch
import torch.nn as nn

BATCH = 32
C_IN = 128
C_OUT = 128
HEIGHT = 56
WIDTH = 56

OPTIML = {
    "description": (
        "nn.Conv2d(C_IN, C_OUT, 3, padding=1) with bias of a float16 NCHW input: a tensor-core implicit GEMM,"
        " fp32 accumulation, float16 output."
    ),
    "dtype": "float16",
    # fp32 accumulation rounded once to fp16 in the reference and a kernel alike: ~1 fp16 ulp (1e-3
    # relative) apart on values ~0.6, inside the fp16 default atol = rtol = 1e-2.
    "flops": "2*BATCH*C_OUT*HEIGHT*WIDTH*C_IN*9",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 13, "WIDTH": 17},
        {"BATCH": 3, "C_IN": 64, "C_OUT": 65, "HEIGHT": 29, "WIDTH": 31},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
