"""A 3x3 convolution, 16 to 128 channels, over a float32 (16, 16, 1024, 1024) input: an 8 GiB output."""

import torch
import torch.nn as nn

BATCH = 16
IN_CHANNELS = 16
OUT_CHANNELS = 128
SIZE = 1024

OPTIML = {
    "description": (
        "nn.Conv2d(16 -> 128 channels, 3x3, stride 1, no padding, no bias) over a float32"
        " (BATCH, 16, SIZE, SIZE) input; exact fp32 (no TF32)."
    ),
    "dtype": "float32",
    "flops": "2*BATCH*OUT_CHANNELS*(SIZE-2)*(SIZE-2)*IN_CHANNELS*9",
    "shape_sets": [{"BATCH": 2, "SIZE": 37}],
}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs() -> list:
    return [IN_CHANNELS, OUT_CHANNELS, 3]
