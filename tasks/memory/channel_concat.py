"""Channel concatenation: torch.cat([x, relu(y)], dim=1) of two float32 NCHW feature maps."""

import torch
import torch.nn as nn

BATCH = 64
C1 = 256
C2 = 128
HEIGHT = 56
WIDTH = 56

OPTIML = {
    "description": (
        "Concatenation along the channel dim of a float32 [BATCH, C1, HEIGHT, WIDTH] tensor and the ReLU of a"
        " [BATCH, C2, HEIGHT, WIDTH] tensor (a DenseNet / Inception join)."
    ),
    "dtype": "float32",
    "flops": "BATCH * C2 * HEIGHT * WIDTH",
    "shape_sets": [
        {"BATCH": 3, "C1": 5, "C2": 7, "HEIGHT": 33, "WIDTH": 17},
        {"BATCH": 1, "C1": 1, "C2": 2, "HEIGHT": 3, "WIDTH": 100003},
        {"BATCH": 64, "C1": 256, "C2": 32, "HEIGHT": 7, "WIDTH": 7},
    ],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.relu(y)], dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, C1, HEIGHT, WIDTH), torch.randn(BATCH, C2, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return []
