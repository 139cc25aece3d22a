"""Triplet margin loss: F.triplet_margin_loss(anchor, positive, negative, margin=1.0) of embedding batches."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 65536
DIM = 1024

OPTIML = {
    "description": (
        "Mean over BATCH rows of max(||a - p + 1e-6||_2 - ||a - n + 1e-6||_2 + 1, 0) for float32 BATCH x DIM"
        " anchor, positive and negative embeddings (F.triplet_margin_loss, margin=1, p=2); 0-dim float32 output."
    ),
    "dtype": "float32",
    # Loosened atol: each distance is ~sqrt(2*DIM) (~45; ~450 at DIM=100003) and the loss is a
    # difference of two of them. A sum of DIM squares carries ~sqrt(DIM)*6e-8 relative error in a
    # sequential fp32 loop, so at DIM=100003 simulated one-thread-per-row kernels land ~1.4e-3 from
    # the exact loss and PyTorch's CPU reference ~2.4e-4 (means over 3 rows do not average it away).
    # atol=1e-2 keeps a margin there; the loss is ~1.1, and wrong margins, norms or a missing sqrt
    # move it by far more.
    "atol": 1e-2,
    "rtol": 1e-4,
    # two differences plus eps (4), two squared norms (4) per element: ~8 floating-point operations.
    "flops": "8*BATCH*DIM",
    "shape_sets": [{"BATCH": 1000, "DIM": 3001}, {"BATCH": 3, "DIM": 100003}, {"BATCH": 65536, "DIM": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, DIM), torch.randn(BATCH, DIM), torch.randn(BATCH, DIM)]


def get_init_inputs() -> list:
    return []
