"""Row logsumexp: torch.logsumexp over the last dimension of a float32 matrix."""

import torch
import torch.nn as nn

M = 8192
N = 16384

OPTIML = {
    "description": "log(sum(exp(x))) over the last dimension of a float32 M x N matrix, giving M values.",
    "dtype": "float32",
    # Default tolerances: outputs are about log(N) + 0.5 (~10), so rtol=1e-4 allows ~1e-3, far above
    # the fp32 error of a max-shifted sum of exponentials (~1e-6).
    # max, subtract, exp and sum: ~4 floating-point operations per element.
    "flops": "4*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
