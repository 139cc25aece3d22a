"""Row argmax: torch.argmax(x, dim=-1) of a float32 matrix, int64 indices."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": (
        "Index of the maximum over the last dimension of a float32 M x N matrix, giving M int64 indices"
        " (the first index on ties)."
    ),
    "dtype": "float32",
    # one comparison per element; the output is an exact integer index.
    "flops": "M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
