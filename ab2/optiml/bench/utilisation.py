"""GPU utilisation over a bench run: nvidia-smi's own sampling loop, one process for the whole run.

``nvidia-smi --query-gpu=... -lms PERIOD`` prints one CSV line per GPU every period; a reader thread
keeps, per GPU, the utilisation samples (percent of the period a kernel ran, as NVML defines it) and
the peak memory in use. The summary goes into the bench's state file beside the suite's wall time, so
a suite's figures say how busy its GPUs were. Where nvidia-smi is missing or fails, the summary says
why instead of inventing a figure.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

QUERY = "--query-gpu=index,utilization.gpu,memory.used"


@dataclass
class _Samples:
    utilisation: list[float] = field(default_factory=list)
    peak_memory_mib: float = 0.0


def physical_indices(gpus: Sequence[int | None]) -> list[int] | None:
    """nvidia-smi's indices of the bench's GPUs (CUDA indices go through CUDA_VISIBLE_DEVICES when it
    lists integers); None: every GPU (the default device, or a mapping nvidia-smi cannot follow)."""
    wanted = [0] if any(g is None for g in gpus) else [int(g) for g in gpus if g is not None]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return wanted
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if not all(e.isdigit() for e in entries):  # UUIDs or MIG names: report every GPU
        return None
    return [int(entries[g]) for g in wanted if g < len(entries)]


class UtilisationSampler:
    """Samples GPU utilisation from ``start`` to ``stop`` (see the module docstring)."""

    def __init__(self, gpus: Sequence[int | None], period_ms: int = 500, command: str = "nvidia-smi") -> None:
        self.indices = physical_indices(gpus)
        self.period_ms = period_ms
        self.command = command
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._samples: dict[int, _Samples] = {}
        self._problem = ""

    def start(self) -> None:
        executable = shutil.which(self.command)
        if executable is None:
            self._problem = f"{self.command} not found"
            return
        try:
            self._process = subprocess.Popen(
                [executable, QUERY, "--format=csv,noheader,nounits", "-lms", str(self.period_ms)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError as exc:
            self._problem = f"{self.command} could not start: {exc}"
            return
        self._reader = threading.Thread(target=self._read, name="optiml-gpu-utilisation", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                index, utilisation, memory = int(parts[0]), float(parts[1]), float(parts[2])
            except ValueError:  # "[N/A]" on GPUs that do not report a field
                continue
            if self.indices is not None and index not in self.indices:
                continue
            samples = self._samples.setdefault(index, _Samples())
            samples.utilisation.append(utilisation)
            samples.peak_memory_mib = max(samples.peak_memory_mib, memory)

    def stop(self) -> dict[str, Any]:
        """End sampling; per GPU: mean utilisation (%), the share of samples with a kernel running,
        the peak memory in use (MiB) and the sample count, or why nothing was measured."""
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        if not self._samples:
            return {"tool": self.command, "unavailable": self._problem or f"{self.command} reported no samples"}
        gpus = {
            str(index): {
                "mean_pct": round(statistics.fmean(s.utilisation), 1),
                "busy_fraction": round(sum(u > 0 for u in s.utilisation) / len(s.utilisation), 3),
                "peak_memory_mib": s.peak_memory_mib,
                "samples": len(s.utilisation),
            }
            for index, s in sorted(self._samples.items())
        }
        return {"tool": self.command, "period_ms": self.period_ms, "gpus": gpus}


def describe(summary: dict[str, Any]) -> str:
    """One line for the bench's Markdown report."""
    if "gpus" not in summary:
        return f"GPU utilisation: not measured ({summary.get('unavailable', 'no samples')})."
    parts = [
        f"GPU {index} {g['mean_pct']:.0f} % mean, kernels running in {g['busy_fraction']:.0%} of {g['samples']} samples"
        for index, g in summary["gpus"].items()
    ]
    return "GPU utilisation (nvidia-smi): " + "; ".join(parts) + "."
