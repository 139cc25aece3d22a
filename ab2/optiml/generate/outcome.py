"""What a generation produced: every attempt of every thought, the winner, and why it won.

An :class:`Attempt` is one candidate answer and its evaluation (round 0 is a thought's first
answer, round k its k-th repair); a :class:`ThoughtRecord` is one thought's attempts and its
verdict; a :class:`GenerationOutcome` is the whole generation, the root kernel included.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from optiml.generate.errors import GenerationError
from optiml.kernel.source import KernelSource
from optiml.values import EvalResult

#: Attempt statuses besides the EvalStatus values.
NO_CODE = "no_code"  # the answer held no usable source
LLM_ERROR = "llm_error"  # the model could not be asked (budget, outage, replay miss)


@dataclass(frozen=True)
class Attempt:
    """One candidate: what the model answered and what became of it."""

    thought: str
    sample: int  # which of the thought's independent answers (0-based)
    round: int  # 0: the first answer, k: the k-th repair
    status: str  # an EvalStatus value, NO_CODE or LLM_ERROR
    message: str  # one line: what happened
    feedback: str = ""  # for a failure: the text a repair prompt sends back to the model
    kernel: KernelSource | None = None
    result: EvalResult | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok

    @property
    def time_ms(self) -> float | None:
        return self.result.time_ms if self.result is not None else None

    def sort_key(self) -> float:
        """Median time, with untimed verified kernels after every timed one."""
        return self.time_ms if self.time_ms is not None else math.inf


@dataclass(frozen=True)
class ThoughtRecord:
    """One thought's attempts, and why it was chosen or not."""

    name: str
    strategy: str
    attempts: tuple[Attempt, ...]
    seconds: float
    chosen: bool = False
    verdict: str = ""

    @property
    def best(self) -> Attempt | None:
        """Its fastest verified attempt."""
        verified = [a for a in self.attempts if a.ok]
        return min(verified, key=Attempt.sort_key) if verified else None

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


@dataclass(frozen=True)
class GenerationOutcome:
    """A finished generation. ``best_kernel`` is None when no candidate passed; ``reason`` says why."""

    id: str
    kind: str  # "root" (mixture of thoughts) or "adapt"
    task_name: str
    thoughts: tuple[ThoughtRecord, ...]  # in configured order; the aggregation step, if run, last
    winner: str | None  # the winning thought's name
    best_kernel: KernelSource | None
    best_result: EvalResult | None
    reason: str
    seconds: float
    cost_usd: float
    notes: tuple[str, ...] = ()  # e.g. why aggregation was skipped

    @property
    def ok(self) -> bool:
        return self.best_kernel is not None

    @property
    def attempts(self) -> int:
        return sum(len(t.attempts) for t in self.thoughts)

    def require_kernel(self) -> KernelSource:
        """The root kernel, or :class:`GenerationError` with the one-line reason there is none."""
        if self.best_kernel is None:
            raise GenerationError(
                f"generation found no verified kernel for {self.task_name}: {self.reason}; "
                "to start from a hand-written kernel instead, see `optiml init-kernel`"
            )
        return self.best_kernel


class EventKind(str, Enum):
    STARTED = "started"  # a thought (or the aggregation step) sent its first request
    ATTEMPT = "attempt"  # a candidate was evaluated, or could not be
    SKIPPED = "skipped"  # a step did not run (e.g. aggregation with fewer than two verified kernels)
    FINISHED = "finished"  # the winner is chosen


@dataclass(frozen=True)
class GenerationEvent:
    kind: EventKind
    thought: str
    message: str
    attempt: Attempt | None = None


EventSink = Callable[[GenerationEvent], None]
