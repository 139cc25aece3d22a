"""Transposed 2-D convolution, strided, padded and dilated, in float32."""

import torch
import torch.nn as nn

BATCH = 16
C_IN = 32
C_OUT = 64
HEIGHT = 64
WIDTH = 128

OPTIML = {
    "description": (
        "nn.ConvTranspose2d(C_IN, C_OUT, 3, stride=5, padding=1, dilation=2) of a float32"
        " [BATCH, C_IN, HEIGHT, WIDTH] input (KernelBench level 1's dilated transposed convolution shape):"
        " most outputs receive no term at a stride this large, exact fp32."
    ),
    "dtype": "float32",
    # up to C_IN * 9 terms an output; TF32 inputs err ~3e-4 relative, over atol = rtol = 1e-4: exact fp32.
    "flops": "2*BATCH*C_IN*HEIGHT*WIDTH*C_OUT*9",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 3, "C_OUT": 5, "HEIGHT": 7, "WIDTH": 9},
        {"BATCH": 1, "C_IN": 17, "C_OUT": 6, "HEIGHT": 11, "WIDTH": 4},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose2d(c_in, c_out, 3, stride=5, padding=1, dilation=2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
