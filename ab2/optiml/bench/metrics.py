"""One row per task, and the suite's metrics as KernelBench and published systems report them.

``fast_p`` (KernelBench): the share of *all* tasks whose kernel is both verified and faster than the
baseline by more than a factor ``p`` (``fast_0`` is the correctness rate). Geomean speedups and the
median fraction of the DRAM floor are over the verified tasks.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

FAST_P = (0.0, 1.0, 1.5, 2.0)
BASELINES = ("eager", "eager_tf32", "compile")  # exact fp32, PyTorch's default settings (TF32 convs), compile


@dataclass
class BenchRow:
    task: str
    file: str
    status: str  # "verified" | "no kernel" | "failed"
    reason: str = ""
    plan: str = ""
    root: str = ""
    best_ms: float | None = None
    baselines_ms: dict[str, float] = field(default_factory=dict)  # "eager", "eager_tf32", "compile"
    floor_ms: float | None = None
    evaluations: int = 0
    confirmed: bool = False
    run_id: str = ""
    gpu: int | None = None
    device: str = ""  # the GPU's name as its worker reports it: every time in the row is from it
    wall_s: float = 0.0
    cost_usd: float = 0.0

    @property
    def verified(self) -> bool:
        return self.status == "verified" and self.best_ms is not None

    def speedup(self, baseline: str) -> float | None:
        ref = self.baselines_ms.get(baseline)
        if not self.verified or ref is None or not self.best_ms:
            return None
        return ref / self.best_ms

    @property
    def roofline_fraction(self) -> float | None:
        if not self.verified or not self.floor_ms or not self.best_ms:
            return None
        return self.floor_ms / self.best_ms

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["speedups"] = {b: self.speedup(b) for b in self.baselines_ms}
        data["roofline_fraction"] = self.roofline_fraction
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRow:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def suite_metrics(rows: list[BenchRow]) -> dict[str, Any]:
    total = len(rows)
    verified = [r for r in rows if r.verified]
    metrics: dict[str, Any] = {"tasks": total, "verified": len(verified)}
    metrics["correctness"] = len(verified) / total if total else 0.0
    for baseline in BASELINES:
        speedups = [s for r in verified if (s := r.speedup(baseline)) is not None]
        if not speedups:
            continue
        metrics[f"geomean_vs_{baseline}"] = statistics.geometric_mean(speedups)
        for p in FAST_P:
            metrics[f"fast_{p:g}_vs_{baseline}"] = sum(1 for s in speedups if s > p) / total
    fractions = [f for r in verified if (f := r.roofline_fraction) is not None]
    if fractions:
        metrics["median_roofline_fraction"] = statistics.median(fractions)
    metrics["not_verified"] = sorted(r.task for r in rows if not r.verified)
    return metrics


def markdown(rows: list[BenchRow], metrics: dict[str, Any], notes: Sequence[str] = ()) -> str:
    """The per-task table and the suite metrics, as Markdown; ``notes`` follow as lines of their own."""
    devices = sorted({r.device for r in rows if r.device})
    lines = [f"Measured on {', '.join(devices)}; each task's kernel and baselines on one GPU.", ""] if devices else []
    lines += [
        "| task | status | best ms | eager ms | eager TF32 ms | compile ms | × eager | × eager TF32 | × compile "
        "| roofline | evals |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = [
            r.task,
            r.status if r.verified else f"{r.status}: {r.reason[:60]}",
            _num(r.best_ms),
            _num(r.baselines_ms.get("eager")),
            _num(r.baselines_ms.get("eager_tf32")),
            _num(r.baselines_ms.get("compile")),
            _ratio(r.speedup("eager")),
            _ratio(r.speedup("eager_tf32")),
            _ratio(r.speedup("compile")),
            f"{r.roofline_fraction:.0%}" if r.roofline_fraction is not None else "",
            str(r.evaluations),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| metric | value |", "| --- | ---: |"]
    for key, value in metrics.items():
        shown = (
            f"{value:.3f}" if isinstance(value, float) else ", ".join(value) if isinstance(value, list) else str(value)
        )
        lines.append(f"| {key} | {shown} |")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else ""


def _ratio(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else ""
