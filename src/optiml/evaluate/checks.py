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


GUARD_BYTES = 4096  # canary region after every buffer a candidate gets: catches small overruns
GUARD_BYTE = 0xA5


def guarded_empty(like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An uninitialised contiguous tensor shaped like ``like`` followed by a canary region.

    Returns (tensor, guard). A write just past the tensor's end lands in the guard instead of
    another allocation, where :func:`guard_intact` finds it.
    """
    nbytes = like.numel() * like.element_size()
    raw = torch.empty(nbytes + GUARD_BYTES, dtype=torch.uint8, device=like.device)
    tensor = raw[:nbytes].view(like.dtype).view(like.shape) if nbytes else torch.empty_like(like)
    guard = raw[nbytes:]
    guard.fill_(GUARD_BYTE)
    return tensor, guard


def guard_intact(guard: torch.Tensor) -> bool:
    return bool((guard == GUARD_BYTE).all().item())


def fresh_outputs(expected: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    outputs = [torch.empty_like(e, memory_format=torch.contiguous_format) for e in expected]
    for out in outputs:
        poison_(out)
    return outputs


def clone_args(values: Sequence[Any]) -> list[Any]:
    return [v.clone(memory_format=torch.contiguous_format) if isinstance(v, torch.Tensor) else v for v in values]


class TrialBuffers:
    """A candidate's input copies and poisoned outputs, each followed by a guard region.

    The same buffers are refilled for every trial of one shape set, so a candidate that caches
    results keyed by buffer address (or shape) is handed new values at the same addresses and
    returns a stale answer.
    """

    def __init__(self, args: Sequence[Any], expected: Sequence[torch.Tensor]) -> None:
        self.args: list[Any] = []
        self.guards: list[torch.Tensor] = []
        for value in args:
            if isinstance(value, torch.Tensor):
                copy, guard = guarded_empty(value)
                self.args.append(copy)
                self.guards.append(guard)
            else:
                self.args.append(value)
        self.outputs: list[torch.Tensor] = []
        self.output_guards: list[torch.Tensor] = []
        for ref in expected:
            out, guard = guarded_empty(ref)
            self.outputs.append(out)
            self.output_guards.append(guard)
        self.refill(args)

    def matches(self, args: Sequence[Any], expected: Sequence[torch.Tensor]) -> bool:
        if len(args) != len(self.args) or len(expected) != len(self.outputs):
            return False
        same_args = all(
            isinstance(a, torch.Tensor) == isinstance(b, torch.Tensor)
            and (not isinstance(a, torch.Tensor) or (a.shape == b.shape and a.dtype == b.dtype))
            for a, b in zip(args, self.args, strict=True)
        )
        return same_args and all(
            o.shape == e.shape and o.dtype == e.dtype for o, e in zip(self.outputs, expected, strict=True)
        )

    def refill(self, args: Sequence[Any]) -> None:
        """Copy new input values in place (same addresses), re-poison outputs, re-arm guards."""
        for index, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                self.args[index].copy_(value)
            else:
                self.args[index] = value
        for out in self.outputs:
            poison_(out)
        for guard in (*self.guards, *self.output_guards):
            guard.fill_(GUARD_BYTE)

    def overrun(self) -> str | None:
        """Which buffer's guard region the candidate wrote into, if any."""
        for index, guard in enumerate(self.output_guards):
            if not guard_intact(guard):
                return f"output {index}"
        for index, guard in enumerate(self.guards):
            if not guard_intact(guard):
                return f"input {index}"
        return None


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
