"""``torch.gather`` in a row kernel: one element picked per row, and nothing else.

The row template computes a gather as a per-row statistic (cross-entropy's target logit). An index
with several picks per row — the source's own shape, or more rows than the source (a lookup) — was
planned the same way and left most of the output unwritten; it is refused in one line now.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.errors import TemplateError

TASK = """import torch
import torch.nn as nn

L, H, M = 9, 3, 16
OPTIML = {{"shape_sets": [{{"L": 5, "M": 7}}]}}


class Model(nn.Module):
    def forward(self, t, rows, picks, same):
        return {body}


def get_inputs():
    return [
        torch.randn(L, H),
        torch.randint(0, L, (M,)),
        torch.randint(0, H, (L, 1)),
        torch.randint(0, L, (L, H)),
    ]


def get_init_inputs():
    return []
"""


@needs_gxx
def test_one_pick_per_row_matches_torch_on_the_emulator(tmp_path: Path) -> None:
    body = "torch.gather(t, 1, picks) * 2.0 + t.sum(1, keepdim=True)"
    kernels = planned(write_task(tmp_path, "pick", TASK.format(body=body)))
    units = [(kernels.task, body, kernels.render(kernels.default()).code)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=2, tol=1e-5)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    "body", ["torch.gather(t, 0, same)", "torch.gather(t, 0, rows.view(-1, 1).expand(-1, H))"], ids=["same", "lookup"]
)
def test_several_picks_per_row_are_refused_naming_gather(tmp_path: Path, body: str) -> None:
    with pytest.raises(TemplateError, match=r"no template for aten\.gather\.default with an index shaped"):
        planned(write_task(tmp_path, "many", TASK.format(body=body)))
