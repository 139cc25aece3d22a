"""Small-batch linear layer in float32: nn.Linear(8192, 8192) on 8 rows (decode-like, tall-skinny)."""

import torch
import torch.nn as nn

BATCH = 8
IN_FEATURES = 8192
OUT_FEATURES = 8192

OPTIML = {
    "description": (
        "nn.Linear(IN_FEATURES, OUT_FEATURES) with bias on a float32 [BATCH, IN_FEATURES] input with few rows:"
        " a skinny product that streams the weight once (GEMV-like), exact fp32."
    ),
    "dtype": "float32",
    # nn.Linear's init (U(-1/sqrt(K), 1/sqrt(K))): |y| ~ 0.6 whatever K, and fp32 reordering of the
    # K-term sum moves it by ~sqrt(K) * eps * |x w| ~ 1e-6, far inside the default atol = rtol = 1e-4;
    # TF32 (~ sqrt(K) * 2^-11 * |x w| ~ 4e-4) fails.
    "flops": "2*BATCH*IN_FEATURES*OUT_FEATURES",
    "shape_sets": [
        {"BATCH": 3, "IN_FEATURES": 1001, "OUT_FEATURES": 77},
        {"BATCH": 1, "IN_FEATURES": 4099, "OUT_FEATURES": 1031},
        {"BATCH": 16, "IN_FEATURES": 29, "OUT_FEATURES": 4097},
    ],
}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs() -> list:
    return [IN_FEATURES, OUT_FEATURES]
