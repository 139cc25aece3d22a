"""KL divergence: F.kl_div(log(predictions), targets, reduction="batchmean") of two row-softmaxed matrices."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 8192
N = 8192

OPTIML = {
    "description": (
        "KL divergence sum(targets * (log(targets) - log(predictions))) / M of two float32 M x N matrices whose"
        " rows are probability distributions (F.kl_div, reduction='batchmean'); 0-dim float32 output."
    ),
    "dtype": "float32",
    # Default tolerances: the loss is ~1 (two softmaxes of independent std-1 rows), and each row's
    # sum of N terms of ~1e-4 is accurate to ~1e-6 relative in fp32, far inside rtol=1e-4.
    # log of each input (2), subtract, multiply, sum: ~5 floating-point operations per element.
    "flops": "5*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 3, "N": 100003}, {"M": 65536, "N": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs() -> list[torch.Tensor]:
    # Strictly positive rows summing to 1; only the native distribution keeps that structure.
    return [torch.randn(M, N).softmax(dim=-1), torch.randn(M, N).softmax(dim=-1)]


def get_init_inputs() -> list:
    return []
