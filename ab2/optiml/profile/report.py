"""``optiml profile TASK KERNEL.cu``'s report as data: an evaluation and its diagnosis, and their JSON.

The CLI draws it for a terminal (:mod:`optiml.cli.views.profile`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from optiml.kernel.source import KernelSource
from optiml.profile.diagnosis import Diagnosis
from optiml.profile.profiler import Profiler
from optiml.values import EvalResult


@dataclass(frozen=True)
class ProfileReport:
    task: str
    kernel_digest: str
    evaluation: EvalResult
    diagnosis: Diagnosis

    def to_dict(self) -> dict[str, Any]:
        speedup = self.evaluation.speedup("eager")
        return {
            "task": self.task,
            "kernel_digest": self.kernel_digest,
            "status": self.evaluation.status.value,
            "message": self.evaluation.message,
            "time_ms": self.evaluation.time_ms,
            "speedup_vs_eager": speedup.value if speedup else None,
            "diagnosis": self.diagnosis.to_dict(),
        }


def build_report(profiler: Profiler, kernel: KernelSource, result: EvalResult) -> ProfileReport:
    """Diagnose an evaluated kernel (profiled with ncu only if ``result`` is verified)."""
    return ProfileReport(
        task=profiler.task.name,
        kernel_digest=kernel.digest,
        evaluation=result,
        diagnosis=profiler.diagnose(kernel, result),
    )


def report_to_json(report: ProfileReport) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str)
