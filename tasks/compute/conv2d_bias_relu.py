"""Conv2d + bias + ReLU in float32: torch.relu(nn.Conv2d(C_IN, C_OUT, 3, padding=1)(x))."""

import torch
import torch.nn as nn

BATCH = 16
C_IN = 128
C_OUT = 256
HEIGHT = 64
WIDTH = 64

OPTIML = {
    "description": (
        "torch.relu(nn.Conv2d(C_IN, C_OUT, 3, padding=1)(x)) of a float32 NCHW input: an implicit-GEMM"
        " convolution with the bias and ReLU fused into its store, exact fp32 (no TF32)."
    ),
    "dtype": "float32",
    # Each output sums C_IN * 9 products of N(0, 1) inputs and weights of ~1/sqrt(3 * C_IN * 9) (the
    # default init): |y| ~ 0.6 and fp32 reordering moves it by ~1e-6, far inside the default
    # atol = rtol = 1e-4, while TF32 (errors ~3e-4; PyTorch's default for convolutions) fails.
    "flops": "2*BATCH*C_OUT*HEIGHT*WIDTH*C_IN*9 + 2*BATCH*C_OUT*HEIGHT*WIDTH",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 13, "WIDTH": 17},
        {"BATCH": 3, "C_IN": 64, "C_OUT": 96, "HEIGHT": 31, "WIDTH": 33},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
