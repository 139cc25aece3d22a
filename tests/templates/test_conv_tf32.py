"""Convolutions at PyTorch's default precision (``OPTIML["precision"] = "tf32"``): every variant multiplies
operands rounded to TF32 to nearest, as cuDNN does there (`benchmarks/tf32_rounding_probe.py`: within 5e-5 of
PyTorch's default-settings output, where exact fp32 is 3e-4 to 5e-4 away and fails KernelBench's 1e-4), and
accumulates in fp32. Depthwise convolutions, exact in cuDNN, stay exact. On Hopper the warp-group kernel is the
1xTF32 ``tf32_wgmma`` (one MMA a k-step), and the exact 3xTF32 variants are not offered.

Numerics on the CPU emulator: each variant against the same convolution computed in float64 on rounded
operands (summation order apart, equal), and, so the check can fail, not within that distance of the exact one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_gemm_template import emulated_library, needs_gxx, run_emulated

from optiml.evaluate.runtime import TaskRuntime
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.task import Task, load_task
from optiml.templates.base import DeviceFacts, GroupConfig
from optiml.templates.kernels import TemplateKernels

EMULATED = DeviceFacts(sm_count=4)
TASK = """import torch
import torch.nn as nn

OPTIML = {{"dtype": "float32", "precision": "{precision}", "shape_sets": [{{"B": 1, "H": 9, "W": 7}}]}}
B, H, W = 2, 10, 12


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{module}

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(B, {cin}, H, W)]


def get_init_inputs():
    return []
"""
#: name: (module, input channels)
CONVS = {
    "dense3x3": ("Conv2d(16, 24, 3, padding=1)", 16),
    "strided5x5": ("Conv2d(8, 16, 5, stride=2, padding=2, bias=False)", 8),
    "pointwise": ("Conv2d(32, 16, 1)", 32),
    "transposed": ("ConvTranspose2d(16, 8, 4, stride=2, padding=1)", 16),
    "depthwise": ("Conv2d(16, 16, 3, padding=1, groups=16)", 16),
}


def _task(folder: Path, name: str, precision: str = "tf32") -> Task:
    module, cin = CONVS[name]
    path = folder / f"{name}_{precision}.py"
    path.write_text(TASK.format(precision=precision, module=module, cin=cin), encoding="utf-8")
    return load_task(path)


def _round(t: torch.Tensor) -> torch.Tensor:
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _float64_conv(conv: torch.nn.Module, x: torch.Tensor, weight: torch.Tensor) -> np.ndarray:
    """``conv`` on ``x`` with ``weight`` in float64 (so only the operands' rounding differs), flat."""
    op = F.conv_transpose2d if isinstance(conv, torch.nn.ConvTranspose2d) else F.conv2d
    bias = None if conv.bias is None else conv.bias.detach().double()
    out = op(x.double(), weight.double(), bias, stride=conv.stride, padding=conv.padding, groups=conv.groups)
    return out.numpy().reshape(-1)


def _variants(kernels: TemplateKernels) -> list[str]:
    return list(kernels.spaces[0].variants)


def test_the_task_s_precision_reaches_the_templates(tmp_path: Path) -> None:
    rounded = TemplateKernels.for_task(_task(tmp_path, "dense3x3"))
    exact = TemplateKernels.for_task(_task(tmp_path, "dense3x3", "exact"))
    assert rounded.facts.tf32_convolutions and not exact.facts.tf32_convolutions
    assert "tf32_wgmma" in _variants(rounded) and not {"tf32x3", "tf32x3_wgmma"} & set(_variants(rounded))
    assert {"tf32x3", "tf32x3_wgmma"} <= set(_variants(exact)) and "tf32_wgmma" not in _variants(exact)
    assert rounded.default()[0].variant == "tf32_wgmma" and exact.default()[0].variant == "tf32x3_wgmma"
    assert all(c[0].variant != "tf32x3_wgmma" for c in rounded.seeds(4))


@pytest.mark.parametrize("name", ["dense3x3", "strided5x5", "transposed"])
def test_every_rounded_variant_rounds_and_says_so(name: str, tmp_path: Path) -> None:
    kernels = TemplateKernels.for_task(_task(tmp_path, name))
    for configs in kernels.seeds(4):
        code = kernels.render(configs).code
        assert "optiml_round_tf32(" in code, configs[0].label()
        assert "optiml_split(" not in code  # no 3xTF32 under this precision


def test_a_transposed_convolution_is_seeded_with_1xtf32_tensor_core_phases(tmp_path: Path) -> None:
    """At PyTorch's default precision a transposed convolution's phases had SIMT kernels only (3xTF32 is exact, so
    not offered there): the ``tf32`` variant (1xTF32 on ``mma.sync``) is now in its space and its seeds."""
    rounded = TemplateKernels.for_task(_task(tmp_path, "transposed"))
    exact = TemplateKernels.for_task(_task(tmp_path, "transposed", "exact"))
    assert "tf32" in _variants(rounded) and "tf32x3" not in _variants(rounded)
    assert "tf32x3" in _variants(exact) and "tf32" not in _variants(exact)
    assert GroupConfig.of("tf32", bm=64, bn=128, bk=16, wm=2, wn=4) in [c[0] for c in rounded.seeds(4)]
    code = rounded.render([GroupConfig.of("tf32", bm=64, bn=64, bk=16, wm=2, wn=2)]).code
    assert "1xTF32 (operands rounded to nearest)" in code and code.count("optiml_mma8(") == 1


def test_large_images_take_256_pixel_tiles(tmp_path: Path) -> None:
    """Where the pixels fill an H100 twice over in 256-pixel tiles, the rule takes 256 (each weight slice read from
    L2 serves twice the pixels) and races the 128 it took before; 3xTF32 has no such tile (registers)."""
    big = tmp_path / "big.py"
    big.write_text(
        TASK.format(precision="tf32", module="Conv2d(16, 128, 3)", cin=16).replace(
            "B, H, W = 2, 10, 12", "B, H, W = 16, 1024, 1024"
        )
    )
    seeds = [c[0] for c in TemplateKernels.for_task(load_task(big), facts=DeviceFacts(sm_count=132)).seeds(4)]
    assert seeds[:2] == [
        GroupConfig.of("tf32_wgmma", bm=128, bn=256, nhwc=1),
        GroupConfig.of("tf32_wgmma", bm=128, bn=128, nhwc=1),
    ]
    small = TemplateKernels.for_task(_task(tmp_path, "dense3x3"), facts=DeviceFacts(sm_count=132))
    assert all(c[0].get("bn") != 256 for c in small.seeds(4))
    exact = TemplateKernels.for_task(_task(tmp_path, "dense3x3", precision="exact"), facts=DeviceFacts(sm_count=132))
    assert exact.spaces[0].reason_invalid(GroupConfig.of("tf32x3_wgmma", bm=128, bn=256)) is not None


def test_a_64_row_1xtf32_tile_gathers_from_the_channels_last_copy_and_a_3xtf32_one_does_not(tmp_path: Path) -> None:
    """The measured rule (1.03-1.29x on six convolutions at 1xTF32, 0.74-0.80x at 3xTF32): the gathering kernel
    stays the next seed."""
    rounded = TemplateKernels.for_task(_task(tmp_path, "dense3x3"), facts=DeviceFacts(sm_count=132))
    assert rounded.default()[0] == GroupConfig.of("tf32_wgmma", bm=64, bn=64, nhwc=1)
    assert GroupConfig.of("tf32_wgmma", bm=64, bn=64, staged=0) in [c[0] for c in rounded.seeds(4)]
    exact = TemplateKernels.for_task(_task(tmp_path, "dense3x3", "exact"), facts=DeviceFacts(sm_count=132))
    assert exact.default()[0] == GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)


def test_a_depthwise_convolution_stays_exact(tmp_path: Path) -> None:
    kernels = TemplateKernels.for_task(_task(tmp_path, "depthwise"))
    for configs in kernels.seeds(4):
        assert "optiml_round_tf32(" not in kernels.render(configs).code


def test_forward_3d_convolutions_stay_exact_and_transposed_ones_round(tmp_path: Path) -> None:
    """cuDNN computes forward 3-D convolutions in exact fp32 at PyTorch's defaults (level 1's 54/59/60/66: as fast
    with TF32 allowed as without, the default reference equal to exact fp32), its 3-D transposed ones in TF32."""
    for module, rounded in (("Conv3d(8, 16, 3, padding=1)", False), ("ConvTranspose3d(8, 16, 3, stride=2)", True)):
        path = tmp_path / f"{module.split('(')[0]}.py"
        text = TASK.format(precision="tf32", module=module, cin=8)
        path.write_text(
            text.replace('"W": 7}', '"W": 7, "D": 3}')
            .replace("B, H, W = 2, 10, 12", "B, H, W, D = 2, 6, 5, 4")
            .replace("torch.randn(B, 8, H, W)", "torch.randn(B, 8, D, H, W)")
        )
        kernels = TemplateKernels.for_task(load_task(path))
        assert any("tf32x3" in v for v in _variants(kernels)) is not rounded, module
        for configs in kernels.seeds(2):
            assert ("optiml_round_tf32(" in kernels.render(configs).code) is rounded, (module, configs)


@pytest.mark.nvcc
def test_the_1xtf32_warp_group_kernel_compiles_for_hopper(tmp_path: Path) -> None:
    sources = []
    for name in ("dense3x3", "pointwise"):
        kernels = TemplateKernels.for_task(_task(tmp_path, name))
        for bm, bn in ((64, 64), (128, 128), (128, 256)):
            sources.append(kernels.render([GroupConfig.of("tf32_wgmma", bm=bm, bn=bn)]))
            if name == "dense3x3":  # and from the input's channels-last copy
                sources.append(kernels.render([GroupConfig.of("tf32_wgmma", bm=bm, bn=bn, nhwc=1)]))
    compiler = Compiler(CompilerConfig(cache_dir=tmp_path / "cache", arch="sm_90a"))
    for result in compiler.compile_many(sources):
        assert result.ok, result.error_summary(5)


CASES: list[tuple[str, list[GroupConfig]]] = [
    ("dense3x3", [GroupConfig.of("tf32_wgmma", bm=64, bn=64), GroupConfig.of("tf32_wgmma", bm=128, bn=128)]),
    ("dense3x3", [GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4), GroupConfig.of("direct", threads=64)]),
    ("dense3x3", [GroupConfig.of("stencil", tx=32, ty=2, rows=2)]),
    ("strided5x5", [GroupConfig.of("tf32_wgmma", bm=64, bn=64), GroupConfig.of("direct", threads=128)]),
    # gathered from the input's channels-last copy, rounded as it is copied
    (
        "dense3x3",
        [GroupConfig.of("tf32_wgmma", bm=64, bn=64, nhwc=1), GroupConfig.of("tf32_wgmma", bm=128, bn=128, nhwc=1)],
    ),
    ("strided5x5", [GroupConfig.of("tf32_wgmma", bm=64, bn=128, nhwc=1)]),
    # 256 pixels a tile (m64n256k8): half the weight slices a pixel
    (
        "dense3x3",
        [GroupConfig.of("tf32_wgmma", bm=128, bn=256, nhwc=1), GroupConfig.of("tf32_wgmma", bm=128, bn=256)],
    ),
    (
        "pointwise",
        [GroupConfig.of("tf32_wgmma", bm=64, bn=64), GroupConfig.of("implicit", bm=32, bn=64, bk=16, tm=4, tn=8)],
    ),
    ("transposed", [GroupConfig.of("implicit", bm=32, bn=32, bk=8, tm=4, tn=4), GroupConfig.of("direct", threads=64)]),
    # 1xTF32 on mma.sync: a forward convolution, and a transposed one over its output phases
    ("dense3x3", [GroupConfig.of("tf32", bm=64, bn=64, bk=16, wm=2, wn=2)]),
    (
        "transposed",
        [
            GroupConfig.of("tf32", bm=64, bn=64, bk=16, wm=2, wn=2),
            GroupConfig.of("tf32", bm=64, bn=128, bk=16, wm=2, wn=4),
        ],
    ),
]


@needs_gxx
def test_rounded_variants_match_a_convolution_of_rounded_operands_on_the_emulator(tmp_path: Path) -> None:
    tasks = {name: _task(tmp_path, name) for name, _ in CASES}
    units, labels = [], []
    for name, configs in CASES:
        kernels = TemplateKernels(tasks[name], TemplateKernels.for_task(tasks[name]).plan, EMULATED)
        for config in configs:
            units.append(kernels.render([config]).code)
            labels.append((name, config))
    lib = emulated_library(tmp_path / "emu", units)
    failures = []
    for k, (name, config) in enumerate(labels):
        runtime = TaskRuntime(tasks[name], "cpu")
        for shape_set in range(tasks[name].num_shape_sets):
            case = runtime.case(11 + shape_set, shape_set)
            got = run_emulated(lib, k, case.abi_inputs, case.expected)[0]
            conv, x = case.model.conv, case.args[0]
            weight = conv.weight.detach()
            rounded, exact = _float64_conv(conv, _round(x), _round(weight)), _float64_conv(conv, x, weight)
            label = f"{name} {config.label()} shape set {shape_set}"
            near = float(np.max(np.abs(got - rounded)))
            far = float(np.max(np.abs(got - exact)))
            if not near < 2e-5:
                failures.append(f"{label}: {near:.3g} from the rounded-operand convolution")
            if not far > 4 * near:
                failures.append(f"{label}: {far:.3g} from exact fp32, {near:.3g} from rounded: no rounding seen")
    assert not failures, "\n".join(failures)
