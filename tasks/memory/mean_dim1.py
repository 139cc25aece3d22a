"""Middle-dimension mean: torch.mean(x, dim=1) of a float32 [B, D, N] tensor (strided reduction)."""

import torch
import torch.nn as nn

B = 16
D = 4096
N = 2048

OPTIML = {
    "description": (
        "Mean over dimension 1 (size D, the middle one, stride N) of a float32 [B, D, N] tensor, giving [B, N]."
    ),
    "dtype": "float32",
    # Default tolerances: a mean of D values of std 1 has std 1/sqrt(D) and fp32 rounding of the
    # sum moves it by ~1e-7 relative, far inside atol=rtol=1e-4.
    # one add per element (the final divide is per output).
    "flops": "B*D*N",
    "shape_sets": [{"B": 5, "D": 1023, "N": 3001}, {"B": 3, "D": 100003, "N": 5}, {"B": 64, "D": 37, "N": 1024}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, D, N)]


def get_init_inputs() -> list:
    return []
