"""2-D convolution: nn.Conv2d with bias, 3x3 kernel, padding 1, stride 1, on a float32 NCHW batch."""

import torch
import torch.nn as nn

BATCH = 8
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 128
WIDTH = 128
KERNEL_SIZE = 3
PADDING = 1

OPTIML = {
    "description": (
        "nn.Conv2d (bias, square kernel KERNEL_SIZE, padding PADDING, stride 1, no dilation, one"
        " group) of a float32 NCHW input, fp32 accumulation (no TF32)."
    ),
    "dtype": "float32",
    # Default tolerances: each output sums IN_CHANNELS*9 = 576 products of magnitude ~0.02, so fp32
    # reassociation moves it by ~1e-6, far inside atol=1e-4, while TF32 (errors ~1e-3) still fails.
    "flops": (
        "2*BATCH*OUT_CHANNELS*(HEIGHT+2*PADDING-KERNEL_SIZE+1)*(WIDTH+2*PADDING-KERNEL_SIZE+1)"
        "*IN_CHANNELS*KERNEL_SIZE*KERNEL_SIZE"
    ),
    "shape_sets": [
        {"BATCH": 2, "IN_CHANNELS": 5, "OUT_CHANNELS": 7, "HEIGHT": 33, "WIDTH": 47},
        {"BATCH": 1, "IN_CHANNELS": 3, "OUT_CHANNELS": 19, "HEIGHT": 1, "WIDTH": 131},
    ],
}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int) -> None:
        super().__init__()
        # Default (seeded by the harness) init; parameters reach the kernel as weight then bias.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, PADDING]
