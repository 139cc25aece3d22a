"""Row L2 normalization: x / x.norm(p=2, dim=1, keepdim=True) of a float32 matrix."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "Each row of a float32 M x N matrix divided by its Euclidean norm (x / ||x||_2 over dim 1, no eps),"
        " same-shape output."
    ),
    "dtype": "float32",
    # Tightened atol: outputs have std 1/sqrt(N) (~1e-2, ~3e-3 at N=100003), so the default atol=1e-4
    # would accept errors of a few percent. A sum of squares of positive terms is well conditioned
    # (relative error ~1e-6 in any order), well inside rtol=1e-4.
    "atol": 1e-6,
    "rtol": 1e-4,
    # square and sum (2), divide (1): ~3 floating-point operations per element.
    "flops": "3*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(p=2, dim=1, keepdim=True)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
