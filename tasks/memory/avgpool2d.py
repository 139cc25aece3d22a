"""2-D average pooling: nn.AvgPool2d(kernel 3, stride 1, padding 1), same-size output, on a float32 NCHW batch."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256
KERNEL_SIZE = 3
STRIDE = 1
PADDING = 1

OPTIML = {
    "description": (
        "nn.AvgPool2d (square window KERNEL_SIZE, stride STRIDE, zero padding PADDING counted in the divisor,"
        " floor mode) of a float32 [BATCH, CHANNELS, HEIGHT, WIDTH] tensor."
    ),
    "dtype": "float32",
    # one add per window element per output (the divide is per output).
    "flops": (
        "BATCH*CHANNELS*((HEIGHT+2*PADDING-KERNEL_SIZE)//STRIDE+1)*((WIDTH+2*PADDING-KERNEL_SIZE)//STRIDE+1)"
        "*KERNEL_SIZE*KERNEL_SIZE"
    ),
    "shape_sets": [
        {"BATCH": 3, "CHANNELS": 5, "HEIGHT": 33, "WIDTH": 1001},
        {"BATCH": 1, "CHANNELS": 3, "HEIGHT": 3, "WIDTH": 100003},
        {"BATCH": 64, "CHANNELS": 256, "HEIGHT": 7, "WIDTH": 9},
    ],
}


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size, stride=stride, padding=padding, count_include_pad=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [KERNEL_SIZE, STRIDE, PADDING]
