"""Strategies compared on replayed landscapes: one search per (landscape, strategy, seed), and intervals.

:func:`replay_search` runs the real search (engine, strategy, structural proposer, verdict) on a
:class:`~optiml.search.replay.evaluator.ReplayEvaluator` and scores the kernel the search returns
by its *recorded* time (noise-free: the record's median, or the model's), so a run is judged by
what its choice is worth, not by a lucky draw. ``seed`` seeds both the proposer's tie-breaks and
the evaluator's noise; the strategies of one seed see the same noise for the same kernel (common
random numbers), so their differences are paired.

:func:`summarise` reports, per landscape and strategy, the geometric mean speedup over the root
with a 95 % t-interval of the mean log speedup, and, per pair of strategies, the paired
difference of log speedups with its interval: a strategy is *ahead* of another on a landscape when
that interval lies above 0.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from optiml.search.config import Budgets, SearchConfig
from optiml.search.replay.evaluator import ReplayEvaluator
from optiml.search.replay.record import RecordedLandscape
from optiml.search.runner import run_search
from optiml.store import RunStore
from optiml.task import Task
from optiml.templates.assemble import read_marker
from optiml.templates.kernels import TemplateKernels

#: two-sided 97.5 % quantiles of Student's t by degrees of freedom (beyond 30: the normal's 1.96)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131)
_T975_30 = 2.042


@dataclass(frozen=True)
class ScoredRun:
    """One search's result: on a replayed landscape, or on the GPU (``speedup`` then the re-timed one)."""

    landscape: str  # the landscape's (or the task's) name
    strategy: str
    seed: int
    evaluations: int
    speedup: float  # recorded root time over the recorded time of the kernel the search returned
    confirmed: bool
    misses: int  # evaluations the record could not answer


def replay_search(
    landscape: RecordedLandscape,
    task: Task,
    kernels: TemplateKernels,
    config: SearchConfig,
    *,
    seed: int,
    evals: int,
    workdir: Path | None = None,
) -> ScoredRun:
    """One search of ``config``'s strategy on ``landscape`` with the structural proposer (see the module)."""
    from optiml.propose.structural import StructuralProposer

    root_configs = landscape.root()
    root = kernels.render(list(root_configs))
    evaluator = ReplayEvaluator([landscape], seed=seed)
    config = replace(config, budgets=Budgets(max_evaluations=evals, max_seconds=None), reproducible=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp, RunStore(Path(tmp) / "runs.db") as store:
        outcome = run_search(task, root, evaluator, [StructuralProposer(seed=seed)], None, store, config)
    return ScoredRun(
        landscape=landscape.task,
        strategy=config.strategy,
        seed=seed,
        evaluations=outcome.evaluations,
        speedup=_recorded_ms(landscape, root_configs) / _recorded_ms(landscape, read_marker(outcome.best_kernel.code)),
        confirmed=outcome.confirmed,
        misses=sum(evaluator.misses.values()),
    )


def _recorded_ms(landscape: RecordedLandscape, configs: Sequence[object] | None) -> float:
    found = landscape.lookup(configs) if configs is not None else None  # type: ignore[arg-type]
    if found is None or found.timing is None:
        raise ValueError(f"{landscape.task}: the search returned a kernel with no recorded time")
    return found.timing.median_ms


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Interval:
        """The mean of ``values`` with a two-sided 95 % t-interval."""
        n = len(values)
        mean = statistics.fmean(values)
        if n < 2:
            return cls(mean, -math.inf, math.inf, n)
        t = _T975[n - 2] if n - 2 < len(_T975) else _T975_30
        half = t * statistics.stdev(values) / math.sqrt(n)
        return cls(mean, mean - half, mean + half, n)

    def as_speedup(self) -> dict[str, float | int]:
        """The interval of a mean log speedup, as a geometric-mean speedup and its band."""
        return {
            "geomean": round(math.exp(self.mean), 4),
            "low": round(math.exp(self.low), 4),
            "high": round(math.exp(self.high), 4),
            "n": self.n,
        }


def summarise(runs: Sequence[ScoredRun], strategies: Sequence[str]) -> dict[str, object]:
    """Per landscape: each strategy's geomean speedup with its interval, and paired differences."""
    landscapes = list(dict.fromkeys(r.landscape for r in runs))
    per_landscape: dict[str, object] = {}
    ahead: dict[str, int] = {}
    for name in landscapes:
        logs = {
            s: {r.seed: math.log(r.speedup) for r in runs if r.landscape == name and r.strategy == s}
            for s in strategies
        }
        cells: dict[str, object] = {s: Interval.of(list(v.values())).as_speedup() for s, v in logs.items() if v}
        for i, first in enumerate(strategies):
            for second in strategies[i + 1 :]:
                seeds = sorted(set(logs[first]) & set(logs[second]))
                if len(seeds) < 2:
                    continue
                diff = Interval.of([logs[first][s] - logs[second][s] for s in seeds])
                key = f"{first} vs {second}"
                cells[key] = {**diff.as_speedup(), "verdict": _verdict(diff, first, second)}
                if diff.low > 0:
                    ahead[f"{first} ahead of {second}"] = ahead.get(f"{first} ahead of {second}", 0) + 1
                elif diff.high < 0:
                    ahead[f"{second} ahead of {first}"] = ahead.get(f"{second} ahead of {first}", 0) + 1
        per_landscape[name] = cells
    overall = {
        s: Interval.of([math.log(r.speedup) for r in runs if r.strategy == s]).as_speedup()
        for s in strategies
        if any(r.strategy == s for r in runs)
    }
    return {"landscapes": per_landscape, "overall": overall, "ahead_beyond_the_interval": ahead}


def _verdict(diff: Interval, first: str, second: str) -> str:
    if diff.low > 0:
        return f"{first} ahead"
    if diff.high < 0:
        return f"{second} ahead"
    return "tie within the interval"
