"""Conv2d + BatchNorm2d (eval) + ReLU in float32: the inference form of a ResNet block's first half."""

import torch
import torch.nn as nn

BATCH = 16
C_IN = 128
C_OUT = 128
HEIGHT = 56
WIDTH = 56

OPTIML = {
    "description": (
        "torch.relu(nn.BatchNorm2d(C_OUT).eval()(nn.Conv2d(C_IN, C_OUT, 3, padding=1, bias=False)(x))) of a"
        " float32 NCHW input: the running statistics and affine parameters are inputs, so the normalisation"
        " fuses into the convolution's store; exact fp32."
    ),
    "dtype": "float32",
    # Conv outputs ~0.6 with fp32 reordering errors ~1e-6; the eval norm divides by sqrt(running_var
    # + eps) = ~1 (fresh statistics: mean 0, var 1), so errors stay ~1e-6, inside the default
    # atol = rtol = 1e-4, while TF32 (~3e-4) fails.
    "flops": "2*BATCH*C_OUT*HEIGHT*WIDTH*C_IN*9 + 5*BATCH*C_OUT*HEIGHT*WIDTH",
    "shape_sets": [
        {"BATCH": 2, "C_IN": 5, "C_OUT": 7, "HEIGHT": 13, "WIDTH": 17},
        {"BATCH": 3, "C_IN": 32, "C_OUT": 65, "HEIGHT": 29, "WIDTH": 31},
    ],
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.bn.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C_IN, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [C_IN, C_OUT]
