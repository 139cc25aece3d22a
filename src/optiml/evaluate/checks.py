"""Output comparison, output poisoning and the inputs-unchanged check (worker side), and the judge's
verdict on one trial's buffers after the call (:func:`check_trial`).

Every check works through flat views in chunks of at most :data:`CHUNK_ELEMENTS` elements, so
its temporaries stay bounded whatever the tensor's size (a 7.5 GB output compared in one piece
needed tens of GB of masks and indices) and no single torch op sees more than 2**31 elements
(tensors over 4 GiB, compared byte for byte, were misjudged as modified in one piece).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from optiml.evaluate.candidate_link import CandidateFailure
from optiml.values import EvalStatus, TrialCheck

if TYPE_CHECKING:  # runtime imports the tolerance, which imports this module
    from optiml.evaluate.runtime import Case

POISON_BYTE = 0xFF
CHUNK_ELEMENTS = 1 << 26  # 64 Mi elements: 256 MiB of float32 per piece, a few such temporaries at once


def chunks(count: int, size: int = CHUNK_ELEMENTS) -> Iterator[tuple[int, int]]:
    """(start, stop) ranges covering ``range(count)`` in pieces of at most ``size``."""
    for start in range(0, count, max(1, size)):
        yield start, min(count, start + size)


def flat_words(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's bytes as a flat vector of the widest integer words that tile it exactly.

    Wider words mean fewer elements: a 6.4 GB float32 tensor is 6.4e9 bytes but 0.8e9 int64 words.
    """
    raw = tensor.reshape(-1).view(torch.uint8)
    for dtype, width in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if raw.numel() % width == 0 and raw.data_ptr() % width == 0:
            return raw.view(dtype)
    return raw


def poison_(tensor: torch.Tensor) -> None:
    """Fill an output so that any element the candidate leaves unwritten fails the check."""
    if tensor.is_floating_point():
        tensor.fill_(float("nan"))
    elif tensor.numel():
        words = flat_words(tensor)
        fill = POISON_BYTE if words.dtype == torch.uint8 else -1  # -1: every byte 0xFF
        for lo, hi in chunks(words.numel()):
            words[lo:hi].fill_(fill)


#: positions per output read back just before a timed window opens (:func:`written_before_call`)
SAMPLED_POSITIONS = 1024


def written_before_call(outputs: Sequence[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
    """A device boolean, true when any of up to :data:`SAMPLED_POSITIONS` positions of any output, drawn from
    ``generator`` (seeded from entropy for the window, so a candidate cannot leave exactly those untouched),
    no longer holds the poison :func:`poison_` wrote: enqueued, not awaited.

    Enqueued behind the judge's last preparation of a call and finished before the request is sent
    (:meth:`Judge.prepare_call`), it catches an answer written while the judge was still preparing the call —
    by a host thread, another process or another GPU context of the candidate's, whose time slices run
    between the judge's own work and are in no window. (Enqueued behind the window's start event instead, it
    raced the call itself in the candidate's context: honest outputs read as written ahead.)
    """
    flag = torch.zeros((), dtype=torch.bool, device=generator.device)
    for out in outputs:
        if not out.numel():
            continue
        # floating outputs hold NaN, every other dtype 0xFF bytes (poison_)
        flat = out.reshape(-1) if out.is_floating_point() else out.reshape(-1).view(torch.uint8)
        count = flat.numel()
        positions = torch.randint(count, (min(count, SAMPLED_POSITIONS),), generator=generator, device=flat.device)
        values = flat[positions]
        poisoned = torch.isnan(values) if out.is_floating_point() else values == POISON_BYTE
        flag |= ~poisoned.all()
    return flag


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


def same_bytes(a: torch.Tensor, b: torch.Tensor, chunk: int = CHUNK_ELEMENTS) -> bool:
    """Whether two tensors hold identical bytes, compared word by word in chunks of ``chunk``."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    words_a, words_b = flat_words(a.contiguous()), flat_words(b.contiguous())
    if words_a.dtype != words_b.dtype:  # differently aligned storage: compare plain bytes
        words_a, words_b = words_a.view(torch.uint8), words_b.view(torch.uint8)
    return all(bool(torch.equal(words_a[lo:hi], words_b[lo:hi])) for lo, hi in chunks(words_a.numel(), chunk))


def modified_inputs(pristine: Sequence[Any], used: Sequence[Any], chunk: int = CHUNK_ELEMENTS) -> list[int]:
    """Indices of tensor inputs whose bytes changed during the call."""
    return [
        i
        for i, (p, u) in enumerate(zip(pristine, used, strict=True))
        if isinstance(p, torch.Tensor) and not same_bytes(p, u, chunk)
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


Atol = float | Sequence[float]  # one for every output, or one each


def per_output(atol: Atol, count: int) -> list[float]:
    """``atol`` as one value per output."""
    if isinstance(atol, (int, float)):
        return [float(atol)] * count
    values = [float(a) for a in atol]
    if len(values) != count:
        raise ValueError(f"{len(values)} tolerances for {count} outputs")
    return values


def compare(
    outputs: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    atol: Atol,
    rtol: float,
    chunk: int = CHUNK_ELEMENTS,
) -> Comparison:
    """``|out - ref| <= atol + rtol·|ref|`` elementwise; NaN or Inf where the reference has none fails.

    ``atol`` is one value, or one per output (cases carry per-output tolerances, see ``tolerance``)."""
    max_abs = max_rel = 0.0
    mismatched = total = nans = 0
    messages: list[str] = []
    atols = per_output(atol, len(expected))
    for index, (out, ref, atol_i) in enumerate(zip(outputs, expected, atols, strict=True)):
        total += ref.numel()
        if out.shape != ref.shape:
            messages.append(f"output {index}: shape {tuple(out.shape)} != {tuple(ref.shape)}")
            mismatched += ref.numel()
            continue
        tally = _tally(out.reshape(-1), ref.reshape(-1), atol_i, rtol, chunk)
        mismatched += tally.bad
        nans += tally.nans
        max_abs, max_rel = max(max_abs, tally.max_abs), max(max_rel, tally.max_rel)
        if tally.bad and not ref.is_floating_point():
            messages.append(f"output {index}: {tally.bad} of {ref.numel()} integer elements differ")
        elif tally.bad:
            where, got, want = _first_bad(out.reshape(-1), ref.reshape(-1), atol_i, rtol, chunk)
            detail = f"{tally.nans} NaN (unwritten or invalid), " if tally.nans else ""
            messages.append(
                f"output {index}: {tally.bad} of {ref.numel()} elements off ({detail}first at flat index {where}: "
                f"got {got:.6g}, expected {want:.6g})"
            )
    passed = mismatched == 0
    return Comparison(passed, max_abs, max_rel, mismatched, total, nans, "; ".join(messages))


class CheckedBuffers(Protocol):
    """One trial's buffers as the check reads them: the judge's shared ones (``arena.SharedBuffers``) or
    the in-process runner's (:class:`TrialBuffers`)."""

    args: list[Any]
    outputs: list[torch.Tensor]

    def overrun(self) -> str | None: ...


def check_trial(case: Case, buffers: CheckedBuffers) -> TrialCheck:
    """The judge's one check of a trial, once the candidate's call on ``buffers`` has finished: no guard
    byte written past a buffer, no input modified (both :class:`CandidateFailure`, an integrity verdict),
    and the outputs against the case's reference within the case's tolerance (``tolerance.py``)."""
    overrun = buffers.overrun()
    if overrun is not None:
        raise CandidateFailure(
            EvalStatus.INTEGRITY, f"the candidate wrote past the end of {overrun} (guard bytes changed)"
        )
    changed = modified_inputs(case.abi_inputs, buffers.args)
    if changed:
        raise CandidateFailure(EvalStatus.INTEGRITY, f"the candidate modified input(s) {changed}: inputs are read-only")
    result = compare(buffers.outputs, case.expected, case.atol, case.rtol)
    return TrialCheck(
        seed=case.seed,
        shape_set=case.shape_set,
        distribution=case.distribution,
        passed=result.passed,
        max_abs_err=result.max_abs_err,
        max_rel_err=result.max_rel_err,
        mismatched=result.mismatched,
        total=result.total,
        nan_count=result.nan_count,
        message=result.message,
    )


@dataclass(frozen=True)
class _Tally:
    bad: int
    nans: int
    max_abs: float
    max_rel: float


def bad_mask(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Elements of ``o`` that fail ``r``'s tolerance (exact match for integer references)."""
    if not r.is_floating_point():
        return o != r
    work = torch.float64 if r.dtype == torch.float64 else torch.float32
    o, r = o.to(work), r.to(work)
    ref_nan, out_nan = torch.isnan(r), torch.isnan(o)
    close = ((o - r).abs() <= atol + rtol * r.abs()) & torch.isfinite(r)
    return ~(close | (torch.isinf(r) & (o == r)) | (ref_nan & out_nan))


def _tally(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, chunk: int) -> _Tally:
    """Mismatches, new NaNs and the largest finite errors of two flat tensors, chunk by chunk.

    Counts and maxima accumulate on the device (one host sync at the end), and no boolean-mask
    indexing is used: ``x[mask]`` on an N-d tensor builds an int64 index per element and dimension.
    """
    device = ref.device
    bad = torch.zeros((), dtype=torch.int64, device=device)
    nans = torch.zeros((), dtype=torch.int64, device=device)
    max_abs = torch.zeros((), dtype=torch.float64, device=device)
    max_rel = torch.zeros((), dtype=torch.float64, device=device)
    for lo, hi in chunks(ref.numel(), chunk):
        o, r = out[lo:hi], ref[lo:hi]
        bad += bad_mask(o, r, atol, rtol).sum()
        if not r.is_floating_point():
            continue
        work = torch.float64 if r.dtype == torch.float64 else torch.float32
        o, r = o.to(work), r.to(work)
        nans += (torch.isnan(o) & ~torch.isnan(r)).sum()
        diff = (o - r).abs()
        finite = torch.isfinite(diff)
        zero = torch.zeros((), dtype=work, device=device)
        diff = torch.where(finite, diff, zero)
        max_abs = torch.maximum(max_abs, diff.max().double())
        max_rel = torch.maximum(max_rel, (diff / r.abs().clamp_min(1e-12)).max().double())
    return _Tally(int(bad.item()), int(nans.item()), float(max_abs.item()), float(max_rel.item()))


def _first_bad(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, chunk: int) -> tuple[int, float, float]:
    """The flat index of the first mismatch, with the value found and the value expected there."""
    for lo, hi in chunks(ref.numel(), chunk):
        mask = bad_mask(out[lo:hi], ref[lo:hi], atol, rtol)
        if bool(mask.any().item()):
            where = lo + int(torch.argmax(mask.to(torch.uint8)).item())
            return where, float(out[where].item()), float(ref[where].item())
    return -1, 0.0, 0.0


def quick_match(
    outputs: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    atol: Atol,
    rtol: float,
    chunk: int = CHUNK_ELEMENTS,
) -> bool:
    """Cheap pass/fail used after every timed call (no error figures), chunk by chunk."""
    for out, ref, atol_i in zip(outputs, expected, per_output(atol, len(expected)), strict=True):
        if out.shape != ref.shape:
            return False
        flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
        for lo, hi in chunks(flat_ref.numel(), chunk):
            o, r = flat_out[lo:hi], flat_ref[lo:hi]
            if r.is_floating_point():
                if not torch.allclose(o, r, atol=atol_i, rtol=rtol, equal_nan=True):
                    return False
            elif not torch.equal(o, r):
                return False
    return True
