"""Transposed 2-D convolution in float32: nn.ConvTranspose2d(C_IN, C_OUT, 4, stride=2, padding=1), a 2x upsampler."""

import torch
import torch.nn as nn

BATCH = 16
C_IN = 128
C_OUT = 64
HEIGHT = 64
WIDTH = 64

OPTIML = {
    "description": (
        "nn.ConvTranspose2d(C_IN, C_OUT, 4, stride=2, padding=1) with bias of a float32 NCHW input (a decoder's"
        " 2x upsampling), exact fp32."
    ),
    "dtype": "float32",
    # Each output gathers C_IN * 4 products (2 of the 4 taps per axis at stride 2), weights ~1/sqrt(3 *
    # C_OUT * 16) by the default init: |y| ~ 0.4, fp32 reordering errors ~1e-7, inside the default
    # atol = rtol = 1e-4; TF32 (errors ~ sqrt(C_IN * 4) * 2^-11 * |x w| ~ 2e-4) fails.
    "flops": "2*BATCH*C_IN*HEIGHT*WIDTH*C_OUT*16",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 9, "WIDTH": 13},
        {"BATCH": 3, "C_IN": 32, "C_OUT": 33, "HEIGHT": 29, "WIDTH": 1},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.deconv = nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
