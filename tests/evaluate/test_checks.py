"""Comparison, poisoning and input-integrity checks on CPU tensors (the same code runs on the GPU)."""

from __future__ import annotations

import math

import pytest
import torch

from optiml.evaluate.candidate_link import CandidateFailure
from optiml.evaluate.checks import (
    TrialBuffers,
    check_trial,
    clone_args,
    compare,
    fresh_outputs,
    modified_inputs,
    poison_,
    quick_match,
    written_before_call,
)
from optiml.evaluate.runtime import Case
from optiml.values import EvalStatus


def test_poisoned_outputs_fail_until_written() -> None:
    expected = [torch.rand(100), torch.arange(10)]
    outputs = fresh_outputs(expected)
    assert torch.isnan(outputs[0]).all()
    assert (outputs[1] == -1).all()
    result = compare(outputs, expected, atol=1e-4, rtol=1e-4)
    assert not result.passed and result.nan_count == 100
    assert "NaN" in result.message
    outputs[0].copy_(expected[0])
    outputs[1].copy_(expected[1])
    assert compare(outputs, expected, 1e-4, 1e-4).passed


def test_tolerance_is_allclose_style_and_errors_are_reported() -> None:
    ref = torch.tensor([1.0, 100.0, -5.0])
    out = ref + torch.tensor([5e-5, 5e-3, 0.0])
    ok = compare([out], [ref], atol=1e-4, rtol=1e-4)
    assert ok.passed and math.isclose(ok.max_abs_err, 5e-3, rel_tol=1e-3)
    bad = compare([ref + torch.tensor([0.0, 0.02, 0.0])], [ref], atol=1e-4, rtol=1e-4)
    assert not bad.passed and bad.mismatched == 1
    assert "flat index 1" in bad.message


def test_nan_never_passes_and_inf_must_match() -> None:
    ref = torch.tensor([1.0, float("inf")])
    assert compare([torch.tensor([1.0, float("inf")])], [ref], 1e-4, 1e-4).passed
    assert not compare([torch.tensor([float("nan"), float("inf")])], [ref], 1.0, 1.0).passed
    assert not compare([torch.tensor([1.0, -float("inf")])], [ref], 1.0, 1.0).passed
    assert not quick_match([torch.tensor([float("nan"), float("inf")])], [ref], 1.0, 1.0)


def test_shape_mismatch_is_reported() -> None:
    result = compare([torch.zeros(3)], [torch.zeros(4)], 1e-4, 1e-4)
    assert not result.passed and "shape" in result.message


def test_modified_inputs_detects_any_byte_change() -> None:
    pristine = [torch.rand(16), 3, torch.arange(4)]
    used = clone_args(pristine)
    assert modified_inputs(pristine, used) == []
    used[2][1] = 99
    assert modified_inputs(pristine, used) == [2]
    used[0].view(torch.int32)[0] ^= 1  # flip one bit
    assert modified_inputs(pristine, used) == [0, 2]


def _byte_after(tensor: torch.Tensor) -> torch.Tensor:
    """A one-byte view just past ``tensor``'s end, in the same storage (what an overrun touches)."""
    offset = tensor.storage_offset() * tensor.element_size() + tensor.numel() * tensor.element_size()
    return torch.empty(0, dtype=torch.uint8).set_(tensor.untyped_storage(), offset, (1,))


def test_trial_buffers_reuse_addresses_and_catch_overruns() -> None:
    first = [torch.rand(8, 3), 2.0]
    expected = [torch.rand(8, 3)]
    buffers = TrialBuffers(first, expected)
    assert torch.equal(buffers.args[0], first[0]) and torch.isnan(buffers.outputs[0]).all()
    address = buffers.args[0].data_ptr()
    second = [torch.rand(8, 3), 5.0]
    assert buffers.matches(second, expected)
    buffers.refill(second)
    assert buffers.args[0].data_ptr() == address  # same address, new values: pointer-keyed caches go stale
    assert torch.equal(buffers.args[0], second[0]) and buffers.args[1] == 5.0
    assert buffers.overrun() is None
    _byte_after(buffers.outputs[0]).fill_(0)
    assert buffers.overrun() == "output 0"
    buffers.refill(second)
    assert buffers.overrun() is None
    _byte_after(buffers.args[0]).fill_(1)
    assert buffers.overrun() == "input 0"
    assert not buffers.matches([torch.rand(4, 3), 2.0], expected)


def test_the_judges_check_of_a_trial_guards_inputs_then_tolerance() -> None:
    """check_trial, the one check the judge (harness) and the in-process runner share, after a call."""
    x = torch.rand(8, 3)
    case = Case(seed=7, shape_set=1, distribution="uniform", args=[x], params=[], expected=[x * 2],
                model=torch.nn.Identity(), atol=(1e-5,), rtol=1e-5)  # fmt: skip
    buffers = TrialBuffers(case.abi_inputs, case.expected)
    unwritten = check_trial(case, buffers)  # poisoned outputs: a wrong answer, not an exception
    assert not unwritten.passed and unwritten.nan_count == 24 and "NaN" in unwritten.message
    buffers.outputs[0].copy_(x * 2)
    check = check_trial(case, buffers)
    assert check.passed and (check.seed, check.shape_set, check.distribution, check.total) == (7, 1, "uniform", 24)
    buffers.outputs[0][0, 0] += 1.0
    off = check_trial(case, buffers)
    assert not off.passed and off.mismatched == 1 and "first at flat index 0" in off.message
    buffers.args[0][0, 0] = -1.0
    with pytest.raises(CandidateFailure) as modified:
        check_trial(case, buffers)
    assert modified.value.status is EvalStatus.INTEGRITY and "modified input(s) [0]" in str(modified.value)
    buffers.refill(case.abi_inputs)
    _byte_after(buffers.outputs[0]).fill_(0)
    with pytest.raises(CandidateFailure) as overrun:
        check_trial(case, buffers)
    assert overrun.value.status is EvalStatus.INTEGRITY and "past the end of output 0" in str(overrun.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_an_output_written_before_the_call_is_seen_in_a_sample_of_its_positions(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(5)
    outputs = [torch.empty(3, 1000, dtype=dtype), torch.empty(0, dtype=dtype), torch.empty((), dtype=dtype)]
    for out in outputs:
        poison_(out)
    assert not bool(written_before_call(outputs, generator))
    outputs[0].view(-1)[::50] = 0  # 2 % of the first output answered ahead of the call
    assert bool(written_before_call(outputs, generator))
    poison_(outputs[0])
    outputs[2].fill_(1)  # a 0-dim output is its one position
    assert bool(written_before_call(outputs, generator))
