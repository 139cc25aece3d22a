"""The row template on real tasks: every variant renders, renders the same twice, refuses bad knobs,
keeps fp32 tasks free of half types, records its configurations, and builds with nvcc."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from optiml.integrity.screen import screen_kernel
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.templates.assemble import MARKER, read_marker
from optiml.templates.base import GroupConfig, TemplateError
from optiml.templates.kernels import TemplateKernels

ROOT = Path(__file__).resolve().parents[2]
TASKS = {
    "softmax": "tasks/softmax.py",
    "layernorm": "tasks/layernorm.py",
    "cross_entropy": "tasks/cross_entropy.py",
    "max_dim0": "tasks/memory/max_dim0.py",
    "sum_all": "tasks/memory/sum_all.py",
    "argmax_last_dim": "tasks/memory/argmax_last_dim.py",
    "batchnorm2d_train": "tasks/memory/batchnorm2d_train.py",
    "swish_fp16": "tasks/memory/swish_fp16.py",
    "silu_mul_bf16": "tasks/memory/silu_mul_bf16.py",
}
HALF_TYPES = ("__half", "__nv_bfloat16")


@cache
def kernels_of(name: str) -> TemplateKernels:
    return TemplateKernels.for_task(load_task(ROOT / TASKS[name]))


def variant_configs(name: str) -> list[tuple[str, list[GroupConfig]]]:
    """The default, then each kernel switched to each variant of its space (knobs adapted)."""
    tk = kernels_of(name)
    default = tk.default()
    out = [("default", default)]
    for index, space in enumerate(tk.spaces):
        for variant in space.variants:
            adapted = TemplateKernels._adapt(default[index], variant, space)
            assert adapted is not None, f"{name}: kernel {index} has no legal {variant} near the default"
            assert space.reason_invalid(adapted) is None
            configs = list(default)
            configs[index] = adapted
            out.append((f"g{index}:{variant}", configs))
    return out


@cache
def rendered(name: str, label: str) -> KernelSource:
    configs = dict(variant_configs(name))[label]
    return kernels_of(name).render(configs)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_variant_renders_deterministically(name: str) -> None:
    tk = kernels_of(name)
    assert {g.template for g in tk.plan.groups} <= {"reduce", "pointwise"}
    fp32 = load_task(ROOT / TASKS[name]).meta.dtype == "float32"
    digests = set()
    for label, configs in variant_configs(name):
        source = tk.render(configs)
        assert source.digest == tk.render(list(configs)).digest, f"{label}: same configs, same source"
        assert source.code == rendered(name, label).code
        first, *_ = source.code.splitlines()
        assert first.startswith(MARKER)
        assert read_marker(source.code) == configs
        assert "optiml_forward" in source.code
        if fp32:
            assert not any(t in source.code for t in HALF_TYPES), label
        digests.add(source.digest)
    # each switch renders its own source; switching a kernel to its own variant gives the default
    assert len(digests) == 1 + sum(len(s.variants) - 1 for s in tk.spaces)


def test_half_tasks_use_their_storage_types() -> None:
    assert "__half" in rendered("swish_fp16", "default").code
    assert "__nv_bfloat16" in rendered("silu_mul_bf16", "default").code


def test_the_variants_of_inner_and_outer_reductions() -> None:
    # the innermost dim reduced: row variants (a row read twice may be held over a cluster); kept: column variants;
    # one row: split_row alone
    assert kernels_of("softmax").spaces[0].variants == ("warp_row", "block_row", "cluster_row", "split_row")
    assert kernels_of("max_dim0").spaces[0].variants == ("col", "col_split", "col_chunks")
    assert kernels_of("max_dim0").default()[0].variant == "col_split"
    assert kernels_of("sum_all").spaces[0].variants == ("split_row",)
    assert kernels_of("sum_all").default()[0].variant == "split_row"
    assert [s.variants for s in kernels_of("cross_entropy").spaces][1] == ("split_row",)


def test_softmax_passes_fp32_strict_screening() -> None:
    task = load_task(ROOT / TASKS["softmax"])
    assert task.meta.dtype == "float32" and task.meta.rtol < 1e-3
    for label, _ in variant_configs("softmax"):
        assert not screen_kernel(rendered("softmax", label), fp32_strict=True).rejected, label


@pytest.mark.parametrize(
    "config, reason",
    [
        (GroupConfig.of("warp_row", threads=999, vec=4, items=0), "threads=999"),
        (GroupConfig.of("block_row", threads=256, vec=4), "not set"),
        (GroupConfig.of("block_row", threads=256, vec=4, items=0, lanes=8), "no knob"),
        (GroupConfig.of("tile_row", threads=256), "unknown variant"),
        (GroupConfig.of("warp_row", threads=256, vec=8, items=16), "vec \\* items"),
        (GroupConfig.of("col", threads=256), "unknown variant 'col'"),
    ],
)
def test_an_invalid_configuration_raises(config: GroupConfig, reason: str) -> None:
    with pytest.raises(TemplateError, match=reason):
        kernels_of("softmax").render([config])


def test_col_split_needs_32_columns_per_block() -> None:
    with pytest.raises(TemplateError, match="32 columns"):
        kernels_of("max_dim0").render([GroupConfig.of("col_split", threads=128, lanes=8)])


def test_the_wrong_number_of_configurations_raises() -> None:
    tk = kernels_of("cross_entropy")
    with pytest.raises(TemplateError, match="1 configurations for 2 kernels"):
        tk.render(tk.default()[:1])


def test_marker_of_other_kernels() -> None:
    assert read_marker((ROOT / "tasks" / "softmax.naive.cu").read_text(encoding="utf-8")) is None
    assert read_marker(MARKER + " {not json\n") is None


#: one source per variant family (split_row in half and bfloat16), and a two-kernel plan with a workspace
COMPILED = [
    ("softmax", "g0:warp_row"),
    ("softmax", "default"),  # block_row with a register cache
    ("max_dim0", "g0:col"),
    ("max_dim0", "default"),  # col_split
    ("max_dim0", "g0:col_chunks"),  # a launch a stage, partials through the workspace
    ("swish_fp16", "default"),  # split_row, __half
    ("silu_mul_bf16", "default"),  # split_row, __nv_bfloat16
    ("cross_entropy", "default"),  # block_row with a gather, then split_row over the per-row losses
]


@pytest.mark.nvcc
def test_rendered_sources_compile(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path))
    sources = [rendered(name, label) for name, label in COMPILED]
    results = compiler.compile_many(sources)
    failed = [f"{n} {lbl}: {r.error_summary()}" for (n, lbl), r in zip(COMPILED, results, strict=True) if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(result.resources for result in results), "ptxas reported every kernel"


def test_a_leaf_read_once_a_row_does_not_narrow_the_pack() -> None:
    """Cross-entropy's int64 targets are read once a row: its float32 logits take 16-byte packs (4), not 8-byte ones;
    the batch mean after it reads the targets along its row, so there a pack of int64 is 2."""
    kernels = TemplateKernels.for_task(load_task(ROOT / "tasks" / "memory" / "cross_entropy_vocab.py"))
    rows, mean = kernels.default()
    assert rows.get("vec") == 4 and mean.get("vec") == 2, kernels.describe()
