"""Square bfloat16 GEMM: C = A @ B with M = N = K = 4096, fp32 accumulation, bf16 output."""

import torch
import torch.nn as nn

M = 4096
N = 4096
K = 4096

OPTIML = {
    "description": (
        "Dense bfloat16 matrix product C = A @ B of an M x K and a K x N matrix, fp32 accumulation,"
        " bfloat16 output (tensor cores)."
    ),
    "dtype": "bfloat16",
    # Both the reference (cuBLAS, reduced-precision reductions off in the harness) and a kernel
    # accumulate in fp32 and round once to bf16; their fp32 sums differ by ~K * eps * |C| ~ 1e-3
    # (|C| ~ sqrt(K) = 64), which flips at most one rounding: 1 bf16 ulp, at most 2^-7 = 7.8e-3
    # relative. The bf16 default atol = rtol = 2e-2 keeps a margin for a reference that still
    # reduces split-K partials in bf16 (seen on the H200 at 1000 x 2056 x 1031: 2 ulps on 4.7 % of
    # the outputs); fp16 accumulation (errors ~ |C| * 2^-11 * sqrt(K)) fails.
    "atol": 2e-2,
    "rtol": 2e-2,
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 333, "N": 259, "K": 517}, {"M": 1000, "N": 2056, "K": 1031}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs() -> list[torch.Tensor]:
    # Generated in fp32 and cast to bfloat16 by the harness.
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs() -> list:
    return []
