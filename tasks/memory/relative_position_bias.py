"""Swin-style relative position bias: a small learned table gathered by a constant index into a bias
added to attention scores, in float32."""

import torch
import torch.nn as nn

BATCH = 2048  # windows x images, as a Swin stage has them
HEADS = 16
WINDOW = 7

OPTIML = {
    "description": (
        "attn + table[index].view(N, N, HEADS).permute(2, 0, 1) with N = WINDOW * WINDOW: a [(2W-1)^2, HEADS]"
        " table picked row by row by an int64 [N * N] index buffer (aten.index.Tensor), then broadcast over a"
        " [BATCH, HEADS, N, N] attention tensor."
    ),
    "dtype": "float32",
    "flops": "BATCH*HEADS*WINDOW**4",
    "shape_sets": [{"BATCH": 3, "HEADS": 4, "WINDOW": 3}, {"BATCH": 2, "HEADS": 5, "WINDOW": 4}],
}


class Model(nn.Module):
    def __init__(self, heads: int, window: int) -> None:
        super().__init__()
        self.window = window
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        relative = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("index", relative[:, :, 0] * (2 * window - 1) + relative[:, :, 1])

    def forward(self, attn: torch.Tensor) -> torch.Tensor:
        n = self.window * self.window
        bias = self.table[self.index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        return attn + bias


def get_inputs() -> list[torch.Tensor]:
    n = WINDOW * WINDOW
    return [torch.randn(BATCH, HEADS, n, n)]


def get_init_inputs() -> list:
    return [HEADS, WINDOW]
