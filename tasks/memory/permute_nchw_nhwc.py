"""Layout change NCHW -> NHWC: x.permute(0, 2, 3, 1).contiguous() of a float32 4-D tensor."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256

OPTIML = {
    "description": (
        "Permutation of a float32 [BATCH, CHANNELS, HEIGHT, WIDTH] (NCHW) tensor into a contiguous"
        " [BATCH, HEIGHT, WIDTH, CHANNELS] (NHWC) tensor."
    ),
    "dtype": "float32",
    "flops": "0",
    "shape_sets": [
        {"BATCH": 3, "CHANNELS": 5, "HEIGHT": 33, "WIDTH": 1001},
        {"BATCH": 1, "CHANNELS": 3, "HEIGHT": 3, "WIDTH": 100003},
        {"BATCH": 64, "CHANNELS": 1024, "HEIGHT": 3, "WIDTH": 5},
    ],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1).contiguous()


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return []
