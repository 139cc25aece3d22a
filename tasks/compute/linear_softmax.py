"""Linear + softmax in float32: torch.softmax(nn.Linear(K, N)(x), dim=-1), a classifier head."""

import torch
import torch.nn as nn

M = 4096
K = 1024
N = 8192

OPTIML = {
    "description": (
        "torch.softmax(nn.Linear(K, N)(x), dim=-1) of a float32 [M, K] input: a GEMM followed by a row"
        " softmax over its N outputs, exact fp32."
    ),
    "dtype": "float32",
    # Probabilities are ~1/N, so the default atol (1e-4) would accept almost anything: atol 1e-7.
    # Logit errors from fp32 reordering (~1e-6 absolute with nn.Linear's init) become relative errors
    # of ~1e-6 in the probabilities, inside rtol 1e-4; TF32 logits (~3e-4 off) fail it.
    "atol": 1e-7,
    "rtol": 1e-4,
    "flops": "2*M*N*K + 5*M*N",
    "shape_sets": [{"M": 37, "K": 301, "N": 45}, {"M": 513, "K": 257, "N": 10001}],
}


class Model(nn.Module):
    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, K)]


def get_init_inputs() -> list:
    return [K, N]
