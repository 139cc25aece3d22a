"""Group normalization: nn.GroupNorm with affine parameters on a float32 NCHW batch."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
GROUPS = 8
HEIGHT = 256
WIDTH = 256

OPTIML = {
    "description": (
        "nn.GroupNorm (GROUPS groups of CHANNELS/GROUPS channels, eps=1e-5, biased variance) of a float32"
        " [BATCH, CHANNELS, HEIGHT, WIDTH] tensor, then the per-channel affine weight * x_hat + bias."
    ),
    "dtype": "float32",
    # mean (1), variance (3), normalise and affine (4): ~8 floating-point operations per element.
    "flops": "8*BATCH*CHANNELS*HEIGHT*WIDTH",
    "shape_sets": [
        # GROUPS stays 8: the group count is a constructor argument the kernel ABI does not carry,
        # so one kernel cannot serve shape sets that change it.
        {"BATCH": 2, "CHANNELS": 24, "HEIGHT": 33, "WIDTH": 47},
        {"BATCH": 1, "CHANNELS": 8, "HEIGHT": 317, "WIDTH": 319},
        {"BATCH": 256, "CHANNELS": 64, "HEIGHT": 3, "WIDTH": 5},
    ],
}


class Model(nn.Module):
    def __init__(self, groups: int, channels: int) -> None:
        super().__init__()
        # eps is part of the op (the ABI passes tensors, not hyperparameters).
        self.gn = nn.GroupNorm(groups, channels, eps=1e-5, affine=True)
        # Non-trivial affine parameters (not ones/zeros), fixed by their own generator so they do not
        # depend on the harness seed. Created on the CPU explicitly so a CUDA default device works.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        with torch.no_grad():
            self.gn.weight.copy_(1.0 + 0.5 * torch.randn(channels, generator=gen, device="cpu"))
            self.gn.bias.copy_(0.5 * torch.randn(channels, generator=gen, device="cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [GROUPS, CHANNELS]
