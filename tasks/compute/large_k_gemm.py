"""GEMM with a very long reduction: C = A @ B, M = N = 256, K = 131072, exact fp32."""

import torch
import torch.nn as nn

M = 256
N = 256
K = 131072

OPTIML = {
    "description": (
        "Float32 product C = A @ B of a 256 x K and a K x 256 matrix with K = 131072: few output tiles,"
        " so the reduction must be split (deterministically) to fill the GPU; exact fp32."
    ),
    "dtype": "float32",
    # K = 131072 std-1 terms: |C| ~ 362. Blocked fp32 sums in another order differ by ~1e-2 at worst
    # (a sequential sum would drift ~ K * eps / sqrt(2) ~ 1e-2 too); atol 5e-2 with rtol 1e-4 (3.6e-2
    # at |C|) admits that, while TF32 (products rounded to 10 bits: errors ~ sqrt(K) * 2^-11 ~ 0.18
    # typical) fails on most elements.
    "atol": 5e-2,
    "rtol": 1e-4,
    "flops": "2*M*N*K",
    "shape_sets": [{"M": 37, "N": 45, "K": 4099}, {"M": 129, "N": 255, "K": 65537}],
}


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs() -> list:
    return []
