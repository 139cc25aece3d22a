"""Comparison, poisoning and input-integrity checks on CPU tensors (the same code runs on the GPU)."""

from __future__ import annotations

import math

import torch

from optiml.evaluate.checks import clone_args, compare, fresh_outputs, modified_inputs, quick_match


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
