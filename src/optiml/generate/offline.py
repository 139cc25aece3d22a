"""OptiML-G without an LLM: the root kernel from the task's op graph and the expert templates.

The reference is traced and planned (:mod:`optiml.templates`); a few seed configurations — the
planner's rule first — are compiled in parallel, verified and timed; the fastest verified one is
the root. A kernel the task ships (``<task>.naive.cu``) competes too, so a template that loses to
it is never chosen. Every candidate's outcome is kept for the summary the CLI prints.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from optiml.errors import OptimlError
from optiml.evaluate.cost import CostFunction
from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.templates.kernels import template_kernels
from optiml.values import EvalResult, EvalStatus


@dataclass(frozen=True)
class RootCandidate:
    label: str
    kernel: KernelSource
    result: EvalResult


@dataclass
class OfflineRoot:
    plan: str = ""
    candidates: list[RootCandidate] = field(default_factory=list)
    error: str = ""  # why no template applies (an op with no template), empty otherwise

    @property
    def best(self) -> RootCandidate | None:
        verified = [c for c in self.candidates if c.result.ok and c.result.time_ms is not None]
        return min(verified, key=lambda c: c.result.time_ms or 0.0) if verified else None

    def failure_reason(self) -> str:
        """One line on why no candidate verified: the planner's refusal, else each candidate's label (cut at 120
        characters: a whole model's plan names dozens of kernels) with its status and the first line of its
        message."""
        if self.error or not self.candidates:
            return self.error or "no template kernel"
        parts = []
        for c in self.candidates:
            first = textwrap.shorten((c.result.message.strip().splitlines() or [""])[0], 200, placeholder=" …")
            label = textwrap.shorten(c.label, 120, placeholder=" …")
            parts.append(f"{label}: {c.result.status.value}" + (f" ({first})" if first else ""))
        reason = "no root candidate verified: " + "; ".join(parts)
        if all(c.result.status is EvalStatus.WRONG_ANSWER for c in self.candidates):
            notes = (note for c in self.candidates for note in c.result.task_notes if "ill-conditioned" in note)
            conditioning = next(notes, "")
            if conditioning:  # no kernel can be told right from wrong there: say so, not only "wrong answer"
                reason += " — every answer judged against an ill-conditioned reference: " + textwrap.shorten(
                    conditioning, 300, placeholder=" …"
                )
        return reason

    def summary(self) -> str:
        lines = [f"plan: {self.plan}" if self.plan else f"no template kernel: {self.error}"]
        for c in self.candidates:
            state = f"{c.result.time_ms:.4f} ms" if c.result.ok and c.result.time_ms else c.result.status.value
            lines.append(f"  {c.label}: {state}" + ("" if c.result.ok else f" ({c.result.message[:120]})"))
        return "\n".join(lines)


def generate_offline_root(
    task: Task, evaluator: CostFunction, seeds: int = 4, naive: KernelSource | None = None
) -> OfflineRoot:
    """Template seeds (and ``naive``, when given) evaluated; ``.best`` is the root, or None."""
    outcome = OfflineRoot()
    labelled: list[tuple[str, KernelSource]] = []
    try:
        kernels = template_kernels(task)
        outcome.plan = kernels.describe()
        for configs in kernels.seeds(seeds):
            labelled.append(("template " + " + ".join(c.label() for c in configs), kernels.render(configs)))
    except OptimlError as exc:
        outcome.error = str(exc)
    if naive is not None:
        labelled.append(("shipped kernel", naive))
    if not labelled:
        return outcome
    results = evaluator.evaluate_many([k for _, k in labelled])  # compiled in parallel by the real evaluator
    for (label, kernel), result in zip(labelled, results, strict=True):
        outcome.candidates.append(RootCandidate(label, kernel, result))
    return outcome
