"""A variance over the row — ``(x - mean(x))²`` summed or averaged, as ``var``, ``layer_norm``,
``group_norm`` and ``instance_norm`` decompose — is taken in the mean's own pass from the sums of ``x`` and
``x²`` in double precision (row/rowprog.py ``_centred_mean``): one pass fewer over a row too long to cache.
Checked against torch on the CPU emulator, with rows whose mean dwarfs their spread and rows of one value."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task
from optiml.templates.kernels import TemplateKernels
from optiml.templates.row.reduce import RowTemplate
from optiml.templates.row.rowprog import RowProgram

SHAPES = [{"N": 6, "D": 4099}, {"N": 3, "D": 64}]
#: rows centred near 100 with a spread of 0.5 (mean² / variance = 4e4: float sums of squares would lose the
#: variance; fp32 inputs still hold it to 1e-5), and a constant row
INPUTS = "[torch.randn(N, D) * 0.5 + 100.0, torch.ones(1, D) * 3.0]"

CASES = {
    "layer_norm": "x, c\nreturn torch.cat((F.layer_norm(x, (D,)), F.layer_norm(c, (D,))), dim=0)",
    "unbiased_var": "x, c\nreturn torch.var(x, dim=1) + torch.var(c, dim=1).sum()",
    "pow_mean": "x, c\nreturn (x - x.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1) + c.sum()",
    "mean_minus_x": "x, c\nm = x.mean(dim=1, keepdim=True)\nreturn ((m - x) * (m - x)).sum(dim=1) / D + c.mean()",
}


def _task(tmp_path: Path, name: str) -> Task:
    text = task_text(SHAPES, CASES[name], INPUTS, imports="import torch.nn.functional as F")
    return write_task(tmp_path, name, text)


def _programs(kernels: TemplateKernels) -> list[RowProgram]:
    found = []
    for group in kernels.plan.groups:
        template = kernels.templates.of(group)
        if isinstance(template, RowTemplate):
            found.append(template.program(group))
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_variance_is_taken_in_the_means_pass(name: str, tmp_path: Path) -> None:
    programs = [p for p in _programs(planned(_task(tmp_path, name))) if p.reductions]
    squares = [r for p in programs for r in p.reductions if r.kind == "sumsq"]
    assert squares, [[(r.kind, r.stage) for r in p.reductions] for p in programs]
    for reduction in squares:
        assert reduction.partner is not None and reduction.stage == reduction.partner.stage


def test_a_variance_of_another_value_keeps_its_own_pass(tmp_path: Path) -> None:
    """``(y - mean(x))²`` with ``y`` not ``x`` is no variance: it needs the mean first, in a pass of its own."""
    text = task_text(SHAPES, "x, c\nreturn ((x * 2 - x.mean(dim=1, keepdim=True)) ** 2).mean(dim=1)", INPUTS)
    programs = _programs(planned(write_task(tmp_path, "other", text)))
    kinds = sorted((r.kind, r.stage) for p in programs for r in p.reductions)
    assert kinds == [("mean", 0), ("mean", 1)]


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_one_pass_variances_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name))
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(3)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=7, tol=1e-4)
    assert not failures, "\n".join(failures)
