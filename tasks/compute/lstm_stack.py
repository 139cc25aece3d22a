"""A 6-layer LSTM over 512 steps in float32, returning the last hidden states h_n."""

import torch
import torch.nn as nn

BATCH = 10
STEPS = 512
FEATURES = 128
HIDDEN = 256
LAYERS = 6

OPTIML = {
    "description": (
        "nn.LSTM(FEATURES, HIDDEN, LAYERS, batch_first=True) over a float32 [BATCH, STEPS, FEATURES] sequence"
        " with given h0 and c0 (KernelBench level 3's LSTM sizes), returning h_n [LAYERS, BATCH, HIDDEN]:"
        " the steps of a layer run in order, so latency per step decides the time, exact fp32."
    ),
    "dtype": "float32",
    # the gates are sums of FEATURES + HIDDEN products carried through 512 steps and 6 layers: TF32
    # products (~3e-4 relative) fail atol = rtol = 1e-4, so the kernel computes in exact fp32.
    "flops": "8*LAYERS*STEPS*BATCH*HIDDEN*(FEATURES+HIDDEN)",
    "shape_sets": [
        {"BATCH": 3, "STEPS": 9, "FEATURES": 5, "HIDDEN": 7, "LAYERS": 6},
        {"BATCH": 1, "STEPS": 33, "FEATURES": 40, "HIDDEN": 31, "LAYERS": 6},
    ],
}


class Model(nn.Module):
    def __init__(self, features: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
        _, (h_n, _) = self.lstm(x, (h0, c0))
        return h_n


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(BATCH, STEPS, FEATURES), torch.rand(LAYERS, BATCH, HIDDEN), torch.rand(LAYERS, BATCH, HIDDEN)]


def get_init_inputs() -> list:
    return [FEATURES, HIDDEN, LAYERS]
