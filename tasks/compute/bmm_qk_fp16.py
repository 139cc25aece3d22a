"""Attention scores in float16: q @ k.transpose(-2, -1) * scale over [BATCH, HEADS, SEQ, DIM]."""

import torch
import torch.nn as nn

BATCH = 8
HEADS = 16
SEQ = 1024
DIM = 128

OPTIML = {
    "description": (
        "Attention logits (q @ k^T) / sqrt(DIM) of float16 [BATCH, HEADS, SEQ, DIM] queries and keys:"
        " a batched GEMM with a transposed operand and a scaling epilogue, fp32 accumulation."
    ),
    "dtype": "float16",
    # fp16 keeps 11 bits: the reference (fp32 accumulation, rounded once) and a kernel differ by at
    # most ~1 fp16 ulp (2^-10 ~ 1e-3 relative) after the fp32 sums reorder; |out| ~ 1. atol = rtol =
    # 1e-2 (the fp16 default) leaves a wide margin; an fp16 accumulator (errors ~ sqrt(DIM) * 2^-11
    # * |q k|) still passes only where it is as good.
    "flops": "2*BATCH*HEADS*SEQ*SEQ*DIM",
    # DIM stays 128 in every shape set: the scale is a constant of the graph.
    "shape_sets": [{"BATCH": 1, "HEADS": 3, "SEQ": 37}, {"BATCH": 2, "HEADS": 5, "SEQ": 257}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, HEADS, SEQ, DIM), torch.randn(BATCH, HEADS, SEQ, DIM)]


def get_init_inputs() -> list:
    return []
