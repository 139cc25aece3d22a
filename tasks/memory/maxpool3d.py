"""3-D max pooling: nn.MaxPool3d(kernel 3, stride 2, padding 1) on a float32 NCDHW batch."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 32
DEPTH = 64
HEIGHT = 64
WIDTH = 64
KERNEL_SIZE = 3
STRIDE = 2
PADDING = 1

OPTIML = {
    "description": (
        "nn.MaxPool3d (cubic window KERNEL_SIZE, stride STRIDE, padding PADDING with -inf, floor mode) of a"
        " float32 [BATCH, CHANNELS, DEPTH, HEIGHT, WIDTH] tensor."
    ),
    "dtype": "float32",
    # one comparison per window element per output; the result is an input element, so it is exact.
    "flops": (
        "BATCH*CHANNELS*((DEPTH+2*PADDING-KERNEL_SIZE)//STRIDE+1)*((HEIGHT+2*PADDING-KERNEL_SIZE)//STRIDE+1)"
        "*((WIDTH+2*PADDING-KERNEL_SIZE)//STRIDE+1)*KERNEL_SIZE**3"
    ),
    "shape_sets": [
        {"BATCH": 2, "CHANNELS": 3, "DEPTH": 17, "HEIGHT": 33, "WIDTH": 47},
        {"BATCH": 1, "CHANNELS": 2, "DEPTH": 3, "HEIGHT": 5, "WIDTH": 100003},
        {"BATCH": 64, "CHANNELS": 256, "DEPTH": 3, "HEIGHT": 5, "WIDTH": 7},
    ],
}


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int) -> None:
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [KERNEL_SIZE, STRIDE, PADDING]
