"""1-D max pooling: nn.MaxPool1d(kernel 4, stride 2, padding 2, dilation 3) on a float32 [N, C, L] batch."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 128
LENGTH = 65536
KERNEL_SIZE = 4
STRIDE = 2
PADDING = 2
DILATION = 3

OPTIML = {
    "description": (
        "nn.MaxPool1d (window KERNEL_SIZE, stride STRIDE, padding PADDING with -inf, dilation DILATION, floor"
        " mode) of a float32 [BATCH, CHANNELS, LENGTH] tensor."
    ),
    "dtype": "float32",
    # one comparison per window element per output; the result is an input element, so it is exact.
    "flops": "BATCH*CHANNELS*((LENGTH+2*PADDING-DILATION*(KERNEL_SIZE-1)-1)//STRIDE+1)*KERNEL_SIZE",
    "shape_sets": [
        {"BATCH": 3, "CHANNELS": 5, "LENGTH": 3001},
        {"BATCH": 1, "CHANNELS": 3, "LENGTH": 100003},
        {"BATCH": 64, "CHANNELS": 1024, "LENGTH": 37},
    ],
}


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int) -> None:
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size, stride=stride, padding=padding, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs() -> list:
    return [KERNEL_SIZE, STRIDE, PADDING, DILATION]
