"""Training-mode batch normalization: F.batch_norm with batch statistics on a float32 NCHW batch."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256

OPTIML = {
    "description": (
        "Training-mode 2-D batch norm of a float32 [BATCH, CHANNELS, HEIGHT, WIDTH] tensor: each channel"
        " normalised by the mean and biased variance of its BATCH*HEIGHT*WIDTH values (eps=1e-5), then the"
        " per-channel affine weight * x_hat + bias; no running statistics."
    ),
    "dtype": "float32",
    # mean (1), variance (3), normalise and affine (4): ~8 floating-point operations per element.
    "flops": "8*BATCH*CHANNELS*HEIGHT*WIDTH",
    "shape_sets": [
        {"BATCH": 3, "CHANNELS": 5, "HEIGHT": 33, "WIDTH": 47},
        {"BATCH": 2, "CHANNELS": 3, "HEIGHT": 317, "WIDTH": 319},
        {"BATCH": 2, "CHANNELS": 4096, "HEIGHT": 3, "WIDTH": 3},
    ],
}


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        # F.batch_norm(training=True) with no running buffers normalises by batch statistics in either
        # mode (OPTIML['mode']), and the kernel's arguments are only x and the affine parameters.
        # eps is part of the op (the ABI passes tensors, not hyperparameters).
        self.eps = 1e-5
        # Non-trivial affine parameters (not ones/zeros), fixed by their own generator so they do not
        # depend on the harness seed. Created on the CPU explicitly so a CUDA default device works.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels, generator=gen, device="cpu"))
        self.bias = nn.Parameter(0.5 * torch.randn(channels, generator=gen, device="cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, self.weight, self.bias, training=True, momentum=0.0, eps=self.eps)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [CHANNELS]
