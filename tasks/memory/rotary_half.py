"""Rotary position embedding, rotate-half form: x * cos + cat(-x2, x1) * sin, in float32."""

import torch
import torch.nn as nn

BATCH = 8
HEADS = 32
SEQ = 2048
DIM = 128

OPTIML = {
    "description": (
        "RoPE as LLaMA-style code writes it: the last dim of a float32 [BATCH, HEADS, SEQ, DIM] tensor split in"
        " halves x1, x2; out = x * cos + cat(-x2, x1) * sin with [SEQ, DIM] cos and sin tables broadcast over"
        " batch and heads. Slicing and concatenation fused with math: one pass over x is the floor."
    ),
    "dtype": "float32",
    "flops": "3*BATCH*HEADS*SEQ*DIM",
    "shape_sets": [
        {"BATCH": 2, "HEADS": 3, "SEQ": 1000, "DIM": 64},
        {"BATCH": 1, "HEADS": 5, "SEQ": 7, "DIM": 34},
    ],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def get_inputs() -> list[torch.Tensor]:
    angles = torch.rand(SEQ, DIM) * 6.283
    return [torch.randn(BATCH, HEADS, SEQ, DIM), torch.cos(angles), torch.sin(angles)]


def get_init_inputs() -> list:
    return []
