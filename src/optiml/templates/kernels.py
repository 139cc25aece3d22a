"""Template kernels of one task: its plan, the legal configurations, and their sources.

This is the entry point the rest of OptiML uses: :meth:`TemplateKernels.for_task` traces and
plans (raising :class:`~optiml.graph.capture.UnsupportedOpError` / ``TemplateError`` with one
line when an op has no template), :meth:`seeds` lists a few diverse first configurations (the
planner's rule first), :meth:`render` turns configurations into a :class:`KernelSource`, and
:meth:`neighbours` lists single edits of a configuration (variant switches and knob moves) for
the structural proposer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from optiml.graph.capture import capture_all
from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.templates.assemble import Templates, render
from optiml.templates.base import DeviceFacts, GroupConfig, Space, TemplateError
from optiml.templates.plan import Plan, make_plan

#: what :attr:`Move.knob` holds for a variant switch
VARIANT = "variant"


@dataclass(frozen=True)
class Move:
    """One structural edit: kernel ``group`` gets ``config`` — its variant switched (``knob`` is
    :data:`VARIANT`) or one knob moved from ``before`` to ``after``."""

    group: int
    config: GroupConfig
    knob: str
    before: Any
    after: Any

    @property
    def kind(self) -> str:
        return "variant" if self.knob == VARIANT else "knob"

    @property
    def note(self) -> str:
        moved = "" if self.knob == VARIANT else f"{self.knob} "
        return f"kernel {self.group}: {moved}{self.before} → {self.after}"


class TemplateKernels:
    def __init__(self, task: Task, plan: Plan, facts: DeviceFacts | None = None) -> None:
        self.task = task
        self.plan = plan
        tf32 = task.meta.precision == "tf32" and task.meta.dtype == "float32"
        self.facts = replace(
            facts or DeviceFacts(), tf32_convolutions=tf32, convolution_arithmetic=task.convolution_arithmetic
        )
        self.templates = Templates.for_plan(plan)
        self.spaces: list[Space] = [self.templates.of(g).space(g, self.facts) for g in plan.groups]

    @classmethod
    def for_task(cls, task: Task, facts: DeviceFacts | None = None) -> TemplateKernels:
        return cls(task, make_plan(capture_all(task)), facts)

    def describe(self) -> str:
        return self.plan.describe()

    def default(self) -> list[GroupConfig]:
        return [self.templates.of(g).default(g, self.facts) for g in self.plan.groups]

    def seeds(self, limit: int = 4) -> list[list[GroupConfig]]:
        """Up to ``limit`` configurations: the planner's rule first, then each kernel's other seeds."""
        per_group = [self.templates.of(g).seeds(g, self.facts) for g in self.plan.groups]
        chosen: list[list[GroupConfig]] = []
        for k in range(max(len(s) for s in per_group)):
            configs = [s[min(k, len(s) - 1)] for s in per_group]
            if configs not in chosen:
                chosen.append(configs)
        return chosen[:limit]

    def render(self, configs: Sequence[GroupConfig]) -> KernelSource:
        """The kernel of ``configs`` (knobs set to their implied values are left out: one kernel, one label)."""
        if len(configs) == len(self.spaces):  # (a wrong count is render's one-line error)
            configs = [space.normalized(c) for space, c in zip(self.spaces, configs, strict=True)]
        return render(self.plan, configs, self.facts)

    def neighbours(self, configs: Sequence[GroupConfig]) -> list[Move]:
        """Every single-kernel edit: other variants (knobs carried over where legal) and knob steps."""
        moves: list[Move] = []
        for index, config in enumerate(configs):
            space = self.spaces[index]
            for variant in space.variants:
                if variant == config.variant:
                    continue
                candidate = self._adapt(config, variant, space)
                if candidate is not None:
                    moves.append(Move(index, candidate, VARIANT, config.variant, variant))
            allowed = space.knobs.get(config.variant, {})
            for knob, values in allowed.items():
                current = space.value(config, knob)
                if current not in values:
                    continue
                at = values.index(current)
                for step in (-1, 1):
                    if 0 <= at + step < len(values):
                        candidate = space.normalized(config.with_params(**{knob: values[at + step]}))
                        if space.reason_invalid(candidate) is None:
                            moves.append(Move(index, candidate, knob, current, values[at + step]))
        return moves

    @staticmethod
    def _adapt(config: GroupConfig, variant: str, space: Space) -> GroupConfig | None:
        allowed = space.knobs[variant]
        implied = space.implied.get(variant, {})
        params = {}
        for knob, values in allowed.items():
            current = config.get(knob)
            fallback = implied[knob] if knob in implied else values[min(1, len(values) - 1)]
            params[knob] = current if current in values else fallback
        candidate = space.normalized(GroupConfig.of(variant, **params))
        if space.reason_invalid(candidate) is None:
            return candidate
        for combo in itertools.islice(itertools.product(*allowed.values()), 64):
            candidate = space.normalized(GroupConfig.of(variant, **dict(zip(allowed, combo, strict=True))))
            if space.reason_invalid(candidate) is None:
                return candidate
        return None


def template_kernels(task: Task, facts: DeviceFacts | None = None) -> TemplateKernels:
    """Plan ``task`` into template kernels; raises TaskError/TemplateError with one line."""
    try:
        return TemplateKernels.for_task(task, facts)
    except TemplateError as exc:
        raise TemplateError(f"{task.path.name}: {exc}") from None
