"""Each convolution's arithmetic at PyTorch's defaults, measured call by call (``optiml.conv_arithmetic``): the
TF32 rounding, the choice between two candidate answers, the call signature shared by the probe and the capture,
and the planner following a measurement over its rule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from optiml.conv_arithmetic import EXACT, TF32, describe, measure, nearer, round_to_tf32
from optiml.graph.capture import capture_all
from optiml.task import load_task
from optiml.task_runtime import TaskRunner, torch_default_precision
from optiml.templates.kernels import TemplateKernels

ULP = 2.0**-10  # TF32's spacing at 1.0


def test_rounding_keeps_ten_mantissa_bits_to_nearest_ties_to_even() -> None:
    values = torch.tensor(
        [1 + ULP / 2, 1 + 3 * ULP / 2, 1 + ULP / 4, 1 + 3 * ULP / 4, -(1 + 3 * ULP / 2), 0.0, 2.0**-130],
        dtype=torch.float32,
    )
    expected = [1.0, 1 + 2 * ULP, 1.0, 1 + ULP, -(1 + 2 * ULP), 0.0]
    assert round_to_tf32(values)[:6].tolist() == expected
    drawn = torch.randn(10_000, generator=torch.Generator().manual_seed(0))
    rounded = round_to_tf32(drawn)
    assert not (rounded.view(torch.int32) & 0x1FFF).any()  # the 13 dropped bits are zero
    spacing = torch.ldexp(torch.ones_like(drawn), torch.frexp(drawn).exponent - 11)  # half an ulp of TF32
    assert ((rounded - drawn).abs() <= spacing).all()
    assert (rounded != drawn).float().mean() > 0.99  # and it does move almost every value


def test_the_nearer_candidate_names_the_arithmetic() -> None:
    exact = torch.linspace(-1, 1, 64)
    rounded = exact + 1e-3
    assert nearer(exact + 1e-7, exact, rounded) == EXACT
    assert nearer(rounded - 1e-6, exact, rounded) == TF32
    assert nearer(exact, exact, exact) == EXACT  # nothing tells them apart: exact
    assert "2 of 3" in describe({"a": TF32, "b": TF32, "c": EXACT})


TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

OPTIML = {"dtype": "float32", "precision": "tf32"}


class Model(nn.Module):
    \"\"\"One of each kind the capture rewrites or keeps: dilated 1-D, grouped 2-D, stride-1 transposed (captured
    as a forward one), strided transposed 3-D, and a functional call with a tuple padding.\"\"\"

    def __init__(self):
        super().__init__()
        self.one = nn.Conv1d(4, 6, 3, dilation=2, padding=2)
        self.grouped = nn.Conv2d(6, 8, 3, groups=2, padding=1, bias=False)
        self.transposed = nn.ConvTranspose2d(8, 4, 3, padding=1)
        self.volume = nn.ConvTranspose3d(2, 3, 2, stride=2)
        self.weight = nn.Parameter(torch.randn(5, 4, 3, 1))

    def forward(self, x, v):
        y = self.one(x.flatten(2)).unflatten(2, (5, 4))
        y = self.transposed(self.grouped(y))
        return F.conv2d(y, self.weight, padding=(1, 0)), self.volume(v)


def get_inputs():
    return [torch.randn(2, 4, 5, 4), torch.randn(1, 2, 3, 4, 5)]


def get_init_inputs():
    return []
"""


def test_the_probe_and_the_capture_key_every_call_alike(tmp_path: Path) -> None:
    path = tmp_path / "convolutions.py"
    path.write_text(TASK, encoding="utf-8")
    task = load_task(path)
    runner = TaskRunner(task, "cpu")
    model, args = runner.build_model(0), runner.make_args(0)
    found = measure(lambda: model(*args))
    assert len(found) == 5 and set(found.values()) == {EXACT}  # no TF32 on the CPU
    graph = capture_all(task)[0]
    captured = {str(n.attr("signature")) for n in graph.nodes if n.op == "conv"}
    assert captured == set(found)
    assert any("t=1" in key and "s=[1, 1]" in key for key in captured)  # the call as made, before the rewrite


def test_a_measurement_that_cannot_run_leaves_a_note_and_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measurement only steers the planner: a forward it cannot follow never fails the task."""
    path = tmp_path / "convolutions.py"
    path.write_text(TASK, encoding="utf-8")
    runner = TaskRunner(load_task(path), "cpu")
    model, args = runner.build_model(0), runner.make_args(0)
    runner.device = torch.device("cuda")  # as on the judge's GPU (the copies stay where the case is)

    def refuses(call: object) -> dict[str, str]:
        raise RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\nsecond line")

    monkeypatch.setattr("optiml.task_runtime.measure", refuses)
    assert runner.convolution_arithmetic(model, args) == {}
    assert runner.notes[-1] == (
        "convolutions' arithmetic at PyTorch's defaults not measured (RuntimeError: cuDNN error: "
        "CUDNN_STATUS_NOT_SUPPORTED): the planner's rule stands"
    )


DENSE = """import torch
import torch.nn as nn

OPTIML = {{"dtype": "float32", "precision": "tf32"}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{module}

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 16, {size})]


def get_init_inputs():
    return []
"""


def _conv_task(folder: Path, module: str, size: str) -> TemplateKernels:
    path = folder / "conv.py"
    path.write_text(DENSE.format(module=module, size=size), encoding="utf-8")
    return TemplateKernels.for_task(load_task(path))


@pytest.mark.parametrize(
    ("module", "size", "rule", "measured"),
    [
        ("Conv2d(16, 24, 3, padding=1)", "10, 12", "tf32_wgmma", EXACT),  # the rule rounds; cuDNN did not
        ("Conv3d(16, 8, 3, padding=1)", "6, 6, 6", "tf32x3_wgmma", TF32),  # the rule is exact; cuDNN rounded
    ],
)
def test_the_planner_follows_the_measured_arithmetic_over_its_rule(
    tmp_path: Path, module: str, size: str, rule: str, measured: str
) -> None:
    unmeasured = _conv_task(tmp_path, module, size)
    assert unmeasured.default()[0].variant == rule
    (conv,) = [n for n in capture_all(unmeasured.task)[0].nodes if n.op == "conv"]
    task, key = unmeasured.task, str(conv.attr("signature"))
    followed = TemplateKernels.for_task(replace(task, convolution_arithmetic=((key, measured),)))
    assert followed.default()[0].variant != rule
    assert ("optiml_round_tf32(" in followed.render(followed.default()).code) == (measured == TF32)
    other = TemplateKernels.for_task(replace(task, convolution_arithmetic=(("conv of another shape", measured),)))
    assert other.default()[0].variant == rule  # a measurement of another call changes nothing


@pytest.mark.gpu
def test_cudnn_s_choices_are_measured_on_the_gpu() -> None:
    """A dense 2-D convolution takes TF32 at the defaults on Hopper; a depthwise one stays exact."""
    dense = nn.Conv2d(64, 64, 3, padding=1).cuda()
    depthwise = nn.Conv2d(64, 64, 3, padding=1, groups=64).cuda()
    x = torch.randn(8, 64, 56, 56, device="cuda")
    with torch_default_precision():
        found = measure(lambda: (dense(x), depthwise(x)))
    assert sorted(found.values()) == [EXACT, TF32]
    assert found[next(k for k in found if "g=64" in k)] == EXACT


@pytest.mark.gpu
def test_the_judge_s_runtime_measures_a_task_at_the_defaults_and_not_an_exact_one(tmp_path: Path) -> None:
    """Every call of the five-convolution task is measured on the GPU; an exact-fp32 task measures none."""
    path = tmp_path / "convolutions.py"
    path.write_text(TASK, encoding="utf-8")
    runner = TaskRunner(load_task(path), "cuda")
    model, args = runner.build_model(0), runner.make_args(0)
    found = runner.convolution_arithmetic(model, args)
    assert set(found) == {str(n.attr("signature")) for n in capture_all(runner.task)[0].nodes if n.op == "conv"}
    assert set(found.values()) <= {TF32, EXACT}
    exact = tmp_path / "exact.py"
    exact.write_text(TASK.replace('"precision": "tf32"', '"precision": "exact"'), encoding="utf-8")
    exact_runner = TaskRunner(load_task(exact), "cuda")
    assert exact_runner.convolution_arithmetic(exact_runner.build_model(0), exact_runner.make_args(0)) == {}
