"""LayerNorm over the last dimension of a float32 matrix, with a learned elementwise affine."""

import torch
import torch.nn as nn

M = 8192
N = 8192

OPTIML = {
    "description": (
        "nn.LayerNorm over the last dimension (size N, eps=1e-5, biased variance) of a float32"
        " M x N matrix, followed by the elementwise affine weight * x_hat + bias."
    ),
    "dtype": "float32",
    # mean (1), variance (3), normalise and affine (4): ~8 floating-point operations per element.
    "flops": "8*M*N",
    "shape_sets": [{"M": 1000, "N": 3001}, {"M": 7, "N": 20001}],
}


class Model(nn.Module):
    def __init__(self, normalized_shape: int) -> None:
        super().__init__()
        # eps must match LN_EPS in layernorm.naive.cu (the ABI passes tensors, not hyperparameters).
        self.ln = nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)
        # Non-trivial affine parameters (not ones/zeros), fixed by their own generator so they do not
        # depend on the harness seed. Created on the CPU explicitly so a CUDA default device works.
        gen = torch.Generator(device="cpu").manual_seed(1234)
        with torch.no_grad():
            self.ln.weight.copy_(1.0 + 0.5 * torch.randn(normalized_shape, generator=gen, device="cpu"))
            self.ln.bias.copy_(0.5 * torch.randn(normalized_shape, generator=gen, device="cpu"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return [N]
