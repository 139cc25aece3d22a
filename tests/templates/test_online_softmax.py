"""Softmax's denominator, ``sum(exp(x - max(x)))`` (and logsumexp's, whose shift guards an infinite max), is
taken online in the max's pass by row kernels that read the row anew for every pass (a running max, the sum
rescaled when it grows): one pass fewer over rows too long to stay in cache. Kernels that hold the row in
registers, split it over blocks, or walk columns (read again from L2) keep their passes. Checked against torch
on the CPU emulator, with rows that make the rescaling work (values up to ±90), rows holding -inf (masked), +inf
and NaN, and a row of -inf alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import emulated_library, from_bits, needs_gxx, run_emulated

from optiml.templates.base import GroupConfig
from optiml.templates.kernels import TemplateKernels

SHAPES = [{"M": 6, "N": 1000}]
FORWARDS = {
    "softmax": ("x\nreturn torch.softmax(x, dim=1)", lambda x: torch.softmax(x, dim=1)),
    "log_softmax": ("x\nreturn torch.log_softmax(x, dim=-1)", lambda x: torch.log_softmax(x, dim=-1)),
    "softmax_dim0": ("x\nreturn torch.softmax(x, dim=0)", lambda x: torch.softmax(x, dim=0)),
    "logsumexp": ("x\nreturn torch.logsumexp(x, dim=1)", lambda x: torch.logsumexp(x, dim=1)),  # a guarded max
}
STREAMING = [  # items=0: the row is read again from memory for each pass
    GroupConfig.of("block_row", threads=256, vec=4, items=0),
    GroupConfig.of("block_row", threads=128, vec=1, items=0),
    GroupConfig.of("warp_row", threads=128, vec=2, items=0),
]
COLUMNS = [GroupConfig.of("col", threads=128), GroupConfig.of("col_split", threads=256, lanes=8)]


def _kernels(tmp_path: Path, name: str) -> TemplateKernels:
    text = task_text(SHAPES, FORWARDS[name][0], "[torch.randn(M, N)]")
    return planned(write_task(tmp_path, name, text))


def _inputs(dim: int) -> torch.Tensor:
    """Values up to ±90 (exp overflows without the max), and along the reduced dim: masked elements, a late larger
    max, a line of -inf alone (NaN in the reference), +inf and NaN."""
    x = torch.randn(6, 1000, generator=torch.Generator().manual_seed(5)) * 30.0
    lines = x if dim == 1 else x.t()  # a view: writing a line of it writes x
    lines[0, ::3] = float("-inf")
    lines[1, 4 if dim == 0 else 400] = 90.0
    lines[2, :] = float("-inf")
    lines[3, 5] = lines[3, 2] = float("inf")  # two: softmax NaN, logsumexp inf
    lines[4, 1] = float("nan")
    return x


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_streaming_row_kernels_sum_online_and_cached_or_column_ones_do_not(name: str, tmp_path: Path) -> None:
    """A column kernel's block reads its columns again from L2: it keeps its passes."""
    kernels = _kernels(tmp_path, name)
    if name == "softmax_dim0":
        for config in COLUMNS:
            assert "optiml_sumexp_add" not in kernels.render([config]).code, config.label()
        return
    for config in STREAMING:
        assert "optiml_sumexp_add" in kernels.render([config]).code, config.label()
    cached = GroupConfig.of("block_row", threads=256, vec=4, items=4)
    assert "optiml_sumexp_add" not in kernels.render([cached]).code


@needs_gxx
@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_online_sums_match_torch_with_masked_and_infinite_rows(name: str, tmp_path: Path) -> None:
    kernels = _kernels(tmp_path, name)
    split = GroupConfig.of("split_row", threads=256, vec=4, blocks_per_sm=4)  # keeps its passes
    configs = COLUMNS if name == "softmax_dim0" else [*STREAMING, split]
    library = emulated_library(tmp_path / "emu", [kernels.render([c]).code for c in configs])
    x = _inputs(0 if name == "softmax_dim0" else 1)
    want = FORWARDS[name][1](x)
    for k, config in enumerate(configs):
        [bits] = run_emulated(library, k, [x], [want])
        got = from_bits(bits, want.dtype).reshape(want.shape)
        assert np.allclose(got, want.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True), (
            f"{config.label()}: max error {np.nanmax(np.abs(got - want.numpy()))}, "
            f"NaN where torch has none: {int((np.isnan(got) & ~np.isnan(want.numpy())).sum())}"
        )


@needs_gxx
def test_cross_entropy_with_an_online_denominator_matches_torch(tmp_path: Path) -> None:
    forward = "logits, targets\nreturn torch.nn.functional.cross_entropy(logits, targets)"
    inputs = "[torch.randn(M, N) * 20.0, torch.randint(0, N, (M,))]"
    kernels = planned(write_task(tmp_path, "ce", task_text([{"M": 6, "N": 1000}, {"M": 3, "N": 37}], forward, inputs)))
    rest = kernels.default()[1:]
    units = [(kernels.task, c.label(), kernels.render([c, *rest]).code) for c in STREAMING]
    assert all("optiml_sumexp_add" in code for _, _, code in units)
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
