"""Tolerances that reject nothing-kernels, and a second, signed input distribution (issue 20, classes 7, 8).

Everything runs through TaskRuntime on the CPU exactly as the GPU worker runs it: cases carry the
tolerance that verification compares with, and the runtime's notes say what was adjusted and why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.evaluate.checks import compare
from optiml.evaluate.runtime import TaskRuntime, check_task
from optiml.evaluate.tolerance import Float64Distance, decide
from optiml.task import load_task

HEADER = "import torch\nimport torch.nn as nn\n"


def _task(tmp_path: Path, body: str, name: str = "task.py") -> TaskRuntime:
    path = tmp_path / name
    path.write_text(HEADER + body)
    return TaskRuntime(load_task(path), "cpu")


SOFTMAX = """
B, D = 4, 60000  # every output is below 1e-4: a zero kernel passes atol=1e-4
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
def get_inputs():
    return [torch.rand(B, D)]
def get_init_inputs():
    return []
"""

RELU = """
N = 4096
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(N)]
def get_init_inputs():
    return []
"""


def test_an_all_zero_softmax_passes_the_task_tolerance_but_not_the_case_tolerance(tmp_path: Path) -> None:
    runtime = _task(tmp_path, SOFTMAX)
    case = runtime.case(1, 0, "native")
    zeros = [torch.zeros_like(case.expected[0])]
    assert compare(zeros, case.expected, runtime.task.meta.atol, runtime.task.meta.rtol).passed  # the hole
    assert case.atol[0] < 1e-8 and case.rtol == runtime.task.meta.rtol
    assert not compare(zeros, case.expected, case.atol, case.rtol).passed
    honest = [torch.softmax(case.args[0].double(), dim=1).float()]  # another order of summation
    assert compare(honest, case.expected, case.atol, case.rtol).passed
    assert any("an all-zero output" in n and "atol tightened" in n for n in runtime.notes), runtime.notes


def test_identity_passes_relu_on_native_inputs_only(tmp_path: Path) -> None:
    runtime = _task(tmp_path, RELU)
    assert runtime.distributions() == ["native", "normal"]
    native = runtime.case(1, 0, "native")
    signed = runtime.case(2, 0, "normal")
    assert (signed.args[0] < 0).any() and not (native.args[0] < 0).any()
    assert compare([native.args[0].clone()], native.expected, native.atol, native.rtol).passed
    assert not compare([signed.args[0].clone()], signed.expected, signed.atol, signed.rtol).passed
    assert any("input 0 unchanged still passes" in n and "native" in n for n in runtime.notes), runtime.notes


def test_a_default_signed_distribution_is_dropped_where_the_reference_is_not_finite(tmp_path: Path) -> None:
    runtime = _task(tmp_path, RELU.replace("torch.relu(x)", "torch.log(x)"))
    case = runtime.case(2, 0, "normal")
    assert case.distribution == "native" and not (case.args[0] < 0).any()
    assert runtime.distributions() == ["native"]
    assert any("normal inputs not used" in n for n in runtime.notes)


def test_distributions_the_task_names_are_kept(tmp_path: Path) -> None:
    body = RELU.replace("torch.relu(x)", "torch.log(x)") + 'OPTIML = {"distributions": ["native", "normal"]}\n'
    runtime = _task(tmp_path, body)
    case = runtime.case(2, 0, "normal")
    assert case.distribution == "normal" and torch.isnan(case.expected[0]).any()
    assert runtime.task.meta.distributions_given


def test_signed_sums_get_an_allowance_for_cancellation(tmp_path: Path) -> None:
    runtime = _task(tmp_path, RELU.replace("torch.relu(x)", "torch.cumsum(x, dim=0)").replace("4096", "32768"))
    native, signed = runtime.case(1, 0, "native"), runtime.case(2, 0, "normal")
    assert native.atol[0] == runtime.task.meta.atol
    rms = float(signed.expected[0].double().pow(2).mean().sqrt())
    assert signed.atol[0] == pytest.approx(runtime.task.meta.rtol * rms, rel=1e-6)
    assert signed.atol[0] > runtime.task.meta.atol
    honest = [torch.cumsum(signed.args[0].double(), dim=0).float()]
    assert compare(honest, signed.expected, signed.atol, signed.rtol).passed
    assert not compare([signed.args[0].clone()], signed.expected, signed.atol, signed.rtol).passed
    assert any("RMS of the reference" in n for n in runtime.notes)


def test_a_tolerance_that_already_rejects_trivial_outputs_is_left_alone() -> None:
    ref = torch.rand(1000) + 1.0
    decided = decide([torch.rand(1000)], [ref], 1e-4, 1e-4, "native", "here")
    assert decided.atol == (1e-4,) and decided.notes == ()
    scalar = decide([], [torch.tensor(2.5)], 1e-4, 1e-4, "native", "here")  # a constant is the answer itself
    assert scalar.atol == (1e-4,) and scalar.notes == ()
    ints = decide([], [torch.arange(5)], 1e-4, 1e-4, "native", "here")
    assert ints.atol == (1e-4,)


def test_check_task_reports_the_distributions_and_the_tightened_tolerance(tmp_path: Path) -> None:
    path = tmp_path / "softmax.py"
    path.write_text(HEADER + SOFTMAX)
    notes = check_task(load_task(path), "cpu")
    assert any(n.startswith("verification inputs: native, normal") for n in notes), notes
    assert any("atol tightened" in n for n in notes), notes


def test_a_meta_runtime_builds_signed_cases_without_reading_values(tmp_path: Path) -> None:
    path = tmp_path / "relu.py"
    path.write_text(HEADER + RELU)
    runtime = TaskRuntime(load_task(path), "meta")
    case = runtime.case(2, 0, "normal")
    assert case.distribution == "normal" and case.atol == (runtime.task.meta.atol,)


def test_an_ill_conditioned_reference_widens_atol_by_twice_its_distance_from_float64() -> None:
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(4096, generator=generator) + 1.0  # positive: no signed-sum adjustment
    ref = torch.exp(x)  # not an input, not a constant: nothing trivial passes a few 1e-3
    decided = decide([x], [ref], 1e-4, 1e-4, "native", "here", rounding=[Float64Distance(5e-4, 4.2)])
    assert decided.atol == (pytest.approx(1e-4 + 2 * 5e-4),)
    (note,) = decided.notes
    assert note.startswith("output 0 (here): the reference is 0.0005 from float64 (4.2x the tolerance)")
    # a distance the (signed-sum) tolerance already covers, or none measured, leaves it as it was
    signed = torch.randn(4096, generator=generator) * 1000
    covered = decide([signed], [signed * 2], 1e-4, 1e-4, "normal", "here", rounding=[Float64Distance(1e-3, 5.0)])
    assert covered.atol[0] > 1e-1 and not any("float64" in n for n in covered.notes)
    assert decide([x], [ref], 1e-4, 1e-4, "native", "here", rounding=[None]).atol == (1e-4,)


def test_a_widened_atol_that_lets_a_trivial_output_pass_is_tightened_again() -> None:
    x = torch.linspace(1.0, 2.0, 4096)
    ref = x + 1e-3  # within 2e-3 of its input
    decided = decide([x], [ref], 1e-4, 1e-4, "native", "here", rounding=[Float64Distance(1e-3, 9.0)])
    assert decided.atol == (pytest.approx(1e-4 * float(ref.abs().max())),)
    assert any("input 0 unchanged passed" in n for n in decided.notes)


GROUP_NORM_MEAN = """
class Model(nn.Module):  # level2/23's tail: a group norm's output averaged, exactly 0 but for rounding
    def __init__(self):
        super().__init__()
        self.norm = nn.GroupNorm(4, 16)
    def forward(self, x):
        return self.norm(x).mean(dim=[1, 2, 3])
def get_inputs():
    return [torch.rand(8, 16, 12, 12)]
def get_init_inputs():
    return []
"""


def test_a_reference_of_rounding_noise_keeps_a_tolerance_an_honest_kernel_meets(tmp_path: Path) -> None:
    """All zeros pass the task's 1e-4 on level2/23's mean of a group norm; rtol x max |ref| (about 1e-12) would
    fail every correct kernel, whose sums round differently: the floor is twice the distance from float64."""
    runtime = _task(tmp_path, GROUP_NORM_MEAN)
    case = runtime.case(1, 0, "native")
    (ref,) = case.expected
    assert float(ref.abs().max()) < 1e-6  # rounding noise around 0
    (atol,) = case.atol
    assert float(ref.abs().max()) <= atol < 1e-5  # tight, yet as wide as the noise
    honest = torch.nn.GroupNorm(4, 16).double()(case.args[0].double()).mean(dim=[1, 2, 3]).float()
    assert compare([honest], case.expected, case.atol, case.rtol).passed
    assert not compare([ref + 1e-4], case.expected, case.atol, case.rtol).passed
    assert any("rounding noise around an answer of about zero" in n for n in runtime.notes)
    assert any("still passes" in n for n in runtime.notes)  # zeros are the answer: said, not hidden
