"""Strided depthwise 2-D convolution in float32: nn.Conv2d(C, C, 5, stride=2, padding=2, groups=C), no bias."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 192
HEIGHT = 160
WIDTH = 160

OPTIML = {
    "description": (
        "Depthwise nn.Conv2d(CHANNELS, CHANNELS, 5, stride=2, padding=2, groups=CHANNELS, bias=False) of a"
        " float32 NCHW input (25 terms per output, the input read once: bandwidth-bound), exact fp32."
    ),
    "dtype": "float32",
    # 25 terms per output with the default init (|w| ~ 1/5): |y| ~ 0.6; reordering moves it by ~1e-7,
    # inside the default atol = rtol = 1e-4, while TF32 (inputs rounded to 10 bits: ~5 * 2^-11 * |x w|
    # ~ 5e-4) fails.
    "flops": "2*BATCH*CHANNELS*((HEIGHT+1)//2)*((WIDTH+1)//2)*25",
    # CHANNELS is the group count (a constant of the op): the shape sets change the other sizes only.
    "shape_sets": [{"BATCH": 2, "HEIGHT": 13, "WIDTH": 18}, {"BATCH": 3, "HEIGHT": 5, "WIDTH": 71}],
}


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 5, stride=2, padding=2, groups=channels, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [CHANNELS]
