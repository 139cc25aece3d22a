"""Stride-1 transposed convolutions captured as the forward convolutions they equal (input padded by d (k - 1) - p,
weights flipped and each group's channels swapped into the workspace each call), so the forward kernels serve them —
checked against torch on the emulator across the conv variants, 1-D to 3-D, with groups, dilation, padding and no
bias; strided ones (and padding past the kernel's reach) stay transposed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import gpu_failures, needs_gxx

from optiml.graph.capture import capture_all
from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.templates.base import GroupConfig
from optiml.templates.kernels import TemplateKernels

TASK = """import torch
import torch.nn as nn

OPTIML = {{"dtype": "float32", "shape_sets": [{first}, {second}]}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{module}

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""
#: name: (module, input shape, two shape sets of its sizes)
CONVS = {
    "plain2d": ("ConvTranspose2d(16, 24, 3)", "2, 16, H, W", {"H": 9, "W": 7}, {"H": 5, "W": 12}),
    "grouped2d": (
        "ConvTranspose2d(8, 16, (3, 5), padding=(1, 2), groups=2, bias=False)",
        "2, 8, H, W",
        {"H": 6, "W": 10},
        {"H": 11, "W": 4},
    ),
    "dilated1d": ("ConvTranspose1d(8, 12, 3, dilation=3, padding=1)", "3, 8, L", {"L": 40}, {"L": 9}),
    "padded3d": (
        "ConvTranspose3d(4, 8, 3, padding=1)",
        "2, 4, D, H, W",
        {"D": 4, "H": 5, "W": 6},
        {"D": 3, "H": 3, "W": 7},
    ),
}


def _task(folder: Path, name: str, module: str | None = None) -> Task:
    default, shape, first, second = CONVS[name]
    sizes = "\n".join(f"{k} = {v}" for k, v in first.items())
    text = TASK.format(module=module or default, shape=shape, first=first, second=second)
    return write_task(folder, name, text.replace("\n\nclass Model", f"\n{sizes}\n\nclass Model", 1))


def _conv_attrs(task: Task) -> dict:
    (node,) = [n for n in capture_all(task)[0].nodes if n.op == "conv"]
    return dict(node.attrs)


def test_stride_one_transposes_are_captured_as_forward_convolutions(tmp_path: Path) -> None:
    attrs = _conv_attrs(_task(tmp_path, "grouped2d"))
    assert not attrs["transposed"] and attrs["transposed_weight"]
    assert attrs["padding"] == (1, 2)  # d (k - 1) - p: 2 - 1 and 4 - 2
    dilated = _conv_attrs(_task(tmp_path, "dilated1d"))
    assert dilated["padding"] == (5,) and dilated["dilation"] == (3,)  # 3 * 2 - 1
    strided = _conv_attrs(_task(tmp_path, "plain2d", "ConvTranspose2d(16, 24, 3, stride=2)"))
    assert strided["transposed"] and not strided["transposed_weight"]
    cropped = _conv_attrs(_task(tmp_path, "plain2d", "ConvTranspose2d(16, 24, 3, padding=3)"))  # past d (k - 1)
    assert cropped["transposed"] and not cropped["transposed_weight"]


def _units(folder: Path, name: str, seeds: int = 3) -> list[tuple[Task, str, str]]:
    kernels = planned(_task(folder, name))
    return [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(seeds)]


@needs_gxx
@pytest.mark.parametrize("name", sorted(CONVS))
def test_forward_kernels_match_the_transposed_convolution(tmp_path: Path, name: str) -> None:
    units = _units(tmp_path, name)
    kernels = planned(_task(tmp_path, name))
    extra = [GroupConfig.of("direct", threads=64), GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4)]
    for config in extra:
        if kernels.spaces[0].reason_invalid(config) is None:
            units.append((kernels.task, config.label(), kernels.render([config]).code))
    assert len({label for _, label, _ in units}) >= 3
    failures = emulator_mismatches(tmp_path / "emu", units, seed=4, tol=2e-5)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_weights_left_unflipped_fail(tmp_path: Path) -> None:
    task, label, code = _units(tmp_path, "plain2d", 1)[0]
    broken = code.replace("(taps - 1 - tap)", "tap")
    assert broken != code
    assert emulator_mismatches(tmp_path / "emu", [(task, label, broken)], seed=4, tol=2e-5)


@pytest.mark.gpu
def test_forward_kernels_verify_on_the_gpu(tmp_path: Path) -> None:
    """The emulator's convolutions through the harness on a real GPU, each root seed as planned for it."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    tasks = {name: _task(tmp_path, name) for name in CONVS}
    cases = [(name, seed[0]) for name in CONVS for seed in TemplateKernels.for_task(tasks[name]).seeds(3)]

    def render(name: str, config: GroupConfig) -> KernelSource:
        return TemplateKernels.for_task(tasks[name]).render([config])

    failures = gpu_failures(tasks, cases, render, tmp_path)
    assert not failures, "\n".join(failures)
