"""Nearest upsampling by whole factors is a broadcast and a reshape (``graph/decomps.py``), written by one
element-wise kernel whose rows span the input's last dim and the factor (``[..., W, s]``: the input read along
``W``, broadcast along ``s``), not rows of ``s`` elements a warp each. Checked against torch on the emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.templates.base import GroupConfig
from optiml.templates.row.reduce import RowTemplate, _pack_width, layout_of

SHAPES = [{"B": 2, "C": 3, "H": 5, "W": 7}, {"B": 1, "C": 2, "H": 4, "W": 16}]
#: rows of 2·W elements: W = 8 takes packs of 4 and 8 across runs of 2; W = 6 packs of 4, not 8 (the scalar path);
#: W = 3 neither (the rule sizes its pack at the first)
EVEN_SHAPES = [{"B": 2, "C": 3, "H": 5, "W": 8}, {"B": 1, "C": 2, "H": 3, "W": 6}, {"B": 2, "C": 1, "H": 2, "W": 3}]
FORWARDS = {
    "2d_by_2": "x\nreturn torch.nn.functional.interpolate(x, scale_factor=2, mode='nearest')",
    "2d_by_3_2": "x\nreturn torch.nn.functional.interpolate(x, scale_factor=(3, 2))",
    "1d_by_4": "x\nreturn torch.nn.functional.interpolate(x.flatten(2), scale_factor=4)",
    "3d_by_2_then_relu": "x\nreturn torch.relu(torch.nn.functional.interpolate(x.unsqueeze(1), scale_factor=2)) - 1",
}


@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_nearest_upsampling_is_one_kernel_with_rows_across_the_last_dim_and_its_factor(
    name: str, tmp_path: Path
) -> None:
    kernels = planned(write_task(tmp_path, name, task_text(SHAPES, FORWARDS[name], "[torch.randn(B, C, H, W)]")))
    (group,) = kernels.plan.groups
    template = kernels.templates.of(group)
    assert isinstance(template, RowTemplate) and group.template == "pointwise", kernels.describe()
    program = template.program(group)
    layout = layout_of(program)
    n = len(program.shape)
    assert layout.r2 == (n - 1,) and n - 2 in layout.r1 and layout.kept, (program.shape, layout)


@needs_gxx
@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_nearest_upsampling_matches_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, name, task_text(SHAPES, FORWARDS[name], "[torch.randn(B, C, H, W)]")))
    units = [(kernels.task, f"seed {k}", kernels.render(c).code) for k, c in enumerate(kernels.seeds(3))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-6)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(("name", "vec"), [("2d_by_2", 2), ("2d_by_3_2", 2), ("1d_by_4", 4)])
def test_a_row_that_packs_of_4_do_not_divide_takes_the_widest_that_divides_the_factor_run(
    name: str, vec: int, tmp_path: Path
) -> None:
    """Rows of 14 (W = 7 at the timed shape) take packs of 2 within each run of 2: a pack of 4 would fall back to
    the scalar path at run time."""
    kernels = planned(write_task(tmp_path, name, task_text(SHAPES, FORWARDS[name], "[torch.randn(B, C, H, W)]")))
    (config,) = kernels.default()
    assert config.get("vec") == vec, config.label()
    code = kernels.render([config]).code
    assert f"g0_kernel<{vec}><<<" in code and "P.R2 % " + str(vec) + " == 0" in code


@pytest.mark.parametrize(("name", "span"), [("2d_by_2", 2), ("2d_by_3_2", 2)])
def test_packs_of_8_span_runs_of_2_where_the_row_allows(name: str, span: int, tmp_path: Path) -> None:
    """Nearest upsampling by 2 along W: a pack of 8 output elements is four input elements, each written twice (one
    16-byte load, two 16-byte stores), where packs within a run of 2 stored 8 bytes from one 4-byte load."""
    task = write_task(tmp_path, name, task_text(EVEN_SHAPES, FORWARDS[name], "[torch.randn(B, C, H, W)]"))
    kernels = planned(task)
    (config,) = kernels.default()
    assert config.get("vec") == 8, config.label()
    code = kernels.render([config]).code
    assert "g0_kernel<8><<<" in code and "P.R % 8 == 0" in code and f"P.o0_r1 == {span}" in code
    assert f"OptimlPack<float, (VEC > {span} ? VEC / {span} : 1)> h" in code
    # a row of two runs is walked flat, never cached: no register counts that would render the same kernel
    assert kernels.spaces[0].reason_invalid(config.with_params(items=2)) is not None
    assert all(move.knob != "items" for move in kernels.neighbours([config]))


@needs_gxx
@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_packs_spanning_runs_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, name, task_text(EVEN_SHAPES, FORWARDS[name], "[torch.randn(B, C, H, W)]")))
    space = kernels.spaces[-1]
    configs = [
        GroupConfig.of("warp_row", threads=128, vec=4, items=0),
        GroupConfig.of("warp_row", threads=128, vec=8, items=0),
        GroupConfig.of("block_row", threads=128, vec=8, items=0, ilp=2),
        GroupConfig.of("split_row", threads=128, vec=4, blocks_per_sm=2),
    ]
    units = [(kernels.task, c.label(), kernels.render([c]).code) for c in configs if space.reason_invalid(c) is None]
    assert len(units) == len(configs)
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-6)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize(
    ("vec", "inner", "length", "run", "expected"),
    [
        (4, 2, 256, 2, 8),  # upsampling by 2: packs of 8 across runs of 2
        (4, 2, 12, 2, 4),  # a row of 12: 8 does not divide it, 4 does
        (4, 2, 14, 2, 2),  # a row of 14: packs of 2 within each run
        (4, 4, 64, 4, 8),  # upsampling by 4: packs of 8 across runs of 4 (8-byte loads)
        (4, 4, 36, 4, 4),  # a row of 36: packs of 4, one a run
        (4, 8, 64, 8, 4),  # runs of 8: packs of 4 within each
        (4, 3, 96, 3, 1),  # runs of 3: no pack divides them
        (4, 4096, 8192, 0, 4),  # runs read from the tensors: within a run
        (4, 6, 12, 0, 2),
    ],
)
def test_the_rule_widens_packs_spanning_runs_until_the_broadcast_operand_loads_16_bytes(
    vec: int, inner: int, length: int, run: int, expected: int
) -> None:
    assert _pack_width(vec, inner, length, run) == expected
