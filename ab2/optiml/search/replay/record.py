"""A recorded structural landscape: what every configuration of a task's template kernels measured.

``benchmarks/record_landscape.py`` renders every legal configuration of a task's planned kernels
(:mod:`optiml.search.replay.space`), evaluates each once on a GPU, re-evaluates a sample of the
verified ones to measure run-to-run noise, and writes them as JSON (``landscapes: [...]``). A
:class:`RecordedLandscape` answers a configuration:

* ``exhaustive`` landscapes (one kernel, or a product of spaces small enough) hold every
  combination: the answer is the measurement itself;
* ``sweeps`` landscapes (several kernels whose product is too large) hold the default
  configuration and, per kernel, every configuration of that kernel with the others at their
  default. A combination is *modelled*: kernels run one after another, so its time is the
  default's plus each changed kernel's difference from it (``t = t_d + sum_g (t_g - t_d)``), and
  it fails as the first changed kernel whose sweep entry failed.

A configuration outside the record (another plan, a knob value the record's templates did not
offer) gets None; the replay evaluator counts it as a miss.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optiml.errors import ConfigError
from optiml.kernel.source import KernelSource
from optiml.templates.assemble import read_marker
from optiml.templates.base import GroupConfig, configs_to_json
from optiml.values import EvalResult, EvalStatus, TimingStats, VerifyReport

EXHAUSTIVE = "exhaustive"
SWEEPS = "sweeps"
MODES = (EXHAUSTIVE, SWEEPS)


def config_key(configs: Sequence[GroupConfig]) -> str:
    """The canonical text of a configuration list (the record's key)."""
    return configs_to_json(list(configs))


@dataclass(frozen=True)
class Measurement:
    """One configuration's recorded outcome: its status, and its timing when it verified."""

    configs: tuple[GroupConfig, ...]
    status: EvalStatus
    message: str = ""
    timing: TimingStats | None = None
    floor_ms: float | None = None

    @property
    def ok(self) -> bool:
        return self.status is EvalStatus.OK and self.timing is not None

    def result(self) -> EvalResult:
        """The measurement as the evaluator's result (a verified one carries a passed report)."""
        return EvalResult(
            self.status,
            self.message,
            verify=VerifyReport(passed=True) if self.ok else None,
            timing=self.timing,
            floor_ms=self.floor_ms,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "configs": [c.to_dict() for c in self.configs],
            "status": self.status.value,
            "message": self.message,
            "timing": _timing_dict(self.timing) if self.timing is not None else None,
            "floor_ms": self.floor_ms,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        timing = data.get("timing")
        return cls(
            configs=tuple(GroupConfig.from_dict(c) for c in data["configs"]),
            status=EvalStatus(data["status"]),
            message=str(data.get("message", "")),
            timing=TimingStats(**timing) if timing else None,
            floor_ms=data.get("floor_ms"),
        )


@dataclass(frozen=True)
class RecordedLandscape:
    """Every recorded configuration of one task's template kernels (see the module docstring)."""

    task: str  # the task's name (its file stem)
    task_digest: str
    plan: str
    mode: str
    default: tuple[GroupConfig, ...]
    seeds: tuple[tuple[GroupConfig, ...], ...]
    measurements: tuple[Measurement, ...]
    repeats: tuple[Measurement, ...] = ()  # second evaluations of some verified configurations
    reference: dict[str, TimingStats] = field(default_factory=dict)
    gpu: str = ""
    _by_key: dict[str, Measurement] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"landscape {self.task}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        object.__setattr__(self, "_by_key", {config_key(m.configs): m for m in self.measurements})

    def __len__(self) -> int:
        return len(self.measurements)

    def measured(self, configs: Sequence[GroupConfig]) -> Measurement | None:
        """The measurement recorded for exactly ``configs``, if any."""
        return self._by_key.get(config_key(configs))

    def lookup(self, configs: Sequence[GroupConfig]) -> Measurement | None:
        """The recorded or (in a sweeps landscape) modelled outcome of ``configs``; None outside the record."""
        exact = self.measured(configs)
        if exact is not None or self.mode == EXHAUSTIVE or len(configs) != len(self.default):
            return exact
        return self._modelled(tuple(configs))

    def answer(self, kernel: KernelSource) -> EvalResult | None:
        """The replay evaluator's question: the outcome of a template kernel, read by its configuration."""
        configs = read_marker(kernel.code)
        found = self.lookup(configs) if configs is not None else None
        return found.result() if found is not None else None

    def _modelled(self, configs: tuple[GroupConfig, ...]) -> Measurement | None:
        base = self.measured(self.default)
        if base is None or base.timing is None:
            return None
        delta = 0.0
        for group, config in enumerate(configs):
            if config == self.default[group]:
                continue
            swept = self.measured((*self.default[:group], config, *self.default[group + 1 :]))
            if swept is None:
                return None
            if not swept.ok:
                return Measurement(configs, swept.status, swept.message)
            assert swept.timing is not None
            delta += swept.timing.median_ms - base.timing.median_ms
        median = max(base.timing.median_ms + delta, 0.05 * base.timing.median_ms)
        timing = scale_timing(base.timing, median / base.timing.median_ms)
        return Measurement(configs, EvalStatus.OK, timing=timing, floor_ms=base.floor_ms)

    def root(self) -> tuple[GroupConfig, ...]:
        """What offline generation starts a search from: the fastest verified seed (else the default)."""
        timed = [(m.timing.median_ms, seed) for seed in self.seeds if (m := self.lookup(seed)) and m.timing]
        return min(timed, key=lambda item: item[0])[1] if timed else self.default

    def best(self) -> Measurement | None:
        """The fastest verified configuration recorded (sweeps: recorded, not modelled)."""
        verified = [m for m in self.measurements if m.ok]
        return min(verified, key=lambda m: m.timing.median_ms if m.timing else math.inf) if verified else None

    def run_to_run_noise(self) -> float:
        """Relative standard deviation of a median between two evaluations of one kernel (from the
        repeats; ``log(t2 / t1)`` has twice the variance of one measurement). 0 without repeats."""
        ratios = []
        for repeat in self.repeats:
            first = self.measured(repeat.configs)
            if first is not None and first.timing is not None and repeat.timing is not None:
                ratios.append(math.log(repeat.timing.median_ms / first.timing.median_ms))
        if len(ratios) < 2:
            return 0.0
        return math.sqrt(sum(r * r for r in ratios) / len(ratios) / 2.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "task_digest": self.task_digest,
            "plan": self.plan,
            "mode": self.mode,
            "gpu": self.gpu,
            "reference": {name: _timing_dict(t) for name, t in sorted(self.reference.items())},
            "default": [c.to_dict() for c in self.default],
            "seeds": [[c.to_dict() for c in seed] for seed in self.seeds],
            "measurements": [m.to_dict() for m in self.measurements],
            "repeats": [m.to_dict() for m in self.repeats],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordedLandscape:
        try:
            return cls(
                task=str(data["task"]),
                task_digest=str(data["task_digest"]),
                plan=str(data.get("plan", "")),
                mode=str(data["mode"]),
                gpu=str(data.get("gpu", "")),
                reference={name: TimingStats(**t) for name, t in data.get("reference", {}).items()},
                default=tuple(GroupConfig.from_dict(c) for c in data["default"]),
                seeds=tuple(tuple(GroupConfig.from_dict(c) for c in seed) for seed in data.get("seeds", [])),
                measurements=tuple(Measurement.from_dict(m) for m in data["measurements"]),
                repeats=tuple(Measurement.from_dict(m) for m in data.get("repeats", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"recorded landscape {data.get('task', '?')!r} is unreadable: {exc}") from exc

    def summary(self) -> dict[str, Any]:
        """Figures for a report: size, failures, spread of times, noise."""
        times = [m.timing.median_ms for m in self.measurements if m.timing is not None]
        best = self.best()
        root = self.lookup(self.root())
        return {
            "configs": len(self.measurements),
            "verified": len(times),
            "fastest_over_root": round(root.timing.median_ms / best.timing.median_ms, 3)
            if root is not None and root.timing is not None and best is not None and best.timing is not None
            else None,
            "median_over_fastest": round(statistics.median(times) / min(times), 3) if times else None,
            "run_to_run_noise": round(self.run_to_run_noise(), 4),
        }


def load_landscapes(path: str | Path) -> list[RecordedLandscape]:
    """The landscapes of a JSON record (``{"landscapes": [...]}``); ConfigError when unreadable."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{file}: cannot read a recorded landscape: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("landscapes"), list):
        raise ConfigError(f"{file}: not a recorded landscape (no 'landscapes' list)")
    return [RecordedLandscape.from_dict(item) for item in data["landscapes"]]


def landscapes_json(landscapes: Iterable[RecordedLandscape]) -> list[dict[str, Any]]:
    return [landscape.to_dict() for landscape in landscapes]


def scale_timing(timing: TimingStats, factor: float) -> TimingStats:
    """``timing`` with every figure multiplied by ``factor`` (its relative spread kept)."""
    return TimingStats(
        median_ms=timing.median_ms * factor,
        q1_ms=timing.q1_ms * factor,
        q3_ms=timing.q3_ms * factor,
        min_ms=timing.min_ms * factor,
        max_ms=timing.max_ms * factor,
        trials=timing.trials,
        wall_median_ms=timing.wall_median_ms * factor,
    )


def _timing_dict(timing: TimingStats) -> dict[str, float | int]:
    return {
        "median_ms": timing.median_ms,
        "q1_ms": timing.q1_ms,
        "q3_ms": timing.q3_ms,
        "min_ms": timing.min_ms,
        "max_ms": timing.max_ms,
        "trials": timing.trials,
        "wall_median_ms": timing.wall_median_ms,
    }
