"""Middle-dimension prefix sum: torch.cumsum(x, dim=1) of a float32 [B, L, D] tensor (strided scan)."""

import torch
import torch.nn as nn

B = 16
L = 4096
D = 1024

OPTIML = {
    "description": (
        "Inclusive prefix sum along dimension 1 (size L, the middle one, stride D) of a float32 [B, L, D]"
        " tensor, same-shape output."
    ),
    "dtype": "float32",
    # Loosened atol: running sums of L=4096 values of std 1 reach magnitudes ~100 (~1000 at
    # L=100003) and pass through zero often, so rtol does not help there. A sequential fp32 scan
    # differs from a blocked/tree scan by up to ~4e-3 at L=100003 (simulated); 1e-2 is far below
    # the size of any single dropped or doubled element.
    "atol": 1e-2,
    "rtol": 1e-4,
    "flops": "B*L*D",
    "shape_sets": [{"B": 3, "L": 1001, "D": 1023}, {"B": 1, "L": 100003, "D": 3}, {"B": 64, "L": 37, "D": 1024}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(B, L, D)]


def get_init_inputs() -> list:
    return []
