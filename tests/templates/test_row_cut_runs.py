"""Reductions whose operands are broadcast over part of a reduced run: the run is cut, numerics on the emulator.

``mean(clamp(1 - x * y[:, None]))`` reduces both dims of ``x`` while ``y`` spans only the outer
one; ``sum(x * w[:, None], dims=(1, 2))`` reduces channels and length while ``w`` spans only the
channels. Each reduced run is cut where an operand's coverage changes, so every operand is
indexed along a whole run or broadcast over it; the planned units run on the CPU emulator (see
``test_gemm_template``) in every row variant and are compared with torch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.errors import TemplateError
from optiml.templates.base import GroupConfig

HINGE = """import torch
import torch.nn as nn

B, N = 64, 96
OPTIML = {"shape_sets": [{"B": 7, "N": 33}, {"B": 300, "N": 5}]}


class Model(nn.Module):
    def forward(self, x, y):
        return torch.mean(torch.clamp(1 - x * y.unsqueeze(1), min=0))


def get_inputs():
    return [torch.randn(B, N), torch.randn(B)]


def get_init_inputs():
    return []
"""

CHANNEL_WEIGHTED = """import torch
import torch.nn as nn

B, C, L = 6, 24, 40
OPTIML = {"shape_sets": [{"B": 3, "C": 5, "L": 7}]}


class Model(nn.Module):
    def forward(self, x, w):
        return (x * w.unsqueeze(1)).sum(dim=(1, 2))


def get_inputs():
    return [torch.randn(B, C, L), torch.randn(C)]


def get_init_inputs():
    return []
"""

THREE_RUNS = """import torch
import torch.nn as nn

A, B, C = 4, 5, 6
OPTIML = {}


class Model(nn.Module):
    def forward(self, x, u, v):
        return (x * u.view(A, 1, 1) * v.view(1, 1, C)).sum()


def get_inputs():
    return [torch.randn(A, B, C), torch.randn(A), torch.randn(C)]


def get_init_inputs():
    return []
"""

SPLIT = [
    GroupConfig.of("split_row", threads=128, vec=2, blocks_per_sm=1),
    GroupConfig.of("split_row", threads=256, vec=1, blocks_per_sm=2),
]
#: a single row (a full reduction) is offered split_row alone; several rows, every row variant
VARIANTS = {
    "hinge": SPLIT,
    "channel_weighted": [
        GroupConfig.of("warp_row", threads=128, vec=1, items=0),
        GroupConfig.of("block_row", threads=256, vec=4, items=0),
        *SPLIT,
    ],
}


@needs_gxx
def test_a_run_is_cut_where_an_operand_is_broadcast_and_every_variant_matches_torch(tmp_path: Path) -> None:
    units = []
    for name, text in (("hinge", HINGE), ("channel_weighted", CHANNEL_WEIGHTED)):
        kernels = planned(write_task(tmp_path, name, text))
        default = kernels.default()
        for config in [default[0], *VARIANTS[name]]:
            units.append((kernels.task, config.label(), kernels.render([config, *default[1:]]).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=11, tol=1e-4)
    assert not failures, "\n".join(failures)


def test_cuts_that_would_make_three_runs_are_still_refused_in_one_line(tmp_path: Path) -> None:
    task = write_task(tmp_path, "three_runs", THREE_RUNS)
    with pytest.raises(TemplateError, match="more than two runs of dims"):
        planned(task).default()
