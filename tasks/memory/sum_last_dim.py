"""Last-dimension sum of a 3-D tensor: torch.sum(x, dim=-1) of a float32 [BATCH, ROWS, N] tensor."""

import torch
import torch.nn as nn

BATCH = 16
ROWS = 2048
N = 4096

OPTIML = {
    "description": "Sum over the last dimension (size N) of a float32 [BATCH, ROWS, N] tensor, giving [BATCH, ROWS].",
    "dtype": "float32",
    # Loosened atol: a sum of N=4096 values of std 1 has std ~64 (~316 at N=100003), and an fp32
    # sequential accumulation drifts by up to ~4e-3 from a tree reduction at N=100003; a near-zero
    # sum gets no help from rtol. 1e-2 is far below the size of any single dropped or doubled element.
    "atol": 1e-2,
    "rtol": 1e-4,
    "flops": "BATCH*ROWS*N",
    "shape_sets": [
        {"BATCH": 1, "ROWS": 1000, "N": 3001},
        {"BATCH": 1, "ROWS": 3, "N": 100003},
        {"BATCH": 64, "ROWS": 1024, "N": 37},
    ],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, ROWS, N)]


def get_init_inputs() -> list:
    return []
