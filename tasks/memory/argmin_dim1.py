"""Middle-dimension argmin: torch.argmin(x, dim=1) of a float32 [B, D, N] tensor, int64 indices."""

import torch
import torch.nn as nn

B = 32
D = 2048
N = 2048

OPTIML = {
    "description": (
        "Index of the minimum over dimension 1 (size D, the middle one, stride N) of a float32 [B, D, N]"
        " tensor, giving int64 indices of shape [B, N] (the first index on ties)."
    ),
    "dtype": "float32",
    # one comparison per element; the output is an exact integer index.
    "flops": "B*D*N",
    "shape_sets": [{"B": 5, "D": 1023, "N": 3001}, {"B": 3, "D": 100003, "N": 5}, {"B": 64, "D": 37, "N": 1024}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmin(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, D, N)]


def get_init_inputs() -> list:
    return []
