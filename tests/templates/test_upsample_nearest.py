"""Nearest upsampling by whole factors is a broadcast and a reshape (``graph/decomps.py``), written by one
element-wise kernel whose rows span the input's last dim and the factor (``[..., W, s]``: the input read along
``W``, broadcast along ``s``), not rows of ``s`` elements a warp each. Checked against torch on the emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.templates.row.reduce import RowTemplate, layout_of

SHAPES = [{"B": 2, "C": 3, "H": 5, "W": 7}, {"B": 1, "C": 2, "H": 4, "W": 16}]
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
def test_the_pack_is_the_widest_that_divides_the_factor_run(name: str, vec: int, tmp_path: Path) -> None:
    """Runs of 2 take packs of 2: a pack of 4 would fall back to the scalar path at run time."""
    kernels = planned(write_task(tmp_path, name, task_text(SHAPES, FORWARDS[name], "[torch.randn(B, C, H, W)]")))
    (config,) = kernels.default()
    assert config.get("vec") == vec, config.label()
    code = kernels.render([config]).code
    assert f"g0_kernel<{vec}><<<" in code and "P.R2 % " + str(vec) + " == 0" in code
