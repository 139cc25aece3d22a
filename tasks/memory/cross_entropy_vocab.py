"""LLM-vocabulary cross-entropy: F.cross_entropy(logits, targets) over 32000 classes, mean reduction."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
VOCAB = 32000

OPTIML = {
    "description": (
        "Mean cross-entropy loss of float32 logits [BATCH, VOCAB] against int64 class targets [BATCH]"
        " (log-softmax per row, then mean negative log-likelihood); 0-dim float32 output."
    ),
    "dtype": "float32",
    # Default tolerances: the loss is ~log(VOCAB) + 0.5 ~ 11, so rtol=1e-4 allows ~1e-3, far above
    # the fp32 error of per-row logsumexp plus a mean over the rows (~1e-5).
    # max, subtract, exp and sum per logit: ~4 floating-point operations each.
    "flops": "4*BATCH*VOCAB",
    "shape_sets": [{"BATCH": 999, "VOCAB": 1023}, {"BATCH": 3, "VOCAB": 100003}, {"BATCH": 65536, "VOCAB": 37}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs() -> list[torch.Tensor]:
    # int64 targets keep their dtype (only floating inputs are cast).
    return [torch.randn(BATCH, VOCAB), torch.randint(0, VOCAB, (BATCH,))]


def get_init_inputs() -> list:
    return []
