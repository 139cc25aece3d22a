"""Where a run's kernels sit under the roofline: the task's intensity, each kernel's attained rate.

Every kernel of a run computes the same task, so all of them share one arithmetic intensity — the
task's useful flops over its least traffic (inputs read once, outputs written once; see
:mod:`optiml.profile.roofline`) — and differ in time only: a kernel at time ``t`` attains
``flops / t`` flop/s and ``bytes / t`` B/s of effective bandwidth. Without a flops figure for the
task (``OPTIML['flops']``) only the bandwidth side can be drawn.

The roofs are this machine's: the peaks the profiler cached for the visible GPU, else its datasheet
figures, else (no GPU visible, as on a laptop reading a run made elsewhere) the project's target
GPU's datasheet — the figure's caption says which.
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.errors import OptimlError
from optiml.profile.profiler import ProfileConfig, gpu_name
from optiml.profile.roofline import ASSUMED_GPU, Peaks, Roofline, datasheet_peaks, load_cached, problem_bytes
from optiml.task import Task


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    time_ms: float


@dataclass(frozen=True)
class RooflineView:
    roofline: Roofline
    points: tuple[RooflinePoint, ...]

    @property
    def peaks(self) -> Peaks:
        return self.roofline.peaks

    def attained_flops(self, point: RooflinePoint) -> float | None:
        """flop/s at the point's time; None without the task's flops."""
        flops = self.roofline.flops
        return flops / (point.time_ms * 1e-3) if flops and point.time_ms > 0 else None

    def bandwidth(self, point: RooflinePoint) -> float | None:
        """Effective bytes/s: the task's least traffic over the point's time."""
        moved = self.roofline.min_bytes
        return moved / (point.time_ms * 1e-3) if moved and point.time_ms > 0 else None

    def fraction(self, point: RooflinePoint) -> float | None:
        return self.roofline.fraction(point.time_ms)


def roofline_view(task: Task | None, times_ms: dict[str, float]) -> RooflineView | None:
    """The points ``label → time`` under the task's roofline; None when the task's traffic is unknown."""
    if task is None or not times_ms:
        return None
    min_bytes = problem_bytes(task)
    if not min_bytes:
        return None
    try:
        flops = task.flops()
    except OptimlError:  # a broken flops expression: the bandwidth side is still right
        flops = None
    roofline = Roofline(peaks=local_peaks(), dtype=task.meta.dtype, flops=flops, min_bytes=min_bytes)
    points = tuple(RooflinePoint(label, ms) for label, ms in times_ms.items() if ms > 0)
    return RooflineView(roofline, points)


def local_peaks() -> Peaks:
    """Peaks of this machine's GPU as the profiler last measured them, else from a datasheet (labelled)."""
    gpu = gpu_name()
    if gpu is not None:
        cached = load_cached(ProfileConfig().roofline_cache_dir, gpu)
        sheet = cached or datasheet_peaks(gpu)
        if sheet is not None:
            return sheet
    fallback = datasheet_peaks(ASSUMED_GPU)
    assert fallback is not None  # the target GPU is in the datasheet table
    seen = f"unknown GPU {gpu}" if gpu is not None else "no GPU visible here"
    return Peaks(**{**fallback.to_dict(), "source": f"{fallback.source}; {seen}, {ASSUMED_GPU} assumed"})
