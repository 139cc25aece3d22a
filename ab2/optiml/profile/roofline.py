"""Roofline: a task's floor time and fractions under a device's peaks (:mod:`optiml.peaks`).

The floor of a task is ``max(bytes / peak bandwidth, flops / peak rate)``: no correct kernel can
beat it. ``bytes`` is the least the task must move (its inputs read once plus its outputs
written once) and ``flops`` its useful work (``OPTIML['flops']``). A candidate's *roofline
fraction* is ``floor / its time``: 1.0 means it runs at the hardware's limit.

Which compute roof applies depends on the task's dtype: fp32 tasks get the CUDA-core FMA rate
(fp32 tolerances rule out TF32 tensor cores), fp16/bf16 tasks the dense tensor-core rate, fp64
the FP64 rate. Measured peaks come from :mod:`optiml.peaks.probe` on the GPU and are
cached as JSON under ``~/.cache/optiml/roofline/<gpu-name>.json``; datasheet figures for
A100/H100/H200 are the labelled fallback (:mod:`optiml.peaks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optiml.peaks import (
    ASSUMED_GPU,
    DATASHEET,
    TB,
    TFLOP,
    Peaks,
    cache_path,
    datasheet_peaks,
    load_cached,
    save_cached,
)
from optiml.task import Task

#: The peaks live in :mod:`optiml.peaks` (the evaluator's physics floor uses them too); these names stay.
__all__ = [
    "ASSUMED_GPU",
    "DATASHEET",
    "TB",
    "TFLOP",
    "Peaks",
    "Roofline",
    "cache_path",
    "datasheet_peaks",
    "load_cached",
    "problem_bytes",
    "save_cached",
]


@dataclass(frozen=True)
class Roofline:
    """A task's position under one device's roofline."""

    peaks: Peaks
    dtype: str
    flops: float | None  # useful flops of one forward
    min_bytes: int | None  # inputs + outputs, each moved once

    @property
    def compute_peak(self) -> float:
        return self.peaks.compute_peak(self.dtype)

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity in flop/byte of the task's minimum traffic."""
        if self.flops is None or not self.min_bytes:
            return None
        return self.flops / self.min_bytes

    @property
    def ridge(self) -> float | None:
        """Intensity where the memory and compute roofs meet (flop/byte)."""
        if not self.peaks.dram_bandwidth or not self.compute_peak:
            return None
        return self.compute_peak / self.peaks.dram_bandwidth

    @property
    def memory_floor_ms(self) -> float | None:
        if not self.min_bytes or not self.peaks.dram_bandwidth:
            return None
        return self.min_bytes / self.peaks.dram_bandwidth * 1e3

    @property
    def compute_floor_ms(self) -> float | None:
        if not self.flops or not self.compute_peak:
            return None
        return self.flops / self.compute_peak * 1e3

    @property
    def floor_ms(self) -> float | None:
        floors = [f for f in (self.memory_floor_ms, self.compute_floor_ms) if f is not None]
        return max(floors) if floors else None

    @property
    def regime(self) -> str | None:
        """``"memory"`` or ``"compute"``: which roof the task's floor sits under."""
        memory, compute = self.memory_floor_ms, self.compute_floor_ms
        if memory is None and compute is None:
            return None
        return "compute" if (compute or 0.0) > (memory or 0.0) else "memory"

    def fraction(self, time_ms: float | None) -> float | None:
        """Floor over achieved time: 1.0 is the roof; a value above 1 means the time is suspect."""
        floor = self.floor_ms
        if floor is None or not time_ms or time_ms <= 0:
            return None
        return floor / time_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "peaks": self.peaks.to_dict(),
            "dtype": self.dtype,
            "flops": self.flops,
            "min_bytes": self.min_bytes,
            "intensity": self.intensity,
            "ridge": self.ridge,
            "memory_floor_ms": self.memory_floor_ms,
            "compute_floor_ms": self.compute_floor_ms,
            "floor_ms": self.floor_ms,
            "regime": self.regime,
        }


def problem_bytes(task: Task, shape_set: int = 0) -> int | None:
    """Inputs + outputs of one forward, from shapes alone (runs the model on PyTorch's meta device).

    No memory is allocated and no GPU is needed; None if the model does not support meta tensors.
    """
    import torch

    from optiml.evaluate.runtime import TaskRuntime

    def nbytes(values: list[object]) -> int:
        return sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))

    try:  # args, model and outputs only: a case would also decide tolerances, which reads values
        runtime = TaskRuntime(task, "meta")
        args = runtime.make_args(0, shape_set)
        model = runtime.build_model(0, shape_set)
        outputs = runtime.run_reference(model, args)
        return nbytes([*args, *model.state_dict().values()]) + nbytes(list(outputs))
    except Exception:  # an op without a meta kernel: the caller falls back to the worker's figure
        return None
