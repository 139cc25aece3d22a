"""Hardware feedback: Nsight Compute profiles, static SASS/ptxas facts, roofline, and a diagnosis.

Public API (imported lazily, so that ``python -m optiml.profile.target`` — which runs under ncu
in the GPU worker setup — loads only the standard library, torch and worker-side modules)::

    profiler = Profiler(task, compiler, ProfileConfig())
    profiles = profiler.profile([kernel_a, kernel_b], reference=True)   # list[Profile]
    diagnosis = profiler.diagnose(kernel, eval_result)                # Diagnosis
    roofline = profiler.roofline()                                    # Roofline
    report = build_report(profiler, kernel, eval_result)              # for `optiml profile`
    report_to_json(report)                                            # str (the CLI draws it: cli.views.profile)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from optiml.profile.diagnosis import Diagnosis
    from optiml.profile.findings import Bottleneck
    from optiml.profile.metrics import DEFAULT_METRICS, KernelMetrics
    from optiml.profile.profiler import ProfileConfig, Profiler
    from optiml.profile.report import ProfileReport, build_report, report_to_json
    from optiml.profile.results import KernelProfile, Profile
    from optiml.profile.roofline import Peaks, Roofline
    from optiml.profile.static import StaticAnalysis

_EXPORTS = {
    "Bottleneck": "optiml.profile.findings",
    "Diagnosis": "optiml.profile.diagnosis",
    "DEFAULT_METRICS": "optiml.profile.metrics",
    "KernelMetrics": "optiml.profile.metrics",
    "ProfileConfig": "optiml.profile.profiler",
    "Profiler": "optiml.profile.profiler",
    "ProfileReport": "optiml.profile.report",
    "build_report": "optiml.profile.report",
    "report_to_json": "optiml.profile.report",
    "KernelProfile": "optiml.profile.results",
    "Profile": "optiml.profile.results",
    "Peaks": "optiml.profile.roofline",
    "Roofline": "optiml.profile.roofline",
    "StaticAnalysis": "optiml.profile.static",
}

__all__ = [
    "DEFAULT_METRICS",
    "Bottleneck",
    "Diagnosis",
    "KernelMetrics",
    "KernelProfile",
    "Peaks",
    "Profile",
    "ProfileConfig",
    "ProfileReport",
    "Profiler",
    "Roofline",
    "StaticAnalysis",
    "build_report",
    "report_to_json",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'optiml.profile' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
