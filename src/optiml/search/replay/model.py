"""Modelled structural landscapes: the real template spaces, with seeded times where look-ahead pays.

A recorded landscape (``benchmarks/record_landscape.py``) needs a GPU. This builds the same kind of
:class:`~optiml.search.replay.record.RecordedLandscape` from a task's real plan and template
spaces — the configurations, the variant switches and knob steps the structural proposer makes
(:meth:`~optiml.templates.kernels.TemplateKernels.neighbours`) — with times from a seeded model
built so that a greedy climber is misled (issue 12, "landscapes where MCTS should matter"):

* the planner's default configuration is the root; its variant is good, and its knobs are one
  step from that variant's best on one knob, so knob tuning gains ``knob_cost`` or so, then stops;
* one other variant (the *hidden* one) is ``hidden_gain`` times the default variant's time at its
  best knobs, but its best knobs lie ``hidden_steps`` knob steps from where a switch carries them
  (the knob that ``TemplateKernels.neighbours`` carries over or picks), and its knob cost is set so
  that the switch itself lands ``switch_cost`` times slower than the root: only a search that
  expands a slower child, and that child's children, finds the better variant;
* the remaining variants are 15-50 % slower at their best;
* every knob step away from a variant's best costs ``knob_cost`` (multiplied over knobs), each
  configuration gets a seeded ±``rugged``/2 ruggedness, and ``fail_rate`` of the configurations
  other than the root fail with an illegal address.

Several kernels multiply their factors. The noise is set as run-to-run noise (``noise``), so the
replay evaluator jitters timings as a GPU would. These landscapes test policy, not kernels: the
figures that count come from recorded ones.
"""

from __future__ import annotations

import hashlib
import math
import random

from optiml.search.replay.record import Measurement, RecordedLandscape
from optiml.search.replay.space import enumerate_space
from optiml.task import Task
from optiml.templates.base import GroupConfig, Space
from optiml.templates.kernels import TemplateKernels
from optiml.values import EvalStatus, TimingStats

_TRIALS = 40


def _rng(*key: object) -> random.Random:
    return random.Random(hashlib.sha256(repr(key).encode()).hexdigest())


class _GroupModel:
    """The seeded time factor of one planned kernel's configurations."""

    def __init__(
        self,
        space: Space,
        default: GroupConfig,
        switches: dict[str, GroupConfig],
        seed: object,
        *,
        hidden_gain: float,
        hidden_steps: int,
        knob_cost: float,
        switch_cost: float,
    ) -> None:
        rng = _rng(seed, "variants")
        others = [v for v in space.variants if v != default.variant]
        self.space = space
        self.hidden = rng.choice(others) if others else None
        self.factor: dict[str, float] = {default.variant: 1.0}
        self.cost: dict[str, float] = {v: knob_cost for v in space.variants}
        self.best: dict[str, dict[str, int]] = {}  # variant → knob → index of its best value
        for variant in others:
            self.factor[variant] = hidden_gain if variant == self.hidden else rng.uniform(1.15, 1.5)
        for variant, knobs in space.knobs.items():
            carried = switches.get(variant, default)
            self.best[variant] = {}
            for knob, values in knobs.items():
                kept = variant in (default.variant, self.hidden)
                carried_value = space.value(carried, knob)
                at = values.index(carried_value) if carried_value in values else 0
                self.best[variant][knob] = at if kept else rng.randrange(len(values))
        if self.hidden is not None and self.hidden in switches:
            self._hide(rng, switches[self.hidden], hidden_steps)
        tuned = [k for k, values in space.knobs[default.variant].items() if len(values) > 1]
        if tuned:  # the root's variant is one knob step from its best
            knob = rng.choice(tuned)
            at = self.best[default.variant][knob]
            self.best[default.variant][knob] = at + 1 if at + 1 < len(space.knobs[default.variant][knob]) else at - 1
        if self.hidden is not None and self.hidden in switches:
            # the switch lands switch_cost times slower than the root: solve prod(1 + a d) for a
            target = switch_cost * self.time_factor(default) / hidden_gain
            self.cost[self.hidden] = _solve_cost(self._distances(switches[self.hidden]), target)

    def _hide(self, rng: random.Random, switch: GroupConfig, steps: int) -> None:
        """Move the hidden variant's best ``steps`` knob steps away from the knobs ``switch`` lands on."""
        assert self.hidden is not None
        knobs = self.space.knobs[self.hidden]
        best = self.best[self.hidden]
        for _ in range(steps):
            away = []
            for knob, values in knobs.items():
                at = values.index(self.space.value(switch, knob))
                away += [
                    (knob, i)
                    for i in (best[knob] - 1, best[knob] + 1)
                    if 0 <= i < len(values) and abs(i - at) > abs(best[knob] - at)
                ]
            if not away:
                return
            knob, index = rng.choice(away)
            best[knob] = index

    def _distances(self, config: GroupConfig) -> list[int]:
        knobs = self.space.knobs[config.variant]
        return [
            abs(values.index(self.space.value(config, k)) - self.best[config.variant][k]) for k, values in knobs.items()
        ]

    def time_factor(self, config: GroupConfig) -> float:
        cost = self.cost[config.variant]
        return self.factor[config.variant] * math.prod(1.0 + cost * d for d in self._distances(config))


def _solve_cost(distances: list[int], target: float) -> float:
    """The knob cost ``a`` with ``prod(1 + a * d) == target`` (bisection; 0 when no knob is off its best)."""
    if not any(distances) or target <= 1.0:
        return 0.0
    low, high = 0.0, target
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if math.prod(1 + mid * d for d in distances) < target else (low, mid)
    return (low + high) / 2


def modelled_landscape(
    name: str,
    task: Task,
    kernels: TemplateKernels,
    *,
    seed: int = 0,
    base_ms: float = 1.0,
    hidden_gain: float = 0.6,
    hidden_steps: int = 2,
    knob_cost: float = 0.12,
    switch_cost: float = 1.15,
    rugged: float = 0.08,
    fail_rate: float = 0.03,
    noise: float = 0.01,
    floor_fraction: float = 0.6,
) -> RecordedLandscape:
    """A look-ahead landscape over ``kernels``' real spaces (see the module docstring)."""
    space = enumerate_space(kernels)
    switches: list[dict[str, GroupConfig]] = [{} for _ in space.default]
    for move in kernels.neighbours(list(space.default)):
        if move.kind == "variant":
            switches[move.group][move.config.variant] = move.config
    models = [
        _GroupModel(
            group_space,
            default,
            switches[g],
            (name, seed, g),
            hidden_gain=hidden_gain,
            hidden_steps=hidden_steps,
            knob_cost=knob_cost,
            switch_cost=switch_cost,
        )
        for g, (group_space, default) in enumerate(zip(kernels.spaces, space.default, strict=True))
    ]
    root_ms = base_ms * math.prod(m.time_factor(c) for m, c in zip(models, space.default, strict=True))
    measurements = []
    for configs in space.configs:
        key = tuple(c.label() for c in configs)
        if configs != space.default and _rng(name, seed, "fails", key).random() < fail_rate:
            message = "cudaErrorIllegalAddress: an illegal memory access was encountered"
            measurements.append(Measurement(configs, EvalStatus.RUNTIME_ERROR, message))
            continue
        factor = math.prod(m.time_factor(c) for m, c in zip(models, configs, strict=True))
        factor *= 1.0 + rugged * (_rng(name, seed, "rugged", key).random() - 0.5)
        timing = _timing(base_ms * factor, noise)
        measurements.append(Measurement(configs, EvalStatus.OK, timing=timing, floor_ms=floor_fraction * root_ms))
    first = measurements[0].timing
    assert first is not None  # the default never fails
    # two evaluations of one kernel differ by sqrt(2) * noise: repeats that make run_to_run_noise() == noise
    repeats = tuple(
        Measurement(space.default, EvalStatus.OK, timing=_timing(first.median_ms * math.exp(s * noise), noise))
        for s in (-math.sqrt(2), math.sqrt(2))
    )
    hidden = ", ".join(f"kernel {g}: {m.hidden}" for g, m in enumerate(models) if m.hidden is not None)
    return RecordedLandscape(
        task=f"{name} (modelled, seed {seed}; hidden {hidden or 'none'})",
        task_digest=task.digest,
        plan=kernels.describe(),
        mode=space.mode,
        default=space.default,
        seeds=(space.default,),
        measurements=tuple(measurements),
        repeats=repeats,
        reference={"eager": _timing(1.5 * root_ms, noise)},
        gpu="modelled",
    )


def _timing(median_ms: float, noise: float) -> TimingStats:
    spread = median_ms * noise * 0.674  # half the IQR of a normal with this relative deviation
    return TimingStats(
        median_ms=median_ms,
        q1_ms=median_ms - spread,
        q3_ms=median_ms + spread,
        min_ms=median_ms - 3 * spread,
        max_ms=median_ms + 4 * spread,
        trials=_TRIALS,
    )
