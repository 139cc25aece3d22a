"""Row L2 normalization over long rows of odd length: x / x.norm(p=2, dim=1, keepdim=True) of a float32 matrix
whose rows (65 535 elements, 256 KB) start off 16-byte boundaries (KernelBench's 38/39 L1/L2Norm class)."""

import torch
import torch.nn as nn

M = 3000
N = 65535

OPTIML = {
    "description": (
        "Each row of a float32 M x N matrix with long rows of odd length divided by its Euclidean norm"
        " (x / ||x||_2 over dim 1, no eps), same-shape output."
    ),
    "dtype": "float32",
    # Tightened atol: outputs have std 1/sqrt(N) (~4e-3), so the default atol=1e-4 would accept errors of a few
    # percent. A sum of squares of positive terms is well conditioned (relative error ~1e-6 in any order).
    "atol": 1e-6,
    "rtol": 1e-4,
    # square and sum (2), divide (1): ~3 floating-point operations per element.
    "flops": "3*M*N",
    "shape_sets": [{"M": 100, "N": 65537}, {"M": 5, "N": 200001}, {"M": 4096, "N": 4095}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
