"""The harness's memory plan: fewer cached cases (then timing sets) when the device is short, never
more than it can hold; evicted cases come back identical."""

from __future__ import annotations

from pathlib import Path

import torch

from optiml.evaluate.memory import FIXED_OVERHEAD_BYTES, MAX_CASES, USABLE_FRACTION, WINDOW_BYTES, plan_memory
from optiml.evaluate.runtime import TaskRuntime
from optiml.task import load_task

GB = 10**9
H200 = 150_000_000_000  # 139.7 GiB, as torch reports it


def test_a_task_that_fits_keeps_every_cached_case() -> None:
    plan = plan_memory(H200, 1 * GB, timing_sets=2)
    assert plan.max_cases == MAX_CASES and plan.timing_sets == 2 and plan.fits
    assert plan.bound_bytes == (MAX_CASES + 2 + 2) * GB + WINDOW_BYTES - GB + FIXED_OVERHEAD_BYTES


def test_a_timed_windows_slots_are_in_the_bound_and_scale_with_a_small_device() -> None:
    """A window's extra slots (its calls' own inputs, outputs and references) are held beside the
    rest: the window's budget (16 GiB, a quarter of a small device, as the harness's window_width sizes
    it) less the first slot, the trial buffers; a case larger than the budget is timed alone."""
    small, case = 8 * 2**30, 100 * 2**20
    plan = plan_memory(small, case, timing_sets=2)
    extra = small // 4 - case
    assert plan.bound_bytes == (plan.max_cases + plan.timing_sets + 2) * case + extra + FIXED_OVERHEAD_BYTES
    assert plan_memory(0, GB, timing_sets=2).bound_bytes == 8 * GB + WINDOW_BYTES - GB + FIXED_OVERHEAD_BYTES
    assert plan_memory(H200, 20 * GB, timing_sets=1, max_cases=1).window_extra_bytes == 0


def test_36_rmsnorm_sized_cases_fit_an_h200() -> None:
    case = 2 * 112 * 64 * 512 * 512 * 4  # input + reference output: 15 GB
    plan = plan_memory(H200, case, timing_sets=2)
    assert plan.fits and plan.bound_bytes <= USABLE_FRACTION * H200
    # 8 x 15 GB + 2 GiB: a case is larger than the window budget, so its window has no extra slot
    assert plan.max_cases == MAX_CASES and plan.timing_sets == 2


def test_cases_are_given_up_before_timing_sets() -> None:
    plan = plan_memory(H200, 30 * GB, timing_sets=2)
    assert plan.max_cases == 1 and plan.timing_sets == 1 and plan.fits
    huge = plan_memory(H200, 60 * GB, timing_sets=2)
    assert huge.max_cases == 1 and huge.timing_sets == 1 and not huge.fits  # said so, not hidden


def test_an_unbounded_device_keeps_the_plan_asked_for() -> None:
    plan = plan_memory(0, 100 * GB, timing_sets=3)
    assert plan.max_cases == MAX_CASES and plan.timing_sets == 3


def test_the_runtime_evicts_least_recently_used_cases_and_rebuilds_them_identically(tmp_path: Path) -> None:
    path = tmp_path / "scale.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nN = 1000\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return 3 * x\n"
        "def get_inputs():\n    return [torch.rand(N)]\ndef get_init_inputs():\n    return []\n"
    )
    runtime = TaskRuntime(load_task(path), "cpu")
    runtime.plan = plan_memory(H200, 8000, timing_sets=2, max_cases=2)
    first = runtime.case(1)
    kept = first.args[0].clone()
    runtime.case(2)
    runtime.case(1)  # used again: now the most recent
    runtime.case(3)  # evicts seed 2
    assert runtime.memory_report()["cached_cases"] == 2
    assert runtime.case(1) is first
    again = runtime.case(2)
    assert again is not first and torch.equal(runtime.case(1).args[0], kept)
    assert torch.equal(again.expected[0], 3 * again.args[0])
