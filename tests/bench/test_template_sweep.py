"""benchmarks/template_sweep.py's A/B rewrites of a rendered kernel: each still builds, and changes only what it
names (the element-wise row kernel of the starter SiLU: its vector pack stores and reads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.benchmark_scripts import benchmark_module

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.task import load_task
from optiml.templates.kernels import TemplateKernels

ROOT = Path(__file__).resolve().parents[2]


def _silu_source():  # type: ignore[no-untyped-def]
    kernels = TemplateKernels.for_task(load_task(ROOT / "tasks" / "silu.py"))
    return kernels.render(kernels.default())


def test_nc_loads_reads_every_pack_through_ldg_and_nothing_else_changes() -> None:
    sweep = benchmark_module("template_sweep")
    source = _silu_source()
    rewritten = sweep.nc_loads(source).code
    assert rewritten.count(sweep.NC_PACK) == 1
    kernels = rewritten.replace(sweep.NC_PACK, "")
    reads = source.code.count("*reinterpret_cast<const OptimlPack<")
    assert reads and "*reinterpret_cast<const OptimlPack<" not in kernels and kernels.count("optiml_nc_pack<") == reads
    assert kernels.replace("optiml_nc_pack<", "*reinterpret_cast<const OptimlPack<") == source.code.replace(
        "*reinterpret_cast<const OptimlPack<float, VEC>*>", "*reinterpret_cast<const OptimlPack<float, VEC>"
    )


@pytest.mark.nvcc
def test_every_rewrite_still_builds(tmp_path: Path) -> None:
    sweep = benchmark_module("template_sweep")
    source = _silu_source()
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path))
    results = compiler.compile_many([rewrite(source) for rewrite in sweep.REWRITES.values()])
    assert all(r.ok for r in results), [r.error_summary() for r in results]


def test_seeds_mode_times_the_roots_competitors_default_first() -> None:
    sweep = benchmark_module("template_sweep")
    kernels = TemplateKernels.for_task(load_task(ROOT / "tasks" / "memory" / "groupnorm.py"))
    configs = sweep.configs_to_time(kernels, [], 4, seeds=True)
    assert configs == [c[0] for c in kernels.seeds(4)] and configs[0] == kernels.default()[0]
    assert len(configs) > 1 and len(set(configs)) == len(configs)
    space = sweep.configs_to_time(kernels, ["warp_row"], 3, seeds=False)
    assert space[0] == kernels.default()[0] and all(c.variant == "warp_row" for c in space[1:])


def test_where_keeps_the_configurations_whose_knobs_take_the_named_values() -> None:
    sweep = benchmark_module("template_sweep")
    kernels = TemplateKernels.for_task(load_task(ROOT / "tasks" / "memory" / "upsample_nearest.py"))
    space = kernels.spaces[0]
    picked = sweep.legal_configs(kernels, ["warp_row"], 100, where={"items": 0, "ilp": 2})
    assert picked and all(space.value(c, "items") == 0 and space.value(c, "ilp") == 2 for c in picked)
    assert {c.get("vec") for c in picked} == {2, 4, 8}  # ilp pairs packs: no vec 1
    assert len(sweep.legal_configs(kernels, ["warp_row"], 3, where={"items": 0})) == 3
