"""``torch.tril`` / ``torch.triu`` outside a product's epilogue (a causal mask, Mamba2's segment sums) as a
masked-copy kernel, planned and run on the CPU emulator against torch."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

MASKS = """import torch
import torch.nn as nn

T = 7


class Model(nn.Module):
    def forward(self, scores, x):
        keep = torch.tril(torch.ones(T, T + 2, dtype=torch.bool, device=scores.device), diagonal=1)
        masked = scores.masked_fill(~keep, -1e4).softmax(-1)
        return masked, torch.triu(x * 2.0, diagonal=-1), torch.tril(x + 1.0)


def get_inputs():
    return [torch.randn(2, 3, T, T + 2), torch.randn(4, 5, 6)]


def get_init_inputs():
    return []
"""

# Mamba2's chunked state-space scan as KernelBench writes it, with reshape/permute for einops' rearrange
CHUNKED_SCAN = """import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH, LENGTH, HEADS, WIDTH, STATE, CHUNK = 2, 12, 2, 5, 3, 4
N = LENGTH // CHUNK


def pairwise_sums(a):
    total = torch.cumsum(a, dim=-1)
    diff = total[..., :, None] - total[..., None, :]
    keep = torch.tril(torch.ones(a.size(-1), a.size(-1), dtype=torch.bool, device=a.device))
    return diff.masked_fill(~keep, -torch.inf)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.decay = nn.Parameter(-torch.rand(BATCH, LENGTH, HEADS))
        self.into = nn.Parameter(torch.randn(BATCH, LENGTH, HEADS, STATE))
        self.out = nn.Parameter(torch.randn(BATCH, LENGTH, HEADS, STATE))

    def forward(self, x):
        xs = x.reshape(BATCH, N, CHUNK, HEADS, WIDTH)
        b = self.into.reshape(BATCH, N, CHUNK, HEADS, STATE)
        c = self.out.reshape(BATCH, N, CHUNK, HEADS, STATE)
        a = self.decay.reshape(BATCH, N, CHUNK, HEADS).permute(0, 3, 1, 2)
        running = torch.cumsum(a, dim=-1)
        within = torch.einsum("bnkhs,bnjhs,bhnkj,bnjhp->bnkhp", c, b, torch.exp(pairwise_sums(a)), xs)
        to_end = torch.exp(running[:, :, :, -1:] - running)
        states = torch.einsum("bnkhs,bhnk,bnkhp->bnhps", b, to_end, xs)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        across = torch.exp(pairwise_sums(F.pad(running[:, :, :, -1], (1, 0))))
        carried = torch.einsum("bhmn,bnhps->bmhps", across, states)[:, :-1]
        between = torch.einsum("bnkhs,bnhps,bhnk->bnkhp", c, carried, torch.exp(running))
        return (within + between).reshape(BATCH, LENGTH, HEADS, WIDTH)


def get_inputs():
    return [torch.rand(BATCH, LENGTH, HEADS, WIDTH)]


def get_init_inputs():
    return []
"""

TASKS = {"masks": MASKS, "chunked_scan": CHUNKED_SCAN}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_mask_outside_a_product_is_a_kernel_of_its_own(tmp_path: Path, name: str) -> None:
    plan = planned(write_task(tmp_path, name, TASKS[name])).describe()
    assert "triangular[tril]" in plan, plan


@needs_gxx
def test_masked_copies_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for name, text in sorted(TASKS.items()):
        kernels = planned(write_task(tmp_path, name, text))
        units += [(kernels.task, f"{name} {s[0].label()}", kernels.render(s).code) for s in kernels.seeds(2)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=17, tol=1e-4)
    assert not failures, "\n".join(failures)
