"""``x[idx]`` (aten.index.Tensor, one integer index on the first dim): captured as ``index_rows``, planned as
the ``index`` family's kernel, and run on the CPU emulator against torch."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.graph.capture import UnsupportedOpError
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]
BIAS = ROOT / "tasks" / "memory" / "relative_position_bias.py"

NEGATIVE = """import torch
import torch.nn as nn

OPTIML = {{"dtype": "float32", "shape_sets": [{{}}]}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.tensor([[0, -1, 3], [-5, 2, 2]]))

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(5, 4, 3)]


def get_init_inputs():
    return []
"""


def test_a_relative_position_bias_plans_as_a_gather_a_permute_and_the_add() -> None:
    assert planned(load_task(BIAS)).describe() == "index[index_rows] → permute[permute] → pointwise[add]"


@needs_gxx
@pytest.mark.parametrize("task", ["bias", "negative"])
def test_gathered_rows_match_torch_on_the_emulator(task: str, tmp_path: Path) -> None:
    """Every seed at every shape set; the negative case takes rows from the end (-1, -5) of a 3-D tensor
    with a 2-D index, so the output is [2, 3, 4, 3]."""
    loaded = load_task(BIAS) if task == "bias" else write_task(tmp_path, "neg", NEGATIVE.format(expr="x[self.idx] * 2"))
    kernels = planned(loaded)
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(2)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-5)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("x[:, self.idx[0]]", "one index tensor on the first dim"),
        ("x[self.idx, self.idx]", "one index tensor on the first dim"),
        ("x[x > 0]", "nonzero"),  # a data-dependent shape: refused at tracing
    ],
)
def test_other_index_patterns_are_refused_in_one_line(expr: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOpError, match=says) as raised:
        planned(write_task(tmp_path, "other", NEGATIVE.format(expr=expr)))
    assert "\n" not in str(raised.value)


ROLL = """import torch
import torch.nn as nn

OPTIML = {"dtype": "float32", "shape_sets": [{}]}


class Model(nn.Module):
    def forward(self, x):
        return torch.roll(x, shifts=(-3, 2), dims=(1, 2)) * 2 + torch.roll(x, 7, 1)


def get_inputs():
    return [torch.randn(2, 7, 5, 3)]


def get_init_inputs():
    return []
"""


@needs_gxx
def test_a_roll_is_two_slices_concatenated_and_matches_torch(tmp_path: Path) -> None:
    """Swin's shifted windows: ``torch.roll`` along two dims (a negative shift, one of a whole turn: 7 of 7)."""
    kernels = planned(write_task(tmp_path, "roll", ROLL))
    assert "cat" in kernels.describe()
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(2)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-5)
    assert not failures, "\n".join(failures)
