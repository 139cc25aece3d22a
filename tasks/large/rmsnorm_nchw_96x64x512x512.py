"""RMS normalisation over the channels of a float32 (96, 64, 512, 512) tensor (6 GiB), as KernelBench's RMSNorm."""

import torch
import torch.nn as nn

B = 96
C = 64
H = 512
W = 512

OPTIML = {
    "description": (
        "x / sqrt(mean(x**2 over dim 1, the C channels) + 1e-5) for a float32 (B, C, H, W) tensor"
        " (6 GiB at the file's size): a norm whose reduction is strided (H*W apart)."
    ),
    "dtype": "float32",
    # square, sum, then a divide per element: ~3 floating-point operations per element.
    "flops": "3*B*C*H*W",
    "shape_sets": [{"B": 3, "C": 7, "H": 33, "W": 17}],
}


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(B, C, H, W)]


def get_init_inputs() -> list:
    return [C]
