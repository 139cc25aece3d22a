"""A bidirectional 6-layer GRU over 512 steps in float32 (sequence-first), returning the output sequence."""

import torch
import torch.nn as nn

BATCH = 10
STEPS = 512
FEATURES = 128
HIDDEN = 256
LAYERS = 6

OPTIML = {
    "description": (
        "nn.GRU(FEATURES, HIDDEN, LAYERS, bidirectional=True) over a float32 [STEPS, BATCH, FEATURES] sequence"
        " with a given h0 (KernelBench level 3's GRU sizes), returning the output [STEPS, BATCH, 2 * HIDDEN]:"
        " both directions of a layer step at once, exact fp32."
    ),
    "dtype": "float32",
    # as the LSTM: TF32 gate products (~3e-4 relative) through 512 steps fail atol = rtol = 1e-4: exact fp32.
    "flops": "12*LAYERS*STEPS*BATCH*HIDDEN*(2*HIDDEN+HIDDEN)",
    "shape_sets": [
        {"BATCH": 3, "STEPS": 9, "FEATURES": 5, "HIDDEN": 7, "LAYERS": 6},
        {"BATCH": 2, "STEPS": 20, "FEATURES": 33, "HIDDEN": 30, "LAYERS": 6},
    ],
}


class Model(nn.Module):
    def __init__(self, features: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.gru = nn.GRU(features, hidden, layers, bidirectional=True)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        return self.gru(x, h0)[0]


def get_inputs() -> list[torch.Tensor]:
    return [torch.rand(STEPS, BATCH, FEATURES), torch.rand(2 * LAYERS, BATCH, HIDDEN)]


def get_init_inputs() -> list:
    return [FEATURES, HIDDEN, LAYERS]
