"""Roofline: device peaks (measured once and cached, or datasheet), a task's floor time, and fractions.

The floor of a task is ``max(bytes / peak bandwidth, flops / peak rate)``: no correct kernel can
beat it. ``bytes`` is the least the task must move (its inputs read once plus its outputs
written once) and ``flops`` its useful work (``OPTIML['flops']``). A candidate's *roofline
fraction* is ``floor / its time``: 1.0 means it runs at the hardware's limit.

Which compute roof applies depends on the task's dtype: fp32 tasks get the CUDA-core FMA rate
(fp32 tolerances rule out TF32 tensor cores), fp16/bf16 tasks the dense tensor-core rate, fp64
the FP64 rate. Measured peaks come from :mod:`optiml.profile.peaks_probe` on the GPU and are
cached as JSON under ``~/.cache/optiml/roofline/<gpu-name>.json``; datasheet figures for
A100/H100/H200 are the labelled fallback.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from optiml.task import Task


@dataclass(frozen=True)
class Peaks:
    """Device ceilings in bytes/s and flop/s (0 = unknown) and where they came from."""

    gpu: str
    dram_bandwidth: float
    fp32_flops: float
    fp16_tensor_flops: float = 0.0
    bf16_tensor_flops: float = 0.0
    fp64_flops: float = 0.0
    source: str = "datasheet"  # "measured …" or "datasheet …"

    def compute_peak(self, dtype: str) -> float:
        """The compute roof that applies to a task of ``dtype`` (flop/s)."""
        if dtype == "float16":
            return self.fp16_tensor_flops or self.fp32_flops
        if dtype == "bfloat16":
            return self.bf16_tensor_flops or self.fp16_tensor_flops or self.fp32_flops
        if dtype == "float64":
            return self.fp64_flops or self.fp32_flops / 2
        return self.fp32_flops

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peaks:
        return cls(
            gpu=str(data["gpu"]),
            dram_bandwidth=float(data["dram_bandwidth"]),
            fp32_flops=float(data["fp32_flops"]),
            fp16_tensor_flops=float(data.get("fp16_tensor_flops", 0.0)),
            bf16_tensor_flops=float(data.get("bf16_tensor_flops", 0.0)),
            fp64_flops=float(data.get("fp64_flops", 0.0)),
            source=str(data.get("source", "datasheet")),
        )


TB, TFLOP = 1e12, 1e12

#: (name pattern, peaks) — dense (no sparsity) figures from NVIDIA's datasheets; first match wins.
DATASHEET: tuple[tuple[str, Peaks], ...] = (
    ("H200", Peaks("NVIDIA H200", 4.8 * TB, 67 * TFLOP, 989 * TFLOP, 989 * TFLOP, 67 * TFLOP)),
    ("H100.*PCIe", Peaks("NVIDIA H100 PCIe", 2.0 * TB, 51 * TFLOP, 756 * TFLOP, 756 * TFLOP, 51 * TFLOP)),
    ("H100", Peaks("NVIDIA H100 SXM", 3.35 * TB, 67 * TFLOP, 989 * TFLOP, 989 * TFLOP, 67 * TFLOP)),
    ("A100.*80GB", Peaks("NVIDIA A100 80GB", 2.039 * TB, 19.5 * TFLOP, 312 * TFLOP, 312 * TFLOP, 19.5 * TFLOP)),
    ("A100", Peaks("NVIDIA A100 40GB", 1.555 * TB, 19.5 * TFLOP, 312 * TFLOP, 312 * TFLOP, 19.5 * TFLOP)),
)

#: The GPU assumed when none is visible and none is configured: the project's target machine.
ASSUMED_GPU = "NVIDIA H200"


def datasheet_peaks(gpu: str) -> Peaks | None:
    """Datasheet peaks for a GPU name (``source`` says they are datasheet figures), or None."""
    for pattern, peaks in DATASHEET:
        if re.search(pattern, gpu, re.IGNORECASE):
            return Peaks(**{**asdict(peaks), "gpu": gpu, "source": f"datasheet ({peaks.gpu})"})
    return None


def cache_path(cache_dir: Path, gpu: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu).strip("_") or "gpu"
    return cache_dir / f"{safe}.json"


def load_cached(cache_dir: Path, gpu: str) -> Peaks | None:
    path = cache_path(cache_dir, gpu)
    try:
        return Peaks.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_cached(cache_dir: Path, peaks: Peaks) -> Path:
    path = cache_path(cache_dir, peaks.gpu)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(peaks.to_dict(), indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


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
