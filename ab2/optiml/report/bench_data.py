"""A bench result (`bench.json`, as `optiml bench` writes it) read for its report, and its fast_p curves."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optiml.bench.metrics import BASELINES, BenchRow, suite_metrics
from optiml.bench.runner import STATE
from optiml.errors import OptimlError


@dataclass(frozen=True)
class BenchReport:
    path: Path  # the bench.json read
    config: dict[str, Any]
    started: str
    metrics: dict[str, Any]  # recomputed from the rows, as `optiml bench` computes them
    rows: tuple[BenchRow, ...]

    @property
    def baselines(self) -> tuple[str, ...]:
        """The baselines some verified row was compared with, in the suite's order."""
        return tuple(b for b in BASELINES if any(r.speedup(b) is not None for r in self.rows))

    @property
    def store(self) -> Path:
        """Where the bench's searches are stored (`optiml report RUN --store …` opens one)."""
        return self.path.parent / "runs.db"


def bench_file(target: Path) -> Path:
    """``target`` itself when it is a file, else the ``bench.json`` in the folder ``target``."""
    path = target / STATE if target.is_dir() else target
    if not path.is_file():
        raise OptimlError(f"{target}: no {STATE} there (give an `optiml bench` output folder or its {STATE})")
    return path


def load_bench_report(target: Path) -> BenchReport:
    path = bench_file(target)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        rows = tuple(BenchRow.from_dict(r) for r in document["rows"])
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise OptimlError(f"{path}: not an `optiml bench` result ({type(exc).__name__}: {exc})") from exc
    config = document.get("config")
    return BenchReport(
        path=path,
        config=config if isinstance(config, dict) else {},
        started=str(document.get("started_at") or document.get("started", "")),
        metrics=suite_metrics(list(rows)),
        rows=rows,
    )


def fast_p_curve(rows: tuple[BenchRow, ...], baseline: str) -> list[tuple[float, float]]:
    """``fast_p`` against ``baseline`` as a step function of p: (p, share of *all* tasks verified and
    more than p times faster). The share drops just past each task's speedup; the points are the
    corners (0, …), (s, before the drop), (s, after) for each distinct speedup s."""
    total = len(rows)
    speedups = sorted(s for r in rows if (s := r.speedup(baseline)) is not None)
    if not total or not speedups:
        return []
    points = [(0.0, len(speedups) / total)]
    for s in sorted(set(speedups)):
        above_before = sum(1 for x in speedups if x >= s)
        above_after = sum(1 for x in speedups if x > s)
        points += [(s, above_before / total), (s, above_after / total)]
    return points
