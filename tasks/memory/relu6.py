"""ReLU6 / hardtanh clamp: F.hardtanh(x, 0, 6) of a float32 matrix (elementwise)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": "Elementwise ReLU6, min(max(x, 0), 6) (F.hardtanh with bounds 0 and 6), of a float32 M x N matrix.",
    "dtype": "float32",
    # two comparisons per element.
    "flops": "2*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, min_val=0.0, max_val=6.0)


def get_inputs() -> list[torch.Tensor]:
    # std 4, so about 13% of the elements lie above 6 and both bounds of the clamp are exercised.
    return [4.0 * torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
