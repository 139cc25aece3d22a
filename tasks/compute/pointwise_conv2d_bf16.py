"""Pointwise (1x1) convolution in bfloat16: nn.Conv2d(C_IN, C_OUT, 1), a channel-mixing GEMM."""

import torch
import torch.nn as nn

BATCH = 32
C_IN = 256
C_OUT = 512
HEIGHT = 56
WIDTH = 56

OPTIML = {
    "description": (
        "nn.Conv2d(C_IN, C_OUT, 1) with bias of a bfloat16 NCHW input: a GEMM of the [C_OUT, C_IN] weight"
        " against each image's [C_IN, HEIGHT * WIDTH] pixels, fp32 accumulation."
    ),
    "dtype": "bfloat16",
    # fp32 accumulation rounded once to bf16 in the reference and a kernel alike: at most ~1 bf16 ulp
    # (<= 7.8e-3 relative) apart on values ~0.6; the bf16 default atol = rtol = 2e-2.
    "flops": "2*BATCH*C_OUT*HEIGHT*WIDTH*C_IN",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 13, "WIDTH": 17},
        {"BATCH": 3, "C_IN": 64, "C_OUT": 65, "HEIGHT": 29, "WIDTH": 31},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
