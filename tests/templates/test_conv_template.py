"""Convolution template: capture and planning of conv tasks, the space, nvcc builds, numerics on the CPU.

Numerics run without a GPU, as the GEMM template's do: a task's whole planned unit (planner,
assembler and template) is built with g++ against the fiber emulator, ``mma.sync`` replaced by the
GEMM tests' warp-cooperative emulation, and called in a forked child on buffers shared with it.
fp32 variants are compared with PyTorch's fp32 result at atol = rtol = 1e-4; bf16 ones run on small
integers, so every product and sum is exact and the result must match bit for bit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_gemm_template import _bits, combined, emulated_library, gpu_failures, needs_gxx, run_emulated

from optiml.errors import OptimlError
from optiml.graph.capture import capture_all
from optiml.integrity.screen import screen_source
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task
from optiml.templates.base import DeviceFacts, GroupConfig, TemplateError
from optiml.templates.kernels import TemplateKernels
from optiml.templates.plan import make_plan

FACTS = DeviceFacts()
EMULATED = DeviceFacts(sm_count=4)
TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

{sizes}
OPTIML = {{"dtype": "{dtype}", "shape_sets": {sets}}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, {args}):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""
SETS_2D = [{"B": 1, "C": 4, "H": 8, "W": 8}, {"B": 3, "C": 2, "H": 1, "W": 13}]
SAME_C = [{"B": 1, "H": 8, "W": 8}, {"B": 3, "H": 1, "W": 13}]  # groups = C is a constant: C may not change
INT_INIT = (  # small integer parameters: a bf16 conv is then exact in any summation order
    "        for p in self.parameters():\n"
    "            p.data = torch.randint(-2, 3, p.shape, generator=torch.Generator().manual_seed(p.numel())).float()"
)


def _int_bf16_conv(module: str, body: str, **spec: Any) -> dict[str, Any]:
    """A bf16 task of ``self.c = nn.<module>`` with small integer parameters (:data:`INT_INIT`) and inputs (a bf16
    conv is then exact in any summation order); ``spec``: the rest of the task's fields (``inputs`` replaces the
    integer input)."""
    fields: dict[str, Any] = {"dtype": "bfloat16", "inputs": "torch.randint(-2, 3, (B, C, H, W)).float()"}
    return {**fields, **spec, "init": f"        self.c = nn.{module}\n" + INT_INIT, "body": body}


SPECS: dict[str, dict[str, Any]] = {
    "conv2d_bn_relu": dict(
        init="        self.c = nn.Conv2d(C, 6, 3, padding=1)\n        self.bn = nn.BatchNorm2d(6).eval()",
        body="torch.relu(self.bn(self.c(x))) + 1.0",
    ),
    "conv2d_deep": dict(  # K = 16 x 9 (five 32-deep slices): the channels-last instance's pipeline refills stages
        sizes={"B": 2, "C": 16, "H": 7, "W": 9},
        sets=[{"B": 1, "C": 8, "H": 6, "W": 5}, {"B": 2, "C": 6, "H": 5, "W": 4}],
        init="        self.c = nn.Conv2d(C, 24, 3, padding=1)",
        body="self.c(x) - 0.5",
    ),
    "conv2d_strided": dict(  # stride, padding, dilation; no bias
        init="        self.c = nn.Conv2d(C, 5, (3, 2), stride=(2, 1), padding=(2, 1), dilation=(2, 1), bias=False)",
        body="self.c(x)",
    ),
    "conv1d": dict(
        sizes={"B": 2, "C": 3, "L": 29},
        sets=[{"B": 1, "C": 4, "L": 64}],
        init="        self.c = nn.Conv1d(C, 9, 5, stride=2, padding=2)",
        body="F.gelu(self.c(x))",
        inputs="torch.randn(B, C, L)",
    ),
    "conv3d_groups": dict(
        sizes={"B": 2, "C": 4, "D": 5, "H": 6, "W": 7},
        sets=[{"B": 1, "C": 4, "D": 3, "H": 3, "W": 9}],
        init="        self.c = nn.Conv3d(C, 6, 3, padding=1, groups=2)",
        body="self.c(x) * 0.5",
        inputs="torch.randn(B, C, D, H, W)",
    ),
    "depthwise_residual": dict(
        sets=SAME_C,
        init="        self.c = nn.Conv2d(C, C, 3, padding=1, groups=C)",
        body="self.c(x) + x",
    ),
    "depthwise_multiplier": dict(  # two output channels per input channel, asymmetric kernel, stride, dilation
        sets=SAME_C,
        init="        self.c = nn.Conv2d(C, 2 * C, (3, 5), stride=(2, 1), padding=(1, 3), dilation=(1, 2), groups=C)",
        body="torch.relu(self.c(x))",
    ),
    "depthwise_wide_kernel": dict(  # a 1x7 kernel, stride 3 along W, dilation 2 along H, multiplier 3, no H padding
        sets=[{"B": 1, "H": 3, "W": 40}, {"B": 2, "H": 7, "W": 7}],
        init="        self.c = nn.Conv2d(C, 3 * C, (1, 7), stride=(1, 3), padding=(0, 3), dilation=(2, 1), groups=C)",
        body="self.c(x)",
    ),
    "depthwise3d": dict(
        sizes={"B": 2, "C": 3, "D": 4, "H": 5, "W": 6},
        sets=[{"B": 1, "D": 2, "H": 3, "W": 9}],
        init="        self.c = nn.Conv3d(C, C, 3, padding=(1, 0, 1), groups=C)",
        body="self.c(x)",
        inputs="torch.randn(B, C, D, H, W)",
    ),
    "few_in_many_out3d": dict(  # KernelBench's 59 in small: 3 input channels, a 3x3x1 kernel (K = 27), 24 outputs
        sizes={"B": 2, "C": 3, "D": 5, "H": 6, "W": 4},
        sets=[{"B": 1, "C": 3, "D": 3, "H": 7, "W": 2}],
        init="        self.c = nn.Conv3d(C, 24, (3, 3, 1))",
        body="self.c(x)",
        inputs="torch.randn(B, C, D, H, W)",
    ),
    "pointwise_relu": dict(
        init="        self.c = nn.Conv2d(C, 10, 1)",
        body="torch.relu(self.c(x))",
    ),
    "separable": dict(  # depthwise then pointwise: the second conv reads the first's output from the workspace
        sets=SAME_C,
        init="        self.dw = nn.Conv2d(C, C, 3, padding=1, groups=C, bias=False)\n"
        "        self.pw = nn.Conv2d(C, 7, 1)",
        body="self.pw(self.dw(x))",
    ),
    "conv_relu_maxpool": dict(
        init="        self.c = nn.Conv2d(C, 6, 3, padding=1)",
        body="F.max_pool2d(torch.relu(self.c(x)), 2)",
        sets=[{"B": 1, "C": 4, "H": 8, "W": 8}, {"B": 3, "C": 2, "H": 2, "W": 13}],
    ),
    "transposed2d": dict(
        init="        self.c = nn.ConvTranspose2d(C, 4, 3, stride=2, padding=1, output_padding=1)",
        body="torch.sigmoid(self.c(x))",
    ),
    "transposed1d_groups": dict(
        sizes={"B": 2, "C": 4, "L": 11},
        sets=[{"B": 1, "C": 4, "L": 30}],
        init="        self.c = nn.ConvTranspose1d(C, 6, 4, stride=3, padding=1, groups=2, dilation=2)",
        body="self.c(x)",
        inputs="torch.randn(B, C, L)",
    ),
    "transposed3d": dict(  # mixed strides, a 4-tap axis at stride 2 (a 2x upsampler's), no padding on one axis
        sizes={"B": 2, "C": 3, "D": 4, "H": 5, "W": 6},
        sets=[{"B": 1, "D": 3, "H": 7, "W": 5}],
        init="        self.c = nn.ConvTranspose3d(C, 5, (4, 3, 4), stride=(2, 1, 2), padding=(1, 0, 1))",
        body="self.c(x)",
        inputs="torch.randn(B, C, D, H, W)",
    ),
    "transposed_sparse": dict(  # kernel narrower than the stride: most output phases have no taps (bias only)
        sizes={"B": 2, "C": 3, "H": 5, "W": 4},
        sets=[{"B": 1, "H": 3, "W": 7}],
        init="        self.c = nn.ConvTranspose2d(C, 5, (1, 2), stride=(2, 3), padding=(0, 1), output_padding=(1, 2))",
        body="self.c(x)",
    ),
    "transposed_dilated": dict(  # KernelBench's 81 in small: stride 5, dilation 2 (a tap or none a phase); 2 and 2
        sizes={"B": 2, "C": 3, "H": 3, "W": 4},
        sets=[{"B": 1, "H": 2, "W": 6}],
        init="        self.c = nn.ConvTranspose2d(C, 6, 3, stride=(5, 2), padding=(1, 1), dilation=(2, 2))",
        body="torch.relu(self.c(x))",
    ),
    "transposed_dilated3d": dict(  # strides 4, 2, 1 against dilations 2, 3, 2: every other tap, every other, all
        sizes={"B": 2, "C": 4, "D": 3, "H": 4, "W": 5},
        sets=[{"B": 1, "D": 2, "H": 5, "W": 3}],
        init="        self.c = nn.ConvTranspose3d(C, 18, (2, 3, 3), stride=(4, 2, 1), padding=(1, 2, 0),"
        " dilation=(2, 3, 2), groups=2)",
        body="self.c(x)",
        inputs="torch.randn(B, C, D, H, W)",
    ),
    "big_kernel3d": dict(  # 729 taps: more than the implicit variants' shared table holds
        sizes={"B": 2, "C": 2, "D": 9, "H": 10, "W": 11},
        sets=[{"B": 1, "D": 10, "H": 9, "W": 9}],
        init="        self.c = nn.Conv3d(C, 3, 9)",
        body="self.c(x)",
        inputs="torch.randn(B, C, D, H, W)",
    ),
    "h_conv2d": _int_bf16_conv(
        module="Conv2d(C, 6, 3, padding=1)",
        body="torch.relu(self.c(x))",
    ),
    "h_conv_wide": _int_bf16_conv(  # K = 8 x 9 = 72 and 16 x 9: the weights load as 16-byte words (the AVEC instance)
        sizes={"B": 2, "C": 8, "H": 9, "W": 11},
        sets=[{"B": 1, "C": 16, "H": 8, "W": 8}, {"B": 3, "C": 8, "H": 1, "W": 13}],
        module="Conv2d(C, 24, 3, padding=1)",
        body="self.c(x)",
    ),
    "h_conv_deep": _int_bf16_conv(  # 136 output channels (three 64-row tiles), K = 16 x 9, a residual tail
        sizes={"B": 2, "C": 16, "H": 6, "W": 7},
        sets=[{"B": 1, "C": 16, "H": 11, "W": 3}],
        module="Conv2d(C, 136, 3, padding=1)",
        body="torch.relu(self.c(x) + y)",
        args="x, y",
        inputs="torch.randint(-2, 3, (B, C, H, W)).float(), torch.randint(-2, 3, (B, 136, H, W)).float()",
    ),
    "h_conv_tiny": _int_bf16_conv(  # output planes of 4, 3 and 1 pixels: a thread's next column can be two images on
        sizes={"B": 9, "C": 8, "H": 2, "W": 2},
        sets=[{"B": 11, "C": 16, "H": 1, "W": 3}, {"B": 40, "C": 8, "H": 1, "W": 1}],
        module="Conv2d(C, 20, 3, padding=1)",
        body="self.c(x)",
    ),
    "h_pointwise_wide": _int_bf16_conv(  # 24 and 128 pixels an image: B by 16-byte copies; 13: the gather
        sizes={"B": 2, "C": 72, "H": 4, "W": 6},
        sets=[{"B": 1, "C": 8, "H": 8, "W": 16}, {"B": 3, "C": 4, "H": 1, "W": 13}],
        module="Conv2d(C, 40, 1)",
        body="torch.relu(self.c(x))",
    ),
    "h_transposed": _int_bf16_conv(  # stride 2 with output padding, dilation 2 along W: half goes to the gather
        module="ConvTranspose2d(C, 6, 3, stride=2, padding=1, output_padding=1, dilation=(1, 2))",
        body="torch.relu(self.c(x))",
    ),
    "h_pointwise": _int_bf16_conv(
        module="Conv2d(C, 20, 1, bias=False)",
        body="self.c(x)",
    ),
    "h_depthwise": _int_bf16_conv(sets=SAME_C, module="Conv2d(C, C, 3, padding=1, groups=C)", body="self.c(x)"),
    "f16_conv2d": dict(
        dtype="float16",
        init="        self.c = nn.Conv2d(C, 6, 3, padding=1)",
        body="self.c(x)",
    ),
}


def write_task(folder: Path, name: str) -> Path:
    spec: dict[str, Any] = {
        "dtype": "float32",
        "sizes": {"B": 2, "C": 4, "H": 9, "W": 11},
        "sets": SETS_2D,
        "args": "x",
        "inputs": "torch.randn(B, C, H, W)",
    }
    spec.update(SPECS[name])
    text = TASK.format(
        sizes="\n".join(f"{k} = {v}" for k, v in spec["sizes"].items()),
        dtype=spec["dtype"],
        sets=repr(spec["sets"]),
        init=spec["init"],
        args=spec["args"],
        body=spec["body"],
        inputs=spec["inputs"],
    )
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    folder = tmp_path_factory.mktemp("conv-tasks")
    return {name: load_task(write_task(folder, name)) for name in SPECS}


_GRAPHS: dict[str, list[Any]] = {}
_KERNELS: dict[tuple[str, int], TemplateKernels] = {}


def kernels_of(tasks: dict[str, Task], name: str, facts: DeviceFacts = FACTS) -> TemplateKernels:
    key = (name, facts.sm_count, facts.arch)
    if key not in _KERNELS:
        if name not in _GRAPHS:
            _GRAPHS[name] = capture_all(tasks[name])
        _KERNELS[key] = TemplateKernels(tasks[name], make_plan(list(_GRAPHS[name])), facts)
    return _KERNELS[key]


# -- capture and planning --------------------------------------------------------------------------
PLANS = {
    "conv2d_bn_relu": "conv[conv sub mul mul add relu add]",  # eval batch norm: statistics recomputed per element
    "conv2d_strided": "conv[conv]",
    "conv1d": "conv[conv mul mul erf add mul]",
    "conv3d_groups": "conv[conv mul]",
    "depthwise_residual": "conv[conv add]",
    "few_in_many_out3d": "conv[conv]",
    "pointwise_relu": "conv[conv relu]",
    "separable": "conv[conv] → conv[conv]",
    "conv_relu_maxpool": "conv[conv relu] → pool[max_pool]",
    "transposed2d": "conv[conv sigmoid]",
    "h_conv2d": "conv[conv relu]",
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_planning_fuses_the_epilogue(tasks: dict[str, Task], name: str) -> None:
    plan = kernels_of(tasks, name).plan
    assert plan.describe() == PLANS[name]
    conv = plan.groups[0]
    node = conv.graph.nodes[conv.nodes[0]]
    assert node.op == "conv" and set(node.inputs) <= set(conv.graph.inputs), "operands read where they are stored"
    again = make_plan(list(_GRAPHS[name]))
    assert again.describe() == plan.describe() and [g.spec for g in again.groups] == [g.spec for g in plan.groups]


def test_the_conv_node_carries_the_hyper_parameters(tasks: dict[str, Task]) -> None:
    def attrs(name: str) -> dict[str, Any]:
        group = kernels_of(tasks, name).plan.groups[0]
        return dict(group.graph.nodes[group.nodes[0]].attrs)

    strided = attrs("conv2d_strided")
    assert strided["stride"] == (2, 1) and strided["padding"] == (2, 1) and strided["dilation"] == (2, 1)
    assert strided["bias"] is False and strided["groups"] == 1 and strided["transposed"] is False
    t1 = attrs("transposed1d_groups")
    assert t1["transposed"] and t1["groups"] == 2 and t1["stride"] == (3,) and t1["spatial"] == 1
    assert attrs("transposed2d")["output_padding"] == (1, 1)
    assert attrs("conv3d_groups")["spatial"] == 3 and attrs("depthwise_residual")["groups"] == 4


def test_the_rule_picks_the_variant(tasks: dict[str, Task]) -> None:
    first = {name: kernels_of(tasks, name).default()[0] for name in SPECS}
    assert first["conv2d_bn_relu"] == GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)  # 6 output channels
    ampere = DeviceFacts(arch="sm_80")
    assert kernels_of(tasks, "conv2d_bn_relu", ampere).default()[0] == GroupConfig.of(
        "implicit", bm=64, bn=64, bk=8, tm=8, tn=4
    )
    for name in ("transposed2d", "transposed1d_groups", "transposed_dilated", "transposed_dilated3d"):
        assert first[name].variant == "gather", name  # transposed, few products per output
    # 4 output channels; stride 2 along W: a thread owns both phases of a pair of outputs
    assert first["transposed2d"] == GroupConfig.of("gather", threads=256, co=4, wide=1)
    assert first["transposed1d_groups"] == GroupConfig.of("gather", threads=256, co=4)  # stride 3: a column a thread
    assert first["transposed_dilated3d"] == GroupConfig.of("gather", threads=256, co=16)  # 9 a group: 16, one partial
    depthwise = ("depthwise_residual", "depthwise_multiplier", "depthwise3d", "depthwise_wide_kernel", "h_depthwise")
    for name in (*depthwise, "pointwise_relu"):
        assert first[name].variant == "stencil", name  # depthwise, or K = 4 < 32 terms
    # the tile follows the output plane: 16 rows for 9 x 11 outputs (32 would idle most threads)
    assert first["depthwise_residual"] == GroupConfig.of("stencil", tx=32, ty=4, rows=4)
    assert first["big_kernel3d"].variant == "direct"  # 729 taps: more weights than a thread holds
    assert first["h_conv2d"] == GroupConfig.of("wgmma", bm=64, bn=64) and first["f16_conv2d"].variant == "wgmma"
    assert kernels_of(tasks, "h_conv2d", ampere).default()[0].variant == "mma"
    for name in SPECS:
        k = kernels_of(tasks, name)
        group = k.plan.groups[0]
        seeds = k.templates.of(group).seeds(group, FACTS)
        assert seeds[0] == k.default()[0] and 3 <= len(seeds) <= 4 and len(set(seeds)) == len(seeds)
        assert all(k.spaces[0].reason_invalid(s) is None for s in seeds), (name, seeds)


def test_a_few_term_conv_with_many_outputs_is_also_seeded_with_an_implicit_gemm(tasks: dict[str, Task]) -> None:
    """The stencil reads the input again for every output channel; with 16 or more of them an implicit GEMM is
    timed beside it (KernelBench's 59). Depthwise convs and few outputs keep the stencil's seeds alone."""
    seeds_of = {}
    for name in ("few_in_many_out3d", "depthwise3d", "pointwise_relu"):
        k = kernels_of(tasks, name)
        group = k.plan.groups[0]
        seeds_of[name] = k.templates.of(group).seeds(group, FACTS)
    few = seeds_of["few_in_many_out3d"]
    assert few[0].variant == "stencil" and few[1].variant == "implicit"
    assert all(s.variant != "implicit" for s in seeds_of["depthwise3d"])  # one input channel a group
    assert all(s.variant != "implicit" for s in seeds_of["pointwise_relu"])  # 10 output channels


def test_the_stencil_tile_follows_the_output_plane() -> None:
    """64 columns by up to 16 rows on planes wider than 32 columns (the measured winner on the suite's
    depthwise tasks), 32 columns by up to 32 rows on narrower ones, widened to 128 threads on flat planes."""
    from optiml.templates.conv.stencil import tile

    def shape(config: GroupConfig) -> tuple[int, int, int]:
        return int(config.get("tx")), int(config.get("ty")), int(config.get("rows"))

    assert shape(tile(112, 112)) == (64, 4, 4) and shape(tile(80, 80)) == (64, 4, 4)
    assert shape(tile(9, 11)) == (32, 4, 4) and shape(tile(200, 20)) == (32, 8, 4)
    assert shape(tile(1, 4096)) == (128, 1, 1) and shape(tile(3, 1000)) == (128, 1, 4)


def test_the_rule_takes_warp_group_mmas_on_hopper_and_tf32x3_where_its_wide_tiles_fill_m_and_the_sms() -> None:
    """The suite's fp32 convolutions: on an H200 the warp-group 3xTF32 kernel, 128 x 128 from the input's
    channels-last copy (64 x 64 gathered for the 64-channel 3-D one; template_sweep_conv_tf32x3_wgmma.json,
    template_sweep_conv_epilogue_*), the rule's kernel before (gathering, 128 x 64) its next seed; on an A100 (no
    warp-group MMAs, TF32 ones) 2-D ones with >= 128 output channels and enough tiles get tf32x3 128x128, the 3-D
    one stays implicit with a narrow tf32x3 seed; a GPU without TF32 MMAs keeps implicit."""
    root = Path(__file__).resolve().parents[2] / "tasks"
    ampere = DeviceFacts(arch="sm_80")
    for path in (root / "conv2d.py", root / "compute" / "conv2d_bias_relu.py", root / "compute" / "conv2d_strided.py"):
        k = TemplateKernels.for_task(load_task(path), FACTS)
        assert k.default()[0] == GroupConfig.of("tf32x3_wgmma", bm=128, bn=128, nhwc=1), path.name
        group = k.plan.groups[0]
        second = GroupConfig.of("tf32x3_wgmma", bm=128, bn=64, staged=0)  # the rule's kernel before, raced
        assert k.templates.of(group).seeds(group, FACTS)[1] == second
        k = TemplateKernels.for_task(load_task(path), ampere)
        assert k.default()[0] == GroupConfig.of("tf32x3", bm=128, bn=128, bk=16, wm=2, wn=4), path.name
        older = TemplateKernels.for_task(load_task(path), DeviceFacts(arch="sm_75"))
        assert older.default()[0].variant == "implicit", path.name
    task = load_task(root / "compute" / "conv3d.py")
    assert TemplateKernels.for_task(task, FACTS).default()[0] == GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)
    conv3d = TemplateKernels.for_task(task, ampere)
    assert conv3d.default()[0].variant == "implicit"
    group = conv3d.plan.groups[0]
    seeds = conv3d.templates.of(group).seeds(group, ampere)
    assert GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=2, wn=4) in seeds


BIG_IMAGE = """import torch
import torch.nn as nn

B, C, D, H, W = 1, 64, 330, 330, 330  # 64 x 330^3 > 2^31 elements in one image
OPTIML = {"dtype": "bfloat16", "shape_sets": [{"B": 1, "C": 8, "D": 5, "H": 6, "W": 7}]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(C, 64, 3, padding=1)

    def forward(self, x):
        return self.c(x)


def get_inputs():
    return [torch.randn(B, C, D, H, W)]


def get_init_inputs():
    return []
"""


def test_warp_group_kernels_are_left_out_where_an_image_overflows_their_32_bit_offsets(tmp_path: Path) -> None:
    """The warp-group kernels address an image's channels of a group in 32 bits (their launch returns -4
    beyond): a shape set past that gets the mma variant by rule, not a kernel that cannot run."""
    path = tmp_path / "big_conv3d.py"
    path.write_text(BIG_IMAGE, encoding="utf-8")
    k = TemplateKernels.for_task(load_task(path), FACTS)
    assert "wgmma" not in k.spaces[0].variants
    assert k.default()[0].variant == "mma"


def test_the_space_rejects_bad_tiles(tasks: dict[str, Task]) -> None:
    fp32 = kernels_of(tasks, "conv2d_bn_relu").spaces[0]
    bf16 = kernels_of(tasks, "h_conv2d").spaces[0]
    assert fp32.variants == ("implicit", "tf32x3", "tf32x3_wgmma", "stencil", "direct")
    assert bf16.variants == ("mma", "wgmma", "stencil", "direct")
    older = kernels_of(tasks, "conv2d_bn_relu", DeviceFacts(arch="sm_75")).spaces[0]
    assert older.variants == ("implicit", "stencil", "direct")
    ampere = kernels_of(tasks, "h_conv2d", DeviceFacts(arch="sm_80")).spaces[0]
    assert ampere.variants == ("mma", "stencil", "direct")  # warp-group MMAs are Hopper's
    for config in [
        GroupConfig.of("wgmma", bm=64, bn=256),  # 128 threads for 256 columns
        GroupConfig.of("wgmma", bm=192, bn=64),
        GroupConfig.of("wgmma", bm=128, bn=96),
    ]:
        assert bf16.reason_invalid(config) is not None, config
    assert bf16.reason_invalid(GroupConfig.of("wgmma", bm=128, bn=256)) is None
    assert fp32.reason_invalid(GroupConfig.of("tf32x3_wgmma", bm=128, bn=256)) is not None  # 256 accumulators
    assert fp32.reason_invalid(GroupConfig.of("tf32x3_wgmma", bm=128, bn=128)) is None
    tf32 = GroupConfig.of("tf32x3", bm=128, bn=128, bk=16, wm=2, wn=4)
    assert fp32.reason_invalid(tf32) is None
    for why, config in {
        "shared memory": tf32.with_params(bk=32),  # 2 x 256 rows x 36 floats + the tap table
        "accumulators": tf32.with_params(wn=2),  # 64 x 64 warp tiles
        "columns": GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=1, wn=2),  # 64 threads, 128 columns
    }.items():
        assert fp32.reason_invalid(config) is not None, why
    transposed = kernels_of(tasks, "transposed2d").spaces[0]  # fp32: the output phases' GEMMs
    assert transposed.variants == ("implicit", "tf32x3", "gather", "direct")
    # the gather's weights in shared memory: 3x3 taps x 4 channels x 16 output channels (2304 B) fit 227 KiB, not 2
    assert transposed.reason_invalid(GroupConfig.of("gather", threads=256, co=16)) is None
    sparse = kernels_of(tasks, "transposed_sparse").spaces[0]  # stride 3 along W: 3 columns a thread
    assert sparse.reason_invalid(GroupConfig.of("gather", threads=256, co=8, wide=1)) is None  # 24 accumulators
    assert sparse.reason_invalid(GroupConfig.of("gather", threads=256, co=16, wide=1)) is not None  # 48
    stride_one = kernels_of(tasks, "transposed_dilated3d").spaces[0]  # stride 1 along W: nothing to widen
    assert stride_one.reason_invalid(GroupConfig.of("gather", threads=256, co=4, wide=1)) is not None
    small = DeviceFacts(sm_count=7, smem_per_block_optin=2 * 1024)
    assert (
        kernels_of(tasks, "transposed2d", small).spaces[0].reason_invalid(GroupConfig.of("gather", threads=256, co=16))
    )
    assert transposed.reason_invalid(tf32) is not None  # 48 KiB of tiles and tables, and the phase's tap indices
    assert transposed.reason_invalid(GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=2, wn=4)) is None
    assert kernels_of(tasks, "big_kernel3d").spaces[0].variants == ("direct",)
    implicit = GroupConfig.of("implicit", bm=128, bn=128, bk=8, tm=8, tn=8)
    assert fp32.reason_invalid(implicit) is None
    for config in [
        implicit.with_params(tm=4, tn=4),  # 1024 threads
        GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=8, tn=8),  # 16 threads
        GroupConfig.of("implicit", bm=32, bn=128, bk=8, tm=8, tn=8),  # 64 threads cannot each own a column of 128
        implicit.with_params(bm=96),
    ]:
        assert fp32.reason_invalid(config) is not None, config
    mma = GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=4)
    assert bf16.reason_invalid(mma) is None
    assert bf16.reason_invalid(mma.with_params(wm=1, wn=2)) is not None  # 64 threads for 128 columns
    assert bf16.reason_invalid(mma.with_params(bm=64, wm=2, wn=2)) is not None  # 48 prefetch registers: spills
    assert "unknown variant" in (bf16.reason_invalid(implicit) or "")
    with pytest.raises(TemplateError):
        kernels_of(tasks, "h_conv2d").render([implicit])


def test_render_is_deterministic_prefixed_and_size_free(tasks: dict[str, Task]) -> None:
    for name in ("conv2d_bn_relu", "conv3d_groups", "transposed1d_groups", "h_conv2d", "separable"):
        k = kernels_of(tasks, name)
        for configs in k.seeds():
            a = k.render(configs).code
            assert a == k.render(configs).code
            conv = a[a.index("// ---- g0:") : a.index("OPTIML_EXPORT int optiml_forward")]
            defined = re.findall(r"(?:__global__ void __launch_bounds__\(\d+(?:, \d+)?\)|static \w+)\s+(\w+)\(", conv)
            defined += re.findall(r"struct (\w+) \{", conv)
            assert defined and all(n.startswith(("g0_", "g1_")) for n in defined), defined
            if configs[0].variant == "stencil":  # the kernel's extents compiled in (unrolled taps), guarded at launch
                assert "if (P.KD != 1 || P.KH != 3 || P.KW != 3) return -5;" in conv, name
                kernel = conv[conv.index("__global__ void __launch_bounds__") : conv.index("static int g0_launch")]
                conv = conv.replace(kernel, "")
            conv = re.sub(r'asm volatile\("\{.*?\);', "", conv, flags=re.S)  # MMA operand lists: d[9], %9
            for value in SPECS[name].get("sizes", {"H": 9, "W": 11}).values():
                if value > 8:
                    assert not re.search(rf"(?<![\w.%]){value}(?![\w.])", conv), (name, value)
            half = name.startswith("h_")
            report = screen_source(a, fp32_strict=not half)
            tf32 = "tf32x3" in a  # flagged, not rejected: verification decides (the `tf32` rule)
            assert not report.rejected and {f.rule for f in report.flags} == ({"tf32"} if tf32 else set()), (
                report.message()
            )


def test_an_unsupported_convolution_is_one_line(tmp_path: Path) -> None:
    from optiml.templates.kernels import template_kernels

    SPECS["_f64"] = dict(SPECS["conv2d_strided"], dtype="float64")
    try:
        task = load_task(write_task(tmp_path, "_f64"))
    finally:
        del SPECS["_f64"]
    with pytest.raises(OptimlError) as info:
        template_kernels(task)
    message = str(info.value)
    assert "no template for float64 convolutions" in message and "\n" not in message


# -- nvcc builds -------------------------------------------------------------------------------------
BUILDS: dict[str, list[tuple[str, GroupConfig]]] = {
    "implicit": [
        ("conv2d_bn_relu", GroupConfig.of("implicit", bm=128, bn=128, bk=8, tm=8, tn=8)),
        ("conv3d_groups", GroupConfig.of("implicit", bm=64, bn=128, bk=16, tm=8, tn=8)),
        ("pointwise_relu", GroupConfig.of("implicit", bm=64, bn=64, bk=8, tm=8, tn=4)),
        ("transposed1d_groups", GroupConfig.of("implicit", bm=64, bn=128, bk=16, tm=8, tn=8)),
    ],
    "direct": [
        ("depthwise_residual", GroupConfig.of("direct", threads=256)),
        ("transposed2d", GroupConfig.of("direct", threads=128)),
        ("conv1d", GroupConfig.of("direct", threads=64)),
    ],
    "gather": [
        ("transposed2d", GroupConfig.of("gather", threads=256, co=16)),
        ("transposed_dilated", GroupConfig.of("gather", threads=128, co=8)),
        ("transposed_dilated3d", GroupConfig.of("gather", threads=256, co=4)),
        ("h_transposed", GroupConfig.of("gather", threads=256, co=8)),
        ("transposed2d", GroupConfig.of("gather", threads=256, co=16, wide=1)),
        ("transposed_sparse", GroupConfig.of("gather", threads=128, co=8, wide=1)),
    ],
    "stencil": [
        ("depthwise_residual", GroupConfig.of("stencil", tx=32, ty=8, rows=4)),
        ("depthwise_multiplier", GroupConfig.of("stencil", tx=64, ty=2, rows=8)),
        ("conv3d_groups", GroupConfig.of("stencil", tx=32, ty=4, rows=2)),
        ("h_depthwise", GroupConfig.of("stencil", tx=128, ty=1, rows=1)),
    ],
    "tf32x3": [
        ("conv2d_bn_relu", GroupConfig.of("tf32x3", bm=128, bn=128, bk=16, wm=2, wn=4)),
        ("conv3d_groups", GroupConfig.of("tf32x3", bm=64, bn=64, bk=32, wm=2, wn=2)),
        ("pointwise_relu", GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=2, wn=4)),
    ],
    "mma": [
        ("h_conv2d", GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=4)),
        ("h_pointwise", GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2)),
        ("f16_conv2d", GroupConfig.of("mma", bm=128, bn=64, bk=32, wm=4, wn=2)),
    ],
    "wgmma": [
        ("h_conv2d", GroupConfig.of("wgmma", bm=128, bn=64)),
        ("h_conv_deep", GroupConfig.of("wgmma", bm=128, bn=256)),
        ("h_pointwise", GroupConfig.of("wgmma", bm=64, bn=128)),
        ("f16_conv2d", GroupConfig.of("wgmma", bm=128, bn=128)),
    ],
    "tf32x3_wgmma": [
        ("conv2d_bn_relu", GroupConfig.of("tf32x3_wgmma", bm=128, bn=64)),
        ("conv3d_groups", GroupConfig.of("tf32x3_wgmma", bm=64, bn=128)),
        ("pointwise_relu", GroupConfig.of("tf32x3_wgmma", bm=128, bn=128)),
    ],
}


@pytest.mark.nvcc
def test_every_variant_compiles(tasks: dict[str, Task], tmp_path: Path) -> None:
    sources = []
    for cases in BUILDS.values():
        units = []
        for name, config in cases:
            k = kernels_of(tasks, name)
            units.append(k.render([config, *k.default()[1:]]).code)
        sources.append(KernelSource(combined(units)))
    results = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache")).compile_many(sources)
    for name, result in zip(BUILDS, results, strict=True):
        assert result.ok, f"{name}: {result.error_summary()}"
        warnings = [d for d in result.diagnostics if d.severity == "warning" and "ws_" not in d.message]
        assert not warnings, result.log[-3000:]
        names = ("_implicit", "_mma_conv", "_tf32", "_direct", "_gather", "_stencil", "_wgmma_conv", "_wreorder")
        kernels = [r for r in result.resources if any(k in r.name for k in names)]
        assert kernels, name
        for res in kernels:
            assert not res.spills and res.stack_bytes == 0, (name, res)


def test_per_channel_epilogue_leaves_share_one_axis_index(tasks: dict[str, Task]) -> None:
    """Eval batch norm's four [C] vectors are indexed by the output's channel: one 32-bit divide and
    modulo an element, shared by the four (the general offset took a 64-bit pair per dim and leaf)."""
    code = kernels_of(tasks, "conv2d_bn_relu").render([GroupConfig.of("implicit", bm=64, bn=64, bk=8, tm=8, tn=4)]).code
    epi1 = code[code.index("void g0_epi1(") : code.index("struct g0_pair")]
    assert epi1.count("g0_axis(r, ") == 1 and "_roff" not in code
    assert epi1.count("[ax0 * P.lst") == 4


# -- numerics on the CPU (g++ and the fiber emulator) ------------------------------------------------
FP32_CASES: list[tuple[str, list[GroupConfig]]] = [
    (
        "conv2d_bn_relu",
        [
            GroupConfig.of("implicit", bm=64, bn=64, bk=8, tm=8, tn=4),
            GroupConfig.of("implicit", bm=32, bn=32, bk=16, tm=4, tn=4),
            GroupConfig.of("direct", threads=64),
        ],
    ),
    (
        "conv2d_strided",
        [GroupConfig.of("implicit", bm=64, bn=128, bk=16, tm=8, tn=8), GroupConfig.of("direct", threads=128)],
    ),
    ("conv1d", [GroupConfig.of("implicit", bm=32, bn=64, bk=8, tm=4, tn=8), GroupConfig.of("direct", threads=64)]),
    (
        "conv3d_groups",
        [GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4), GroupConfig.of("direct", threads=64)],
    ),
    (
        "depthwise_residual",
        [GroupConfig.of("direct", threads=64), GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4)],
    ),
    (
        "pointwise_relu",
        [GroupConfig.of("implicit", bm=32, bn=64, bk=16, tm=4, tn=8), GroupConfig.of("direct", threads=64)],
    ),
    ("few_in_many_out3d", [GroupConfig.of("implicit", bm=64, bn=64, bk=8, tm=8, tn=4)]),  # K = 27: a partial k tile
    ("separable", [GroupConfig.of("direct", threads=64)]),
    ("conv_relu_maxpool", [GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4)]),
    (
        "transposed2d",
        [GroupConfig.of("direct", threads=64), GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4)],
    ),
    (
        "transposed1d_groups",
        [GroupConfig.of("direct", threads=128), GroupConfig.of("implicit", bm=32, bn=64, bk=16, tm=4, tn=8)],
    ),
    (
        "transposed3d",
        [GroupConfig.of("direct", threads=128), GroupConfig.of("implicit", bm=32, bn=64, bk=8, tm=4, tn=8)],
    ),
    (
        "transposed_sparse",
        [GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4), GroupConfig.of("direct", threads=64)],
    ),
    ("big_kernel3d", [GroupConfig.of("direct", threads=64)]),
    # the output-stationary gather: channel chunks wider and narrower than the group's (the last one partial),
    # dilations the stride does and does not divide, phases without taps, output padding, 1-D to 3-D
    ("transposed2d", [GroupConfig.of("gather", threads=128, co=4), GroupConfig.of("gather", threads=256, co=16)]),
    ("transposed1d_groups", [GroupConfig.of("gather", threads=128, co=4)]),
    ("transposed3d", [GroupConfig.of("gather", threads=128, co=8)]),
    ("transposed_sparse", [GroupConfig.of("gather", threads=128, co=4)]),
    ("transposed_dilated", [GroupConfig.of("gather", threads=256, co=4), GroupConfig.of("gather", threads=128, co=8)]),
    (
        "transposed_dilated3d",
        [GroupConfig.of("gather", threads=128, co=4), GroupConfig.of("gather", threads=128, co=16)],
    ),
    # a thread owning a stride's worth of consecutive outputs along the last axis (one of each phase): stride 2 with
    # output padding (an odd last column), 3 with dilation 2, 2 against dilation 2 (one phase without taps), 3
    # with a 2-tap kernel
    (
        "transposed2d",
        [GroupConfig.of("gather", threads=128, co=4, wide=1), GroupConfig.of("gather", threads=256, co=16, wide=1)],
    ),
    ("transposed1d_groups", [GroupConfig.of("gather", threads=128, co=8, wide=1)]),
    ("transposed3d", [GroupConfig.of("gather", threads=128, co=8, wide=1)]),
    ("transposed_sparse", [GroupConfig.of("gather", threads=128, co=4, wide=1)]),
    ("transposed_dilated", [GroupConfig.of("gather", threads=256, co=16, wide=1)]),
    # the stencil: depthwise (a channel multiplier, stride, dilation, 3-D), several input channels a group
    (
        "depthwise_residual",
        [GroupConfig.of("stencil", tx=32, ty=2, rows=2), GroupConfig.of("stencil", tx=32, ty=1, rows=8)],
    ),
    ("depthwise_multiplier", [GroupConfig.of("stencil", tx=32, ty=2, rows=4), GroupConfig.of("direct", threads=64)]),
    ("depthwise3d", [GroupConfig.of("stencil", tx=32, ty=2, rows=2)]),
    (
        "depthwise_wide_kernel",
        [GroupConfig.of("stencil", tx=32, ty=4, rows=4), GroupConfig.of("stencil", tx=64, ty=1, rows=8)],
    ),
    ("conv2d_strided", [GroupConfig.of("stencil", tx=32, ty=4, rows=2)]),
    ("conv1d", [GroupConfig.of("stencil", tx=64, ty=1, rows=1)]),
    ("conv3d_groups", [GroupConfig.of("stencil", tx=32, ty=2, rows=1)]),
    ("separable", [GroupConfig.of("stencil", tx=32, ty=1, rows=4)]),
    # 3xTF32 on tensor cores: strided, grouped 3-D, pointwise, and a fused tail
    ("conv2d_strided", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2)]),
    ("conv3d_groups", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=32, wm=2, wn=2)]),
    ("pointwise_relu", [GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=2, wn=4)]),
    ("conv2d_bn_relu", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=1, wn=2)]),
    # 3xTF32 over a transposed convolution's output phases: 2-D with output padding, 1-D grouped and
    # dilated, 3-D mixed strides, phases without taps
    ("transposed2d", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2)]),
    ("transposed1d_groups", [GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=2, wn=4)]),
    ("transposed3d", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=32, wm=2, wn=2)]),
    ("transposed_sparse", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=1, wn=2)]),
    # 3xTF32 on warp-group MMAs: strided and dilated, 1-D, grouped 3-D, pointwise, a fused tail, several
    # column tiles and k slices
    ("conv2d_strided", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)]),
    ("conv1d", [GroupConfig.of("tf32x3_wgmma", bm=128, bn=64)]),
    ("conv3d_groups", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=128)]),
    ("pointwise_relu", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)]),
    ("conv2d_bn_relu", [GroupConfig.of("tf32x3_wgmma", bm=128, bn=128)]),
    # 3xTF32 from the input's channels-last copy (big and small parts): several slices (C = 16, 8), a fallback
    # to the register path where the channels are not a multiple of a chunk (C = 6), strides and dilation
    (
        "conv2d_deep",
        [GroupConfig.of("tf32x3_wgmma", bm=64, bn=64, nhwc=1), GroupConfig.of("tf32x3_wgmma", bm=128, bn=128, nhwc=1)],
    ),
    ("conv2d_strided", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=128, nhwc=1)]),
    # the accumulators stored from their fragments (staged=0) rather than through shared memory
    ("conv2d_bn_relu", [GroupConfig.of("tf32x3_wgmma", bm=128, bn=128, staged=0)]),
]
BF16_CASES: list[tuple[str, list[GroupConfig]]] = [
    (
        "h_transposed",
        [
            GroupConfig.of("gather", threads=256, co=8),
            GroupConfig.of("gather", threads=128, co=4),
            GroupConfig.of("gather", threads=128, co=8, wide=1),
        ],
    ),
    (
        "h_conv2d",
        [GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2), GroupConfig.of("direct", threads=64)],
    ),
    ("h_pointwise", [GroupConfig.of("mma", bm=64, bn=128, bk=32, wm=2, wn=4)]),
    ("h_conv_wide", [GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2)]),
    # warp-group MMAs: scalar weights (K = 36, 18), 16-byte ones over several k slices (K = 144), a
    # pointwise conv, many output channels over two warp groups, a residual tail
    ("h_conv2d", [GroupConfig.of("wgmma", bm=64, bn=64), GroupConfig.of("wgmma", bm=128, bn=256)]),
    ("h_conv_wide", [GroupConfig.of("wgmma", bm=64, bn=128), GroupConfig.of("wgmma", bm=128, bn=64)]),
    ("h_pointwise", [GroupConfig.of("wgmma", bm=64, bn=64)]),
    ("h_pointwise_wide", [GroupConfig.of("wgmma", bm=64, bn=128), GroupConfig.of("wgmma", bm=128, bn=64)]),
    ("h_conv_deep", [GroupConfig.of("wgmma", bm=64, bn=64), GroupConfig.of("wgmma", bm=128, bn=128)]),
    # from the input's channels-last copy: 16-byte copies of one tap's channels (K = 72, 144: one and two slices;
    # the 8-channel shape set's chunks are whole taps), a residual tail, several column tiles
    ("h_conv_wide", [GroupConfig.of("wgmma", bm=64, bn=128, nhwc=1), GroupConfig.of("wgmma", bm=128, bn=64, nhwc=1)]),
    ("h_conv_deep", [GroupConfig.of("wgmma", bm=128, bn=256, nhwc=1), GroupConfig.of("wgmma", bm=64, bn=64, nhwc=1)]),
    # output planes smaller than a thread's step between columns (the epilogue walks columns across images)
    ("h_conv_tiny", [GroupConfig.of("wgmma", bm=64, bn=64), GroupConfig.of("wgmma", bm=64, bn=128, nhwc=1)]),
    ("h_conv_tiny", [GroupConfig.of("wgmma", bm=64, bn=64, staged=0), GroupConfig.of("wgmma", bm=128, bn=256)]),
    ("h_conv_deep", [GroupConfig.of("wgmma", bm=128, bn=128, nhwc=1, staged=0)]),
    (
        "h_depthwise",
        [
            GroupConfig.of("direct", threads=128),
            GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2),
            GroupConfig.of("stencil", tx=32, ty=2, rows=4),
        ],
    ),
]


def _units(
    tasks: dict[str, Task], cases: list[tuple[str, list[GroupConfig]]], facts: DeviceFacts = EMULATED
) -> list[str]:
    """One unit per (task, config): the first conv's config, every later kernel's default."""
    units = []
    for name, configs in cases:
        k = kernels_of(tasks, name, facts)
        units += [k.render([c, *k.default()[1:]]).code for c in configs]
    return units


def _check(tasks: dict[str, Task], lib: Path, cases: list[tuple[str, list[GroupConfig]]], exact: bool) -> list[str]:
    from optiml.evaluate.runtime import TaskRuntime

    failures = []
    k = 0
    for name, configs in cases:
        task = tasks[name]
        runtime = TaskRuntime(task, "cpu")
        for config in configs:
            for shape_set in range(task.num_shape_sets):
                case = runtime.case(7 + shape_set, shape_set)
                got = run_emulated(lib, k, case.abi_inputs, case.expected)
                for g, want in zip(got, case.expected, strict=True):
                    label = f"{name} {config.label()} shape set {shape_set}"
                    if exact:
                        if not np.array_equal(g, _bits(want)):
                            failures.append(f"{label}: {int(np.sum(g != _bits(want)))} of {g.size} differ")
                    else:
                        ref = want.double().numpy().reshape(-1)
                        if not np.allclose(g, ref, rtol=1e-4, atol=1e-4):
                            failures.append(f"{label}: max error {np.nanmax(np.abs(g - ref))}")
            k += 1
    return failures


@needs_gxx
def test_fp32_variants_match_torch_on_the_emulator(tasks: dict[str, Task], tmp_path: Path) -> None:
    lib = emulated_library(tmp_path, _units(tasks, FP32_CASES))
    failures = _check(tasks, lib, FP32_CASES, exact=False)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_stencil_blocks_walking_several_row_tiles_match_torch(tasks: dict[str, Task], tmp_path: Path) -> None:
    """On a GPU of one small SM the stencil's blocks each walk several row tiles of their column strip
    (the launch's dgx > 1): the box is restaged per tile and every tile's outputs land."""
    tiny = DeviceFacts(sm_count=1, max_threads_per_sm=32)
    cases = [
        ("depthwise_residual", [GroupConfig.of("stencil", tx=32, ty=1, rows=2)]),
        ("depthwise_multiplier", [GroupConfig.of("stencil", tx=32, ty=2, rows=1)]),
        ("conv3d_groups", [GroupConfig.of("stencil", tx=32, ty=1, rows=2)]),
    ]
    units = _units(tasks, cases, tiny)
    assert all("for (int tr = group * (int)P.dgx; tr < tr_end; ++tr)" in unit for unit in units)
    assert all("/ 4;" in unit for unit in units)  # four rounds of one resident block: per = tiles / 4
    lib = emulated_library(tmp_path, units)
    failures = _check(tasks, lib, cases, exact=False)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_bf16_variants_match_torch_exactly_on_the_emulator(tasks: dict[str, Task], tmp_path: Path) -> None:
    lib = emulated_library(tmp_path, _units(tasks, BF16_CASES))
    failures = _check(tasks, lib, BF16_CASES, exact=True)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_emulator_catches_a_wrong_conv(tasks: dict[str, Task], tmp_path: Path) -> None:
    """Not vacuous: an implicit GEMM that drops the last input column, a direct kernel short of a tap, a
    stencil reading its windows one column off, and warp-group kernels skipping a tap or storing the
    weights unswizzled, fail: a wrong answer, or a read past the end of a buffer that dies."""
    from optiml.evaluate.runtime import TaskRuntime

    k = kernels_of(tasks, "conv2d_strided", EMULATED)
    implicit = k.render([GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4)]).code
    direct = k.render([GroupConfig.of("direct", threads=64)]).code
    stencil = k.render([GroupConfig.of("stencil", tx=32, ty=4, rows=2)]).code
    warp_group = k.render([GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)]).code
    broken = [
        implicit.replace("(unsigned)iw < (unsigned)P.W", "(unsigned)iw + 1 < (unsigned)P.W"),
        direct.replace("kx < (int)P.KW", "kx + 1 < (int)P.KW"),
        stencil.replace("v[kx] = src[kx * 1];", "v[kx] = src[kx * 1 + 1];"),  # each window one column right
        # channel-major k (shape set 2: 2 channels), tap-major k (shape set 0: 4), the weights' swizzle
        warp_group.replace("if (++t == KSi) {", "if (++t >= KSi - 1) {"),  # a tap of each channel skipped
        warp_group.replace("* DHWi + xo + tp.w;", "* DHWi + xo + tp.w + 1;"),  # each tap one column right
        warp_group.replace("((c ^ (r & 7)) << 4));\n      unsigned big", "(c << 4));\n      unsigned big", 1),
    ]
    assert all(b not in (implicit, direct, stencil, warp_group) for b in broken)
    lib = emulated_library(tmp_path, broken)
    runtime = TaskRuntime(tasks["conv2d_strided"], "cpu")
    for unit, shape_set in enumerate((0, 0, 0, 2, 0, 0)):
        case = runtime.case(7, shape_set)
        try:
            (got,) = run_emulated(lib, unit, case.abi_inputs, case.expected)
        except AssertionError as died:
            assert "the emulated call died" in str(died), unit
            continue
        assert not np.allclose(got, case.expected[0].double().numpy().reshape(-1), rtol=1e-4, atol=1e-4), unit


@needs_gxx
def test_emulator_catches_warp_group_convs_reading_uncommitted_copies_or_misplaced_pixels(
    tasks: dict[str, Task], tmp_path: Path
) -> None:
    """``cp.async.wait_group`` waits for committed groups only: without its commits the bf16 kernel's
    weight copies may land after the MMAs read the stage (wrong results on the H200 at large sizes);
    the emulator lands a copy only when a wait retires its group, so it fails here too. A pointwise
    kernel's pixel copies without their swizzle, or into one panel, fail as well."""
    from optiml.evaluate.runtime import TaskRuntime

    unit = kernels_of(tasks, "h_conv_wide", EMULATED).render([GroupConfig.of("wgmma", bm=64, bn=128)]).code
    pixels = kernels_of(tasks, "h_pointwise_wide", EMULATED).render([GroupConfig.of("wgmma", bm=64, bn=128)]).code
    broken = [
        unit.replace("optiml_cp_commit();", ""),
        pixels.replace("(((pc & 7) ^ (k & 7)) << 4)", "((pc & 7) << 4)"),  # pixel copies unswizzled
        pixels.replace("(pc >> 3) * 8192", "0"),  # both 64-column panels in one
    ]
    assert broken[0] != unit and broken[1] != pixels and broken[2] != pixels
    lib = emulated_library(tmp_path, broken)
    for k, name in enumerate(("h_conv_wide", "h_pointwise_wide", "h_pointwise_wide")):
        case = TaskRuntime(tasks[name], "cpu").case(7, 1)
        (bad,) = run_emulated(lib, k, case.abi_inputs, case.expected)
        assert not np.array_equal(bad, _bits(case.expected[0])), k


@needs_gxx
def test_emulator_catches_a_staged_epilogue_that_misplaces_outputs(tasks: dict[str, Task], tmp_path: Path) -> None:
    """The staged epilogue's lane walks 32 columns at a time across output planes of 4, 3 and 1 pixels: stepping
    into the next image once where the step crosses several fails, and so do rows of the shared tile overlapping
    (pitch 64 for 72) and a lane's second column read from its first's place."""
    from optiml.evaluate.runtime import TaskRuntime

    tiny = kernels_of(tasks, "h_conv_tiny", EMULATED).render([GroupConfig.of("wgmma", bm=64, bn=128, nhwc=1)]).code
    deep = kernels_of(tasks, "h_conv_deep", EMULATED).render([GroupConfig.of("wgmma", bm=128, bn=128)]).code
    broken = [
        tiny.replace(
            "        while (pix >= OSi) {\n          pix -= OSi;\n          col_at += next_image;",
            "        if (pix >= OSi) {\n          pix -= OSi;\n          col_at += next_image;",
        ),
        deep.replace("(float2*)&tile[r * 72 + 8 * jj", "(float2*)&tile[r * 64 + 8 * jj"),
        deep.replace("tile[r * 72 + 32 * k + lane]", "tile[r * 72 + lane]"),
    ]
    assert broken[0] != tiny and broken[1] != deep and broken[2] != deep
    lib = emulated_library(tmp_path, broken)
    for k, name in enumerate(("h_conv_tiny", "h_conv_deep", "h_conv_deep")):
        runtime = TaskRuntime(tasks[name], "cpu")
        wrong = False
        for shape_set in range(tasks[name].num_shape_sets):
            case = runtime.case(7 + shape_set, shape_set)
            (bad,) = run_emulated(lib, k, case.abi_inputs, case.expected)
            wrong = wrong or not np.array_equal(bad, _bits(case.expected[0]))
        assert wrong, k


# -- on the GPU ----------------------------------------------------------------------------------------
F16_CASES: list[tuple[str, list[GroupConfig]]] = [
    (
        "f16_conv2d",
        [
            GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=4),
            GroupConfig.of("mma", bm=128, bn=64, bk=32, wm=4, wn=2),
            GroupConfig.of("direct", threads=256),
            GroupConfig.of("wgmma", bm=128, bn=256),
            GroupConfig.of("wgmma", bm=64, bn=64),
            GroupConfig.of("wgmma", bm=128, bn=128, nhwc=1),
            GroupConfig.of("wgmma", bm=128, bn=128, nhwc=1, staged=0),
        ],
    ),
]


@pytest.mark.gpu
def test_every_variant_verifies_on_the_gpu(tasks: dict[str, Task], tmp_path: Path) -> None:
    """The emulator's cases (and fp16) through the harness on a real GPU, at every (odd) shape set."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")

    def render(name: str, config: GroupConfig) -> KernelSource:
        k = kernels_of(tasks, name)
        return k.render([config, *k.default()[1:]])

    cases = [(name, config) for name, configs in FP32_CASES + BF16_CASES + F16_CASES for config in configs]
    failures = gpu_failures(tasks, cases, render, tmp_path)
    assert not failures, "\n".join(failures)
