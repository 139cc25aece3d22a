"""A ``cat`` of values computable anywhere, read by element-wise ops or reductions, is computed in place by
the row kernel that reads it (templates/plan.py, row/rowprog.py): each element evaluates the part holding
it, its leaves read at the index shifted by the part's offset. Checked against torch on the CPU emulator
along kept dims, along the first dim of a reduced run, with inputs and slices as parts, at odd sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task, load_task
from optiml.templates.row.reduce import RowTemplate, layout_of

ROOT = Path(__file__).resolve().parents[2]
ROTARY = ROOT / "tasks" / "memory" / "rotary_half.py"

TEMPLATE = """import torch
import torch.nn as nn

OPTIML = {{"dtype": "float32", "shape_sets": [{{"A": 4, "B": 6, "C": 10}}, {{"A": 3, "B": 4, "C": 7}}]}}
A = 4
B = 6
C = 10


class Model(nn.Module):
    def forward(self, x, y):
        {body}


def get_inputs():
    return [torch.randn(A, B, C), torch.randn(A, B, C)]


def get_init_inputs():
    return []
"""

CASES = {
    # three parts along the last dim (the row), one an input as it is, one a slice, one computed
    "row_three_parts": "return torch.cat((x, -y[..., 1:], torch.sigmoid(x[..., :3]) * 2), dim=-1) * 0.5 + 1",
    # 3 + (C - 1) = 12 elements a row: vector packs of 4 whose first straddles the parts' boundary
    "row_straddling_packs": "return torch.cat((x[..., :3], y[..., 1:]), dim=-1).exp() * 0.5",
    # along a kept dim (rows), then a softmax over the last dim
    "kept_dim_softmax": "return torch.softmax(torch.cat((x * 2, y), dim=0), dim=-1)",
    # along the middle dim, reduced with the last: the cat's dim starts the reduced run
    "reduced_run_sum": "return torch.cat((x.exp(), y[:, :2] - 1), dim=1).sum(dim=(1, 2))",
    # a rotate-half on the middle dim, then a mean over the last (the cat's dim is kept)
    "rotate_middle_mean": (
        "h = x.shape[1] // 2\n        return (x * torch.cat((-x[:, h:], x[:, :h]), dim=1)).mean(dim=-1)"
    ),
}

# rows of 16 and 8 elements (vector packs of 4): parts that start at multiples of 4 are read as packs (CATV);
# one that does not keeps the per-element reads of the same vector path
ALIGNED_SHAPES = '[{"A": 4, "B": 6, "C": 16}, {"A": 3, "B": 4, "C": 8}]'
ALIGNED_CASES = {
    "aligned_rotate_half": (
        "h = x.shape[-1] // 2\n        return x * y + torch.cat((-x[..., h:], x[..., :h]), dim=-1) * (1 - y)"
    ),
    "aligned_two_inputs": "h = x.shape[-1] // 2\n        return torch.cat((x[..., :h], y[..., h:] * 3), dim=-1) + x",
    "aligned_unaligned_part": "return torch.cat((x[..., :3], y[..., 3:].exp()), dim=-1) * x",
    "aligned_kept_dim": "return torch.cat((x[:2] * 2, y[2:]), dim=0) * y",
}


#: in bfloat16 a pack is 8 elements: rows of 16 read their halves as packs, rows of 8 (halves of 4) cannot
BF16_CASE = "aligned_rotate_half_bf16"


def aligned_task(folder: Path, name: str) -> Task:
    body = ALIGNED_CASES["aligned_rotate_half" if name == BF16_CASE else name]
    text = TEMPLATE.format(body=body).replace('[{"A": 4, "B": 6, "C": 10}, {"A": 3, "B": 4, "C": 7}]', ALIGNED_SHAPES)
    if name == BF16_CASE:
        text = text.replace('"dtype": "float32"', '"dtype": "bfloat16"')
        text = text.replace("torch.randn(A, B, C)", "torch.randn(A, B, C).bfloat16()")
    return write_task(folder, name, text.replace("C = 10", "C = 16"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_cat_of_computable_parts_fuses_into_the_kernel_that_reads_it(name: str, tmp_path: Path) -> None:
    described = planned(write_task(tmp_path, name, TEMPLATE.format(body=CASES[name]))).describe()
    assert "cat[" not in described and "→" not in described, described


def test_rotate_half_is_one_kernel() -> None:
    assert planned(load_task(ROTARY)).describe() == "pointwise[mul cat mul add]"


def test_rotate_half_is_one_row_of_two_runs_walked_flat() -> None:
    """Not B*H*S rows of 128 elements (a warp each): the slice and the cat cut the trailing dims once, so the
    row is S runs of D, and its loops walk the flat range (the whole team on 128-element runs), each thread's
    (run, element) split from its first flat index and then stepped without a division."""
    kernels = planned(load_task(ROTARY))
    (group,) = kernels.plan.groups
    template = kernels.templates.of(group)
    assert isinstance(template, RowTemplate)
    layout = layout_of(template.program(group))
    assert (layout.kept, layout.r1, layout.r2) == ((0, 1), (2,), (3,))
    code = kernels.render(kernels.default()).code
    assert "optiml_divmod(r1s, p.R2)" in code and "es += sr" in code  # split once, then stepped


def test_parts_starting_at_pack_boundaries_are_read_as_packs() -> None:
    """Rotate-half reads ``x``'s other half as one 16-byte pack a part (guarded by the part holding the pack),
    chosen on the host only where every part along the row starts at a multiple of VEC."""
    kernels = planned(load_task(ROTARY))
    code = kernels.render(kernels.default()).code
    assert "template <int VEC, bool CATV>" in code and "if (CATV) {" in code
    packed = [line for line in code.splitlines() if line.startswith("OptimlPack<float, VEC> pc")]
    assert len(packed) == 2 and all("p.cat4[" in line for line in packed), packed
    assert "(P.cat4[1]) % 4 == 0" in code and ", true><<<" in code and ", false><<<" in code


def test_a_cat_that_is_an_output_stays_a_copy_kernel(tmp_path: Path) -> None:
    task = write_task(tmp_path, "cat_out", TEMPLATE.format(body="return torch.cat((x.relu(), y), dim=-1)"))
    assert planned(task).describe() == "pointwise[relu] → cat[cat]"


@needs_gxx
@pytest.mark.parametrize("name", ["rotary", *sorted(CASES), *sorted(ALIGNED_CASES), BF16_CASE])
def test_fused_cats_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    if name == "rotary":
        task = load_task(ROTARY)
    elif name in ALIGNED_CASES or name == BF16_CASE:
        task = aligned_task(tmp_path, name)
    else:
        task = write_task(tmp_path, name, TEMPLATE.format(body=CASES[name]))
    kernels = planned(task)
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(3)]
    # bfloat16: torch rounds every intermediate to 8 bits of mantissa, the kernel only its result
    failures = emulator_mismatches(tmp_path / "emu", units, seed=11, tol=3e-2 if name == BF16_CASE else 1e-4)
    assert not failures, "\n".join(failures)
