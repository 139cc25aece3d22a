"""Depthwise 2-D convolution in float32: nn.Conv2d(C, C, 3, padding=1, groups=C), a MobileNet layer."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 256
HEIGHT = 112
WIDTH = 112

OPTIML = {
    "description": (
        "Depthwise nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, groups=CHANNELS) with bias of a float32 NCHW"
        " input (9 terms per output: bandwidth-bound), exact fp32."
    ),
    "dtype": "float32",
    # 9 terms per output with the default init (|w| ~ 1/3): |y| ~ 0.6; reordering moves it by ~1e-7,
    # inside the default atol = rtol = 1e-4, while TF32 (inputs rounded to 10 bits: ~3 * 2^-11 * |x w|
    # ~ 3e-4) fails.
    "flops": "2*BATCH*CHANNELS*HEIGHT*WIDTH*9",
    # CHANNELS is the group count (a constant of the op): the shape sets change the other sizes only.
    "shape_sets": [{"BATCH": 2, "HEIGHT": 13, "WIDTH": 17}, {"BATCH": 3, "HEIGHT": 57, "WIDTH": 1}],
}


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [CHANNELS]
