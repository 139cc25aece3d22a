"""Pool template: spaces, the default rule, deterministic size-free rendering, and nvcc builds of every variant."""

from __future__ import annotations

import re
import shutil
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_permute_template import emulate, needs_gxx
from tu import translation_unit

from optiml.graph.ir import Graph, Node, TensorType, Value
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.templates.base import DeviceFacts, GroupConfig, Operand, RenderContext, TemplateError
from optiml.templates.group import Group, PoolSpec
from optiml.templates.pool.pool import PoolTemplate

FACTS = DeviceFacts()
needs_nvcc = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")]


def _out_size(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
    out = num // s + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    return out


def pool_group(
    op: str,
    shape: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: tuple[int, ...] | None = None,
    padding: tuple[int, ...] | None = None,
    dilation: tuple[int, ...] | None = None,
    ceil: bool = False,
    indices: bool = False,
    include_pad: bool = True,
    divisor: int | None = None,
    index: int = 0,
) -> Group:
    """A one-node graph ``x -> pool(x)`` (max pooling has a second, int64 indices output)."""
    sp = len(kernel)
    stride = stride or kernel
    padding = padding or (0,) * sp
    dilation = dilation or (1,) * sp
    lead = len(shape) - sp
    out = tuple(shape[:lead]) + tuple(
        _out_size(shape[lead + i], kernel[i], stride[i], padding[i], dilation[i], ceil) for i in range(sp)
    )
    attrs: dict[str, Any] = {
        "spatial": sp,
        "kernel": kernel,
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "ceil_mode": ceil,
    }
    values = [Value(0, TensorType(shape, "float32")), Value(1, TensorType(out, "float32"), producer=0)]
    node_outs: tuple[int, ...] = (1,)
    if op == "max_pool":
        values.append(Value(2, TensorType(out, "int64"), producer=0))
        node_outs = (1, 2)
    else:
        attrs.update(count_include_pad=include_pad, divisor=divisor)
    node = Node(0, op, (0,), node_outs, tuple(sorted(attrs.items())), f"aten.{op}")
    outputs = node_outs if indices else (1,)
    graph = Graph(tuple(values), (0,), (node,), outputs)
    spec = dict(node.attrs)
    spec["op"] = op
    if op == "max_pool":
        spec["indices"] = indices
    return Group(index, "pool", (0,), (0,), outputs, graph, PoolSpec.of(spec))


def pool_context(group: Group) -> RenderContext:
    outputs = [Operand("((float*)outputs[0].data)", "float")]
    if len(group.outputs) > 1:
        outputs.append(Operand("((int64_t*)outputs[1].data)", "int64_t"))
    return RenderContext(
        prefix=group.prefix,
        inputs=[Operand("((const float*)inputs[0].data)", "float")],
        outputs=outputs,
        dims=lambda vid, d: f"{'inputs[0]' if vid == 0 else 'outputs[0]'}.shape[{d}]",
    )


def render(group: Group, config: GroupConfig) -> str:
    code = PoolTemplate().render(group, config, pool_context(group))
    return code.device + "\n" + code.host


# -- spaces, rules, rendering ---------------------------------------------------------------------
def test_space_rejects_bad_knobs() -> None:
    template = PoolTemplate()
    g2 = pool_group("max_pool", (2, 3, 32, 32), (3, 3), (2, 2), (1, 1))
    space = template.space(g2, FACTS)
    assert space.variants == ("direct", "smem_tile")
    assert space.reason_invalid(GroupConfig.of("direct", threads=256, outputs_per_thread=4)) is None
    assert space.reason_invalid(GroupConfig.of("smem_tile", tile_x=64, tile_y=16)) is None
    assert "not in" in (space.reason_invalid(GroupConfig.of("direct", threads=96, outputs_per_thread=1)) or "")
    assert "not set" in (space.reason_invalid(GroupConfig.of("direct", threads=256)) or "")
    assert "no knob" in (space.reason_invalid(GroupConfig.of("direct", threads=256, outputs_per_thread=1, x=1)) or "")
    assert "unknown variant" in (space.reason_invalid(GroupConfig.of("warp", threads=32)) or "")
    g1 = pool_group("avg_pool", (2, 3, 40), (3,), (2,), (1,))
    assert template.space(g1, FACTS).variants == ("direct",)  # no smem tiles in 1-D
    skipping = pool_group("max_pool", (2, 3, 32, 32), (2, 2), (3, 3))  # stride > window: no reuse to stage
    assert "stride" in (
        template.space(skipping, FACTS).reason_invalid(GroupConfig.of("smem_tile", tile_x=32, tile_y=4)) or ""
    )
    tiny = DeviceFacts(smem_per_block_optin=4096)
    reason = template.space(g2, tiny).reason_invalid(GroupConfig.of("smem_tile", tile_x=64, tile_y=16))
    assert reason is not None and "shared memory" in reason
    with pytest.raises(TemplateError):
        template.render(g2, GroupConfig.of("direct", threads=100, outputs_per_thread=1), pool_context(g2))


def test_default_rule_and_seeds() -> None:
    template = PoolTemplate()
    wide = pool_group("max_pool", (2, 3, 64, 512), (2, 2))  # innermost output 256
    narrow = pool_group("max_pool", (2, 3, 64, 200), (2, 2))  # innermost output 100
    assert template.default(wide, FACTS) == GroupConfig.of("direct", threads=256, outputs_per_thread=4)
    assert template.default(narrow, FACTS) == GroupConfig.of("direct", threads=256, outputs_per_thread=1)
    one_row = pool_group("max_pool", (2, 3, 1, 500), (1, 4), (1, 2))  # max_pool1d as traced: no smem seeds
    assert all(s.variant == "direct" for s in template.seeds(one_row, FACTS))
    assert any(s.variant == "smem_tile" for s in template.seeds(wide, FACTS))
    for group in (wide, narrow, one_row, pool_group("avg_pool", (4, 1000), (4,), (4,))):
        seeds = template.seeds(group, FACTS)
        assert seeds[0] == template.default(group, FACTS)
        assert 3 <= len(seeds) <= 4 and len(set(seeds)) == len(seeds)
        space = template.space(group, FACTS)
        assert all(space.reason_invalid(s) is None for s in seeds)


def test_render_is_deterministic_prefixed_and_size_free() -> None:
    configs = [
        GroupConfig.of("direct", threads=128, outputs_per_thread=2),
        GroupConfig.of("smem_tile", tile_x=32, tile_y=8),
    ]
    for config in configs:
        a = pool_group("max_pool", (2, 3, 33, 47), (3, 3), (2, 2), (1, 1), indices=True, index=3)
        b = pool_group("max_pool", (7, 5, 100, 9), (3, 3), (2, 2), (1, 1), indices=True, index=3)  # other sizes
        text = render(a, config)
        assert text == render(a, config)
        assert text == render(b, config)  # traced sizes never reach the code
        for name in re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)", text):
            assert name.startswith("g3_")
        assert "__half" not in text and "__nv_bfloat16" not in text
        assert "outputs[1].data" in text  # the indices are written


def test_spec_errors() -> None:
    template = PoolTemplate()
    group = pool_group("max_pool", (2, 3, 16, 16), (2, 2))
    spec = group.spec_of(PoolSpec)
    broken = Group(0, "pool", group.nodes, group.inputs, group.outputs, group.graph, replace(spec, indices=True))
    with pytest.raises(TemplateError, match="indices"):
        template.render(broken, template.default(broken, FACTS), pool_context(broken))
    bad = Group(0, "pool", group.nodes, group.inputs, group.outputs, group.graph, replace(spec, op="lp_pool"))
    with pytest.raises(TemplateError):
        template.space(bad, FACTS)


# -- nvcc builds: every variant, 1-D / 2-D / 3-D, max with and without indices, avg options -------
def _compile(tmp_path: Path, cases: list[tuple[Group, GroupConfig]]) -> None:
    template = PoolTemplate()
    codes = [template.render(group, config, pool_context(group)) for group, config in cases]
    # operands may be host-only expressions (the assembler's workspace offsets): device code must not use them
    group, config = cases[0]
    ctx = pool_context(group)
    ctx.prefix = "g9"
    ctx.inputs = [Operand("((const float*)inputs[n_inputs - 1].data)", "float")]
    codes.append(template.render(group, config, ctx))
    source = translation_unit(codes, 1, 2)
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    result = compiler.compile(KernelSource(source))
    assert result.ok, result.error_summary() + "\n" + source
    assert all(r.spill_stores == 0 for r in result.resources)


@pytest.mark.parametrize(
    "spatial",
    [
        pytest.param(1, marks=needs_nvcc),
        pytest.param(2, marks=needs_nvcc),
        pytest.param(3, marks=needs_nvcc),
    ],
)
def test_every_variant_compiles(tmp_path: Path, spatial: int) -> None:
    n = spatial
    shape = (2, 3, *(9, 13, 40)[3 - n :])
    k3, s2, p1 = (3,) * n, (2,) * n, (1,) * n
    d2 = (2,) + (1,) * (n - 1)
    groups = [
        pool_group("max_pool", shape, k3, s2, p1, d2, ceil=True, indices=True, index=0),
        pool_group("max_pool", shape[1:], (2,) * n, index=1),  # no batch dim, values only
        pool_group("avg_pool", shape, k3, s2, p1, ceil=True, include_pad=False, index=2),
        pool_group("avg_pool", shape, (2,) * n, (1,) * n, p1, divisor=3, index=3),
    ]
    cases = [
        (groups[0], GroupConfig.of("direct", threads=256, outputs_per_thread=4)),
        (groups[1], GroupConfig.of("direct", threads=128, outputs_per_thread=1)),
        (groups[2], GroupConfig.of("direct", threads=512, outputs_per_thread=2)),
        (groups[3], GroupConfig.of("direct", threads=256, outputs_per_thread=1)),
    ]
    if spatial > 1:
        tiles = [
            GroupConfig.of("smem_tile", tile_x=32, tile_y=8),
            GroupConfig.of("smem_tile", tile_x=64, tile_y=4),
            GroupConfig.of("smem_tile", tile_x=32, tile_y=16),
            GroupConfig.of("smem_tile", tile_x=64, tile_y=16),  # 3-D: > 48 KB of halo, opts in
        ]
        for k, (group, tile) in enumerate(zip(groups, tiles, strict=True)):
            moved = Group(k + 4, "pool", group.nodes, group.inputs, group.outputs, group.graph, group.spec)
            cases.append((moved, tile))
    _compile(tmp_path, cases)


# -- numerics on the CPU emulator (see test_permute_template), against torch on the CPU -------------
def _torch_pool(group: Group, x: np.ndarray) -> list[np.ndarray]:
    import torch
    import torch.nn.functional as F

    spec, xt = group.spec_of(PoolSpec), torch.from_numpy(x)
    n = int(spec.spatial)
    if spec.op == "max_pool":
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[n - 1]
        values, indices = fn(
            xt,
            spec.kernel,
            spec.stride,
            spec.padding,
            spec.dilation,
            ceil_mode=spec.ceil_mode,
            return_indices=True,
        )
        return [values.numpy(), indices.numpy()] if spec.indices else [values.numpy()]
    fn = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[n - 1]
    extra = {"divisor_override": spec.divisor} if n > 1 else {}
    out = fn(
        xt,
        spec.kernel,
        spec.stride,
        spec.padding,
        ceil_mode=spec.ceil_mode,
        count_include_pad=spec.count_include_pad,
        **extra,
    )
    return [out.numpy()]


D4 = GroupConfig.of("direct", threads=128, outputs_per_thread=4)
D1 = GroupConfig.of("direct", threads=256, outputs_per_thread=1)
NUMERIC_CASES: list[tuple[str, Group, list[GroupConfig], list[tuple[int, ...]]]] = [
    (
        "max1d_dilated",
        pool_group("max_pool", (2, 3, 50), (4,), (2,), (2,), (3,), indices=True),
        [D4],
        [(2, 3, 50), (1, 2, 9)],
    ),
    (
        "max1d_nobatch_ceil",
        pool_group("max_pool", (3, 41), (3,), (3,), (1,), ceil=True, indices=True),
        [D1],
        [(3, 41), (2, 7)],
    ),
    (
        "avg1d_ceil_nopad",
        pool_group("avg_pool", (2, 3, 50), (3,), (2,), (1,), ceil=True, include_pad=False),
        [D4],
        [(2, 3, 50)],
    ),
    (
        "max2d_ceil_dilated",
        pool_group("max_pool", (2, 2, 11, 37), (2, 3), (2, 1), (1, 1), (2, 1), ceil=True, indices=True),
        [D4, GroupConfig.of("smem_tile", tile_x=32, tile_y=4)],
        [(2, 2, 11, 37), (1, 1, 4, 70)],
    ),
    (
        "max2d_nobatch",
        pool_group("max_pool", (3, 9, 40), (3, 3), (2, 2), (1, 1), indices=True),
        [D1, GroupConfig.of("smem_tile", tile_x=64, tile_y=16)],
        [(3, 9, 40)],
    ),
    (
        "avg2d_ceil_nopad",
        pool_group("avg_pool", (2, 3, 9, 70), (3, 3), (2, 2), (1, 1), ceil=True, include_pad=False),
        [D1, GroupConfig.of("smem_tile", tile_x=64, tile_y=16)],
        [(2, 3, 9, 70), (1, 2, 10, 11)],
    ),
    (
        "avg2d_divisor",
        pool_group("avg_pool", (2, 3, 9, 70), (3, 2), (2, 2), (1, 1), divisor=5),
        [GroupConfig.of("smem_tile", tile_x=32, tile_y=8)],
        [(2, 3, 9, 70)],
    ),
    (
        "max3d",
        pool_group("max_pool", (2, 2, 7, 9, 35), (2, 3, 3), (2, 2, 2), (1, 1, 1), indices=True),
        [D4, GroupConfig.of("smem_tile", tile_x=32, tile_y=16)],
        [(2, 2, 7, 9, 35)],
    ),
    (
        "avg3d_ceil",
        pool_group("avg_pool", (1, 2, 7, 9, 35), (3, 3, 3), (2, 2, 2), (1, 1, 1), ceil=True),
        [
            GroupConfig.of("direct", threads=128, outputs_per_thread=2),
            GroupConfig.of("smem_tile", tile_x=64, tile_y=16),
        ],
        [(1, 2, 7, 9, 35)],
    ),
]


@needs_gxx
@pytest.mark.parametrize("name,group,configs,shapes", NUMERIC_CASES, ids=[c[0] for c in NUMERIC_CASES])
def test_pooling_matches_torch_on_the_emulator(
    tmp_path: Path, name: str, group: Group, configs: list[GroupConfig], shapes: list[tuple[int, ...]]
) -> None:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for config in configs:
        source = translation_unit([PoolTemplate().render(group, config, pool_context(group))], 1, len(group.outputs))
        variants = [source]
        if config.variant == "direct":  # the 64-bit index path too
            forced = source.replace("in_total < 2147483648LL && out_total < 2147483648LL", "false")
            assert forced != source
            variants.append(forced)
        for code in variants:
            for shape in shapes:
                x = rng.standard_normal(shape).astype(np.float32)
                if group.spec_of(PoolSpec).op == "max_pool":  # NaN propagates, -inf windows keep the first index
                    flat = x.reshape(-1)
                    flat[rng.integers(0, flat.size, 3)] = np.nan
                    flat[rng.integers(0, flat.size, 5)] = -np.inf
                want = _torch_pool(group, x)
                rc, got = emulate(tmp_path, code, [x], [(w.shape, w.dtype) for w in want])
                assert rc == 0, (config.label(), shape)
                np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6, err_msg=f"{config.label()} {shape}")
                if len(want) > 1:
                    np.testing.assert_array_equal(got[1], want[1], err_msg=f"indices {config.label()} {shape}")


@needs_gxx
def test_fused_prologue_and_epilogue_on_the_emulator(tmp_path: Path) -> None:
    """Elements are read and written only through the context's loaders and storers (fused ops)."""
    import torch
    import torch.nn.functional as F

    group = pool_group("max_pool", (2, 3, 9, 40), (3, 3), (2, 2), (1, 1), indices=True)
    ctx = pool_context(group)
    ctx.loaders = [lambda idx: f"fmaxf(((const float*)inputs[0].data)[{idx}], 0.25f)"]
    ctx.storers = [
        lambda idx, v: f"((float*)outputs[0].data)[{idx}] = 2.0f * ({v});",
        lambda idx, v: f"((int64_t*)outputs[1].data)[{idx}] = (int64_t)({v});",
    ]
    x = np.random.default_rng(3).standard_normal((2, 3, 9, 40)).astype(np.float32)
    values, indices = F.max_pool2d(torch.from_numpy(x).clamp_min(0.25), 3, 2, 1, return_indices=True)
    for config in (D1, GroupConfig.of("smem_tile", tile_x=32, tile_y=8)):
        source = translation_unit([PoolTemplate().render(group, config, ctx)], 1, 2)
        rc, got = emulate(tmp_path, source, [x], [(values.shape, np.float32), (indices.shape, np.int64)])
        assert rc == 0
        np.testing.assert_array_equal(got[0], 2.0 * values.numpy())
        # ties (the 0.25 floor) keep PyTorch's first maximum, so indices match exactly
        np.testing.assert_array_equal(got[1], indices.numpy())


@needs_gxx
def test_float64_pooling_computes_in_double_on_the_emulator(tmp_path: Path) -> None:
    import torch
    import torch.nn.functional as F

    group = pool_group("avg_pool", (2, 3, 9, 20), (3, 3), (2, 2), (1, 1), include_pad=False)
    ctx = RenderContext(
        prefix="g0",
        inputs=[Operand("((const double*)inputs[0].data)", "double")],
        outputs=[Operand("((double*)outputs[0].data)", "double")],
        dims=lambda vid, d: f"{'inputs[0]' if vid == 0 else 'outputs[0]'}.shape[{d}]",
        compute_type="float",  # what a context derived from an int64 output would say
    )
    x = np.random.default_rng(5).standard_normal((2, 3, 9, 20))
    want = F.avg_pool2d(torch.from_numpy(x), 3, 2, 1, count_include_pad=False).numpy()
    source = translation_unit([PoolTemplate().render(group, D1, ctx)], 1, 1)
    rc, (got,) = emulate(tmp_path, source, [x], [(want.shape, np.float64)])
    assert rc == 0
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
