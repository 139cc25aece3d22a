"""``x ** c`` for the exponents PyTorch's CUDA ``pow`` special-cases (2, 3, 0.5, -0.5, -1, -2, 1) is computed
as PyTorch computes it, by products, roots and reciprocals, not ``powf`` (some 40 instructions of logarithm and
exponential an element: level1/36_RMSNorm's ``x ** 2`` over 64 channels ran at half the copy's bandwidth for
it); any other exponent stays ``powf``."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task
from optiml.templates.cexpr import literal

SHAPES = [{"N": 4, "D": 300}, {"N": 3, "D": 37}]
INPUTS = "[torch.rand(N, D) + 0.5]"  # positive: roots and reciprocals of every exponent are defined
EXPONENTS = {
    "2": "x ** 2",
    "3": "x ** 3",
    "half": "x ** 0.5",
    "rhalf": "x ** -0.5",
    "inv": "x ** -1",
    "inv2": "x ** -2",
}


def _task(tmp_path: Path, name: str, expression: str) -> Task:
    forward = f"x\nreturn ({expression}).sum(dim=-1, keepdim=True) * x"  # a row reduction and a pointwise use
    return write_task(tmp_path, name, task_text(SHAPES, forward, INPUTS))


@pytest.mark.parametrize("name", sorted(EXPONENTS))
def test_special_exponents_render_without_powf(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, EXPONENTS[name]))
    code = kernels.render(kernels.default()).code
    assert "powf(" not in code and " pow(" not in code


def test_another_exponent_stays_powf(tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, "p15", "x ** 1.5"))
    code = kernels.render(kernels.default()).code
    assert "powf(" in code


def test_the_exponent_is_read_from_both_literal_forms() -> None:
    from optiml.templates.cexpr import _power

    assert _power("v", "((int64_t)2)", "float") == "((v) * (v))"
    assert _power("v", literal(2.0, "double"), "double") == "((v) * (v))"
    assert _power("v", literal(-0.5, "float"), "float") == "rsqrtf(v)"
    assert _power("v", literal(0.25, "float"), "float").startswith("powf(")
    assert _power("v", "((int64_t)2)", "int64_t").startswith("pow(")  # integers keep the library call
    assert _power("v", "y", "float") == "powf((float)(v), (float)(y))"  # a tensor exponent


@needs_gxx
@pytest.mark.parametrize("name", [*sorted(EXPONENTS), "p15"])
def test_powers_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    expression = EXPONENTS.get(name, "x ** 1.5")
    kernels = planned(_task(tmp_path, name, expression))
    units = [(kernels.task, "default", kernels.render(kernels.default()).code)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
