"""Instance normalization: nn.InstanceNorm2d (no affine, no running stats) on a float32 NCHW batch."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256

OPTIML = {
    "description": (
        "nn.InstanceNorm2d (affine=False, eps=1e-5, biased variance) of a float32 [BATCH, CHANNELS, HEIGHT,"
        " WIDTH] tensor: each (sample, channel) plane of HEIGHT*WIDTH values normalised by its own statistics."
    ),
    "dtype": "float32",
    # mean (1), variance (3), subtract and scale (2): ~6 floating-point operations per element.
    "flops": "6*BATCH*CHANNELS*HEIGHT*WIDTH",
    "shape_sets": [
        {"BATCH": 3, "CHANNELS": 5, "HEIGHT": 33, "WIDTH": 1001},
        {"BATCH": 1, "CHANNELS": 3, "HEIGHT": 317, "WIDTH": 319},
        {"BATCH": 64, "CHANNELS": 1024, "HEIGHT": 3, "WIDTH": 5},
    ],
}


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        # eps is part of the op (the ABI passes tensors, not hyperparameters). No running statistics:
        # the instance statistics are used in eval() too, and there are no parameters.
        self.norm = nn.InstanceNorm2d(channels, eps=1e-5, affine=False, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [CHANNELS]
