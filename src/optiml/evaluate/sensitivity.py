"""Outputs that say little about their inputs, and inputs on which a guess at them fails (issue 39, class 4).

A scalar loss over millions of values, or a row sum over thousands, is a *low-information* output:
far fewer output values than input values. Such an output can be *estimated* — from a sample of
the input, or from no input at all — and the trivial-output check (zeros, a constant, an input:
:mod:`optiml.evaluate.tolerance`) covers neither. So, at task preparation, for each low-information
output the reference is measured against its tolerance:

* **across input draws** — the same distribution, another seed: where it moves less than its
  tolerance, an answer that ignores the input passes (said in a note);
* **against inputs that differ in a small region** (:data:`PERTURBATIONS`): a few outliers, a few
  shifted rows, a few rows scaled. Where one moves the output by more than :data:`MARGIN` times its
  tolerance, a kernel that reads only part of the input cannot know by how much, so verification
  adds that perturbation as an input distribution of its own (:meth:`TaskRuntime.distributions`):
  a few more trials each, and an estimator from a sample fails there.

The movement is reported as a multiple of the tolerance (``|Δref| / (atol + rtol·|ref|)``, the largest
over the output's elements). Standard library and torch only (GPU worker side).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optiml.evaluate.checks import CHUNK_ELEMENTS, chunks

#: perturbations, each a distribution name verification can use (native inputs, then perturbed)
PERTURBATIONS = ("outliers", "row_shift", "row_scale")
#: an output is low-information when the forward's floating inputs hold this many times more values
LOW_INFORMATION_RATIO = 256
#: a perturbation is used for verification when it moves the output by this many tolerances
MARGIN = 4.0
OUTLIER_SCALE = 64.0  # an outlier adds this many RMS of its tensor
ROW_SHIFT = 4.0  # a shifted row adds this many RMS
ROW_SCALE = 8.0  # a scaled row is multiplied by this
_SEED_OFFSET = 104_729
#: above this many bytes of inputs the redraw is not measured: a second native draw is generated on the
#: CPU (KernelBench's inputs take tens of seconds there); the perturbations are copies on the device
REDRAW_MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class Finding:
    """What one low-information output does under redraws and perturbations."""

    output: int
    shape: tuple[int, ...]
    inputs: int  # floating input values it is computed from
    redraw: float | None  # movement across input draws, in tolerances (None: not measured, large inputs)
    moved: dict[str, float]  # perturbation → movement in tolerances (inf: the reference is not finite there)

    def note(self, where: str, used: Sequence[str]) -> str:
        shape = "a scalar" if not self.shape else f"shape {self.shape}"
        if self.redraw is None:
            drawn = f"not measured across input draws (inputs over {REDRAW_MAX_BYTES >> 30} GiB)"
        else:
            drawn = f"it moves {self.redraw:.3g}x its tolerance across input draws" + (
                " (an answer that ignores the input passes)" if self.redraw <= 1.0 else ""
            )
        parts = [
            f"output {self.output} ({where}) is low-information ({shape} from {self.inputs:,} input values): {drawn}",
            ", ".join(f"{kind} {_times(value)}" for kind, value in self.moved.items()),
        ]
        if used:
            parts.append(f"verification adds {', '.join(used)} inputs, where an estimate from a sample fails")
        else:
            parts.append(f"no perturbation moves it {MARGIN:g}x its tolerance: an estimate from a sample may pass")
        return "; ".join(parts)


def _times(value: float) -> str:
    return "makes the reference non-finite (not used)" if value == float("inf") else f"{value:.3g}x"


def low_information(args: Sequence[Any], expected: Sequence[torch.Tensor]) -> list[int]:
    """Indexes of the floating outputs with far fewer values than the floating inputs."""
    values = sum(a.numel() for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
    return [
        i
        for i, out in enumerate(expected)
        if out.is_floating_point() and values > 0 and out.numel() * LOW_INFORMATION_RATIO <= values
    ]


def perturb(args: Sequence[Any], kind: str, seed: int) -> list[Any]:
    """A copy of ``args`` whose floating tensors differ from them in a small, seeded region."""
    if kind not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {kind!r} ({', '.join(PERTURBATIONS)})")
    out: list[Any] = []
    for index, value in enumerate(args):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0:
            generator = torch.Generator(device=value.device).manual_seed(seed * 31 + index + _SEED_OFFSET)
            out.append(_PERTURB[kind](value, generator))
        else:
            out.append(value)
    return out


def _rms(x: torch.Tensor) -> float:
    """RMS of ``x`` (1 where it is 0 or not finite), summed in float64 chunk by chunk: no full-size copy."""
    flat, total = x.reshape(-1), 0.0
    for lo, hi in chunks(flat.numel(), CHUNK_ELEMENTS):
        total += float(flat[lo:hi].float().square().sum(dtype=torch.float64).item())
    value = (total / max(1, flat.numel())) ** 0.5
    return value if 0 < value < float("inf") else 1.0


def _outliers(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    flat = x.clone().reshape(-1)
    count = max(16, flat.numel() // 4096)
    where = torch.randint(0, flat.numel(), (count,), generator=generator, device=x.device)
    # sizes spread over [0.5, 1.5] x the scale: a sample holding its share of the outliers does not
    # hold their share of the sum too
    size = 0.5 + torch.rand(count, generator=generator, device=x.device, dtype=torch.float64)
    flat[where] += (OUTLIER_SCALE * _rms(x) * size).to(flat.dtype)
    return flat.reshape(x.shape)


def _rows(x: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` as (rows, last dimension) — a 1-D tensor as blocks of 256 — and a few rows of it."""
    width = x.shape[-1] if x.dim() > 1 else min(256, x.numel())
    rows = x.clone().reshape(-1, width) if x.numel() % width == 0 else x.clone().reshape(1, -1)
    count = max(1, rows.shape[0] // 256)
    return rows, torch.randperm(rows.shape[0], generator=generator, device=x.device)[:count]


def _row_shift(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    rows, chosen = _rows(x, generator)
    rows[chosen] += ROW_SHIFT * _rms(x)
    return rows.reshape(x.shape)


def _row_scale(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    rows, chosen = _rows(x, generator)
    rows[chosen] *= ROW_SCALE
    return rows.reshape(x.shape)


_PERTURB: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "outliers": _outliers,
    "row_shift": _row_shift,
    "row_scale": _row_scale,
}


def movement(moved: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> float:
    """The largest ``|moved - ref| / (atol + rtol·|ref|)``; inf where ``moved`` is not finite but ``ref`` is."""
    work = torch.float64
    m, r = moved.to(work).reshape(-1), ref.to(work).reshape(-1)
    finite = torch.isfinite(r)
    if bool((finite & ~torch.isfinite(m)).any().item()):
        return float("inf")
    if not bool(finite.any().item()):
        return 0.0
    ratio = (m - r).abs()[finite] / (atol + rtol * r.abs()[finite])
    return float(ratio.max().item())


def measure(
    args: Sequence[Any],
    expected: Sequence[torch.Tensor],
    atol: Sequence[float],
    rtol: float,
    reference: Callable[[Sequence[Any]], list[torch.Tensor]],
    redraw: Callable[[], Sequence[Any]],
    seed: int,
) -> list[Finding]:
    """Findings for every low-information output of one case: ``reference`` runs the task's model on
    other arguments, ``redraw`` makes the arguments of another seed of the same distribution (called
    only for inputs up to :data:`REDRAW_MAX_BYTES`)."""
    outputs = low_information(args, expected)
    if not outputs:
        return []
    values = sum(a.numel() for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
    size = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    other = reference(redraw()) if size <= REDRAW_MAX_BYTES else None
    moved: dict[int, dict[str, float]] = {i: {} for i in outputs}
    for kind in PERTURBATIONS:
        result = reference(perturb(args, kind, seed))
        for i in outputs:
            moved[i][kind] = movement(result[i], expected[i], atol[i], rtol)
        del result
    return [
        Finding(
            i,
            tuple(expected[i].shape),
            values,
            movement(other[i], expected[i], atol[i], rtol) if other is not None else None,
            moved[i],
        )
        for i in outputs
    ]


def useful(findings: Sequence[Finding]) -> list[str]:
    """The perturbations that move some low-information output by :data:`MARGIN` tolerances (finitely)."""
    finite = [k for k in PERTURBATIONS if all(f.moved.get(k, 0.0) < float("inf") for f in findings)]
    return [k for k in finite if any(f.moved.get(k, 0.0) >= MARGIN for f in findings)]
