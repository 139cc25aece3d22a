"""Output comparison, output poisoning and the inputs-unchanged check (worker side)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

POISON_BYTE = 0xFF


def poison_(tensor: torch.Tensor) -> None:
    """Fill an output so that any element the candidate leaves unwritten fails the check."""
    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    elif tensor.numel():
        tensor.reshape(-1).view(torch.uint8).fill_(POISON_BYTE)


def fresh_outputs(expected: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    outputs = [torch.empty_like(e, memory_format=torch.contiguous_format) for e in expected]
    for out in outputs:
        poison_(out)
    return outputs


def clone_args(values: Sequence[Any]) -> list[Any]:
    return [v.clone(memory_format=torch.contiguous_format) if isinstance(v, torch.Tensor) else v for v in values]


def same_bytes(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def modified_inputs(pristine: Sequence[Any], used: Sequence[Any]) -> list[int]:
    """Indices of tensor inputs whose bytes changed during the call."""
    return [
        i
        for i, (p, u) in enumerate(zip(pristine, used, strict=True))
        if isinstance(p, torch.Tensor) and not same_bytes(p, u)
    ]


@dataclass(frozen=True)
class Comparison:
    passed: bool
    max_abs_err: float
    max_rel_err: float
    mismatched: int
    total: int
    nan_count: int
    message: str


def compare(outputs: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], atol: float, rtol: float) -> Comparison:
    """``|out - ref| <= atol + rtol·|ref|`` elementwise; NaN or Inf where the reference has none fails."""
    max_abs = max_rel = 0.0
    mismatched = total = nans = 0
    messages: list[str] = []
    for index, (out, ref) in enumerate(zip(outputs, expected, strict=True)):
        total += ref.numel()
        if out.shape != ref.shape:
            messages.append(f"output {index}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
            mismatched += ref.numel()
            continue
        if not ref.is_floating_point():
            bad = int((out != ref).sum().item())
            mismatched += bad
            if bad:
                messages.append(f"output {index}: {bad} of {ref.numel()} integer elements differ")
            continue
        work = torch.float64 if ref.dtype == torch.float64 else torch.float32
        o, r = out.to(work), ref.to(work)
        ref_nan, out_nan = torch.isnan(r), torch.isnan(o)
        nan_here = int((out_nan & ~ref_nan).sum().item())
        nans += nan_here
        diff = (o - r).abs()
        finite = torch.isfinite(diff)
        close = (diff <= atol + rtol * r.abs()) & torch.isfinite(r)
        bad_mask = ~(close | (torch.isinf(r) & (o == r)) | (ref_nan & out_nan))
        bad = int(bad_mask.sum().item())
        mismatched += bad
        if finite.any():
            d = diff[finite]
            max_abs = max(max_abs, float(d.max().item()))
            max_rel = max(max_rel, float((d / r.abs()[finite].clamp_min(1e-12)).max().item()))
        if bad:
            where = int(bad_mask.reshape(-1).nonzero()[0].item())
            got, want = float(o.reshape(-1)[where].item()), float(r.reshape(-1)[where].item())
            detail = f"{nan_here} NaN (unwritten or invalid), " if nan_here else ""
            messages.append(
                f"output {index}: {bad} of {ref.numel()} elements off ({detail}first at flat index {where}: "
                f"got {got:.6g}, expected {want:.6g})"
            )
    passed = mismatched == 0
    return Comparison(passed, max_abs, max_rel, mismatched, total, nans, "; ".join(messages))


def quick_match(outputs: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], atol: float, rtol: float) -> bool:
    """Cheap pass/fail used after every timed call (no error figures)."""
    for out, ref in zip(outputs, expected, strict=True):
        if ref.is_floating_point():
            if not torch.allclose(out, ref, atol=atol, rtol=rtol, equal_nan=True):
                return False
        elif not torch.equal(out, ref):
            return False
    return True
