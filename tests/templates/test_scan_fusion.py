"""What fuses into a scan kernel. ``cumsum(x, d) - x`` (forward or reversed) is one exclusive scan, not a scan
and an element-wise kernel that reads the scan back (three extra passes over the data); anything else that
subtracts from a scan keeps its own kernel. An element-wise prologue over inputs of the scanned shape
(``cumsum(x * mask)``) is recomputed at each load instead of written and read back; one that broadcasts, or
whose constants differ between shape sets, is not. An exclusive scan written as a shift by one (a cat of a zero
column and the scan of all but the last element, in any of the ways users write it) is one exclusive scan too.
Numerics are checked against torch on the CPU emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task
from optiml.templates.group import ScanSpec

SHAPES = [{"M": 3, "N": 700}, {"M": 5, "N": 37}]
INPUTS = "[torch.randn(M, N)]"
MASKED_INPUTS = "[torch.randn(M, N), torch.rand(M, N) > 0.5]"
PROLOGUES = {
    "masked": ("x, mask\nreturn torch.cumsum(x * mask, dim=1)", MASKED_INPUTS),
    "masked_reverse": (
        "x, mask\nreturn torch.flip(torch.cumsum(torch.flip(torch.where(mask, x, 0.5), [1]), 1), [1])",
        MASKED_INPUTS,
    ),
    "exclusive_of_product": ("x, mask\ny = x * mask\nreturn torch.cumsum(y, 1) - y", MASKED_INPUTS),
    "math": ("x\nreturn torch.cumsum(torch.sigmoid(x) * 2.0 - 1.0, dim=1)", INPUTS),
}
UNFUSED_PROLOGUES = {
    "broadcast": ("x, w\nreturn torch.cumsum(x * w, dim=1)", "[torch.randn(M, N), torch.randn(N)]"),
    "size_constant": ("x\nreturn torch.cumsum(x / x.shape[1], dim=1)", INPUTS),
}
FOLDED = {
    "forward": "torch.cumsum(x, 1) - x",
    "last_dim": "x.cumsum(dim=-1) - x",
    "reverse": "torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1]) - x",
    "prologue": "torch.cumsum(x * 2.0, 1) - x * 2.0",  # the same value scanned and subtracted (CSE makes it one)
}
ZERO, ONE = "torch.zeros_like(x[:, :1])", "torch.ones_like(x[:, :1])"
SHIFTED = {
    "kernelbench": "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "
    "torch.cumsum(x.narrow(1, 0, x.size(1) - 1), 1)), 1)",
    "scan_then_slice": "torch.cat([x.new_zeros(x.shape[0], 1), x.cumsum(-1)[:, :-1]], -1)",
    "pad": "torch.nn.functional.pad(torch.cumsum(x, 1), (1, -1))",
    "pad_of_narrow": "torch.nn.functional.pad(torch.cumsum(x[:, :-1], 1), (1, 0))",
    "reverse": f"torch.cat((torch.flip(torch.cumsum(torch.flip(x[:, 1:], [1]), 1), [1]), {ZERO}), 1)",
    "reverse_then_slice": f"torch.cat((x.flip(1).cumsum(1).flip(1)[:, 1:], {ZERO}), 1)",
    "product": f"torch.cat(({ONE}, torch.cumprod(x[:, :-1], 1)), 1)",
    "leading_dim": "torch.cat((torch.zeros_like(x[:1]), torch.cumsum(x[:-1], 0)), 0)",
}
NOT_SHIFTED = {
    "ones_before_a_sum": f"torch.cat(({ONE}, torch.cumsum(x[:, :-1], 1)), 1)",
    "zeros_after_a_forward_sum": f"torch.cat((torch.cumsum(x[:, :-1], 1), {ZERO}), 1)",
    "slice_from_one": f"torch.cat(({ZERO}, torch.cumsum(x[:, 1:], 1)), 1)",
    "scan_also_returned": f"torch.cat(({ZERO}, torch.cumsum(x[:, :-1], 1)), 1), torch.cumsum(x[:, :-1], 1)",
    "other_dim": "torch.cat((torch.zeros_like(x[:1]), torch.cumsum(x[:-1], 1)), 0)",
}
KEPT = {
    "other_operand": "torch.cumsum(x, 1) - x * 3.0",  # not the scanned value
    "swapped": "x - torch.cumsum(x, 1)",
    "product": "torch.cumprod(x, 1) - x",
}


def _task(tmp_path: Path, name: str, expression: str) -> Task:
    return write_task(tmp_path, name, task_text(SHAPES, f"x\nreturn {expression}", INPUTS))


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_cumsum_minus_its_input_is_one_exclusive_scan(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, FOLDED[name]))
    scans = [g for g in kernels.plan.groups if g.template == "scan"]
    assert len(scans) == 1 and scans[0].spec_of(ScanSpec).exclusive
    assert scans[0].spec_of(ScanSpec).reverse == (name == "reverse")
    assert not any(g.template == "pointwise" and "sub" in g.describe() for g in kernels.plan.groups)
    graph = kernels.plan.graph
    assert all(graph.producer(v).op != "cumsum" for v in kernels.plan.materialized)  # the inclusive scan is not written


@pytest.mark.parametrize("name", sorted(KEPT))
def test_other_subtractions_stay_inclusive(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, KEPT[name]))
    scans = [g for g in kernels.plan.groups if g.template == "scan"]
    assert len(scans) == 1 and not scans[0].spec_of(ScanSpec).exclusive
    assert len(kernels.plan.groups) == 2


def test_a_scan_also_returned_stays_inclusive(tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, "both", "torch.cumsum(x, 1), torch.cumsum(x, 1) - x"))
    scans = [g for g in kernels.plan.groups if g.template == "scan"]
    assert len(scans) == 1 and not scans[0].spec_of(ScanSpec).exclusive


@needs_gxx
@pytest.mark.parametrize("name", sorted(FOLDED))
def test_exclusive_scans_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, FOLDED[name]))
    units = [(kernels.task, f"seed {k}", kernels.render(configs).code) for k, configs in enumerate(kernels.seeds(5))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-4)
    assert not failures, "\n".join(failures)


def _written(tmp_path: Path, name: str, forward: str, inputs: str) -> Task:
    return write_task(tmp_path, name, task_text(SHAPES, forward, inputs))


@pytest.mark.parametrize("name", sorted(PROLOGUES))
def test_an_element_wise_prologue_is_recomputed_by_the_scan(name: str, tmp_path: Path) -> None:
    kernels = planned(_written(tmp_path, name, *PROLOGUES[name]))
    assert [g.template for g in kernels.plan.groups] == ["scan"]
    assert not kernels.plan.materialized


@pytest.mark.parametrize("name", sorted(UNFUSED_PROLOGUES))
def test_a_broadcast_or_size_dependent_prologue_keeps_its_kernel(name: str, tmp_path: Path) -> None:
    kernels = planned(_written(tmp_path, name, *UNFUSED_PROLOGUES[name]))
    assert [g.template for g in kernels.plan.groups] == ["pointwise", "scan"]
    assert kernels.plan.materialized


@needs_gxx
@pytest.mark.parametrize("name", sorted(PROLOGUES))
def test_fused_prologues_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(_written(tmp_path, name, *PROLOGUES[name]))
    units = [(kernels.task, f"seed {k}", kernels.render(configs).code) for k, configs in enumerate(kernels.seeds(5))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=7, tol=1e-4)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", sorted(SHIFTED))
def test_a_scan_shifted_by_one_is_one_exclusive_scan(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, SHIFTED[name]))
    assert [g.template for g in kernels.plan.groups] == ["scan"]
    spec = kernels.plan.groups[0].spec_of(ScanSpec)
    assert spec.exclusive and spec.reverse == name.startswith("reverse")
    assert spec.kind == ("prod" if name == "product" else "sum")
    assert kernels.plan.groups[0].inputs == kernels.plan.graph.inputs and not kernels.plan.materialized


@pytest.mark.parametrize("name", sorted(NOT_SHIFTED))
def test_other_cats_of_a_scan_keep_their_copies(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, NOT_SHIFTED[name]))
    assert not any(g.template == "scan" and g.spec_of(ScanSpec).exclusive for g in kernels.plan.groups)
    assert len(kernels.plan.groups) > 1


@needs_gxx
@pytest.mark.parametrize("name", sorted(SHIFTED))
def test_shifted_scans_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, SHIFTED[name]))
    units = [(kernels.task, f"seed {k}", kernels.render(configs).code) for k, configs in enumerate(kernels.seeds(4))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=9, tol=1e-4)
    assert not failures, "\n".join(failures)
