"""The harness's GPU memory plan: how many cached cases and timing input sets fit beside the task.

A *case* is one (seed, shape set, distribution): its inputs (the pristine copies) and its
reference outputs, ``case_bytes`` in all. Besides the cached cases the harness holds one set of
trial buffers (input copies and poisoned outputs: about ``case_bytes`` again), the timing's input
sets (each about ``case_bytes``), a reference forward's temporaries while a case is built
(budgeted as one more ``case_bytes``), the extra slots of a timed window (each call of a window has
inputs, outputs and a reference of its own: at most ``WINDOW_BYTES`` and a quarter of the device in
all, :func:`window_bytes`, of which the trial buffers are the first slot) and a fixed overhead (the
L2-flush buffer, chunked comparison temporaries, the CUDA context). So the peak is at most::

    (max_cases + 1 + timing_sets + 1) × case_bytes + (window_bytes − case_bytes)⁺ + FIXED_OVERHEAD_BYTES

and ``max_cases`` shrinks (down to one) until that fits in ``USABLE_FRACTION`` of the device:
fewer cached copies, rebuilt on demand, when memory is short. With the defaults (up to 4 cases,
2 timing sets) the stated bound is 8 × case_bytes + 18 GiB on an H200, i.e. at most 8× the task's
footprint (inputs + outputs + reference outputs ≥ case_bytes) plus 18 GiB (on an 80 GiB card the
window's quarter of the device caps it at ~20 GiB).

Standard library and torch only (GPU worker side).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

MAX_CASES = 4
FIXED_OVERHEAD_BYTES = 2 * 2**30
USABLE_FRACTION = 0.92
#: A timed window's slots, all together (the harness's window_width): sixteen ~0.8 GiB slots, so a short call shares
#: the window's own cost with up to 16 calls. On 2026-12-02 this budget read memory-bound kernels ~30 % slower than
#: 4 GiB (``window_budget_ab.json``): preparing sixteen slots took the judge longer than the candidate process polled
#: for its next request (50 ms), so it was asleep when the window began. With the poll at 1 s (candidate_process.POLL_S)
#: 16 GiB reads faster per call than 4 GiB (H100, 2026-12-05, ``window_residual_poll_h100.json``: 40_LayerNorm
#: 0.367 vs 0.388 ms, transpose 0.207 vs 0.215, against 0.348 and 0.195 on the candidate's own events).
WINDOW_BYTES = 16 * 2**30


def window_bytes(device_bytes: int) -> int:
    """The most a timed window's slots may hold: ``WINDOW_BYTES``, and a quarter of the device."""
    return WINDOW_BYTES if device_bytes <= 0 else min(WINDOW_BYTES, device_bytes // 4)


@dataclass(frozen=True)
class MemoryPlan:
    """What the harness keeps on the device for one task (bytes; counts)."""

    device_bytes: int
    case_bytes: int
    max_cases: int
    timing_sets: int

    @property
    def bound_bytes(self) -> int:
        """The planned peak: cases, trial buffers, timing sets, a reference's temporaries, a timed
        window's slots, overhead."""
        cases = (self.max_cases + self.timing_sets + 2) * self.case_bytes
        return cases + self.window_extra_bytes + FIXED_OVERHEAD_BYTES

    @property
    def window_extra_bytes(self) -> int:
        """A timed window's slots beyond the trial buffers: ``w`` slots of ``s >= case_bytes`` bytes each fit
        in the window's budget ``W``, so the ``w - 1`` extra ones hold at most ``W - s <= W - case_bytes``
        (nothing when not even one fits: the call is timed alone)."""
        return max(0, window_bytes(self.device_bytes) - self.case_bytes)

    @property
    def fits(self) -> bool:
        return self.bound_bytes <= USABLE_FRACTION * self.device_bytes

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["bound_bytes"] = self.bound_bytes
        return data


def plan_memory(device_bytes: int, case_bytes: int, timing_sets: int, max_cases: int = MAX_CASES) -> MemoryPlan:
    """The largest plan (cached cases first given up, then timing sets) that fits the device.

    ``device_bytes`` 0 means unbounded (CPU and meta runtimes): the plan asked for is kept.
    """
    plan = MemoryPlan(device_bytes, case_bytes, max(1, max_cases), max(1, timing_sets))
    if device_bytes <= 0:
        return plan
    while not plan.fits and plan.max_cases > 1:
        plan = MemoryPlan(device_bytes, case_bytes, plan.max_cases - 1, plan.timing_sets)
    while not plan.fits and plan.timing_sets > 1:
        plan = MemoryPlan(device_bytes, case_bytes, plan.max_cases, plan.timing_sets - 1)
    return plan


def device_bytes(device: torch.device) -> int:
    """Total memory of a CUDA device; 0 (unbounded) for any other device."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.get_device_properties(device).total_memory)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_bytes(device: torch.device) -> int:
    """The most memory torch's allocator held on ``device`` since the last :func:`reset_peak` (this
    process's tensors; the judge's shared blocks are allocated outside it, see :func:`used_bytes`)."""
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0


def used_bytes(device: torch.device) -> int:
    """Device memory in use now by everything (torch's cache, shared blocks, every process's context)."""
    if device.type != "cuda":
        return 0
    free, total = torch.cuda.mem_get_info(device)
    return int(total - free)
