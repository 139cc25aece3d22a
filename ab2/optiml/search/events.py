"""What a running search reports to its caller (the live view, a log, a test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from optiml.search.config import Budgets


class EventKind(str, Enum):
    STARTED = "started"  # the run began or resumed
    EVALUATED = "evaluated"  # a candidate's result arrived
    PROPOSED = "proposed"  # a proposer answered
    PROFILED = "profiled"  # a candidate's diagnosis arrived
    WARNING = "warning"  # something went wrong that does not stop the run
    TICK = "tick"  # heartbeat while waiting (about once a second)
    RETIMED = "retimed"  # the final interleaved re-timing is done
    FINISHED = "finished"  # the run ended; the outcome is returned


@dataclass(frozen=True)
class Progress:
    """A snapshot of a run, enough to draw the live view."""

    run_id: str
    strategy: str
    budgets: Budgets
    evaluations: int
    in_flight: int
    elapsed_s: float
    cost_usd: float
    root_ms: float | None
    best_ms: float | None
    best_depth: int
    nodes: int
    status_counts: dict[str, int] = field(default_factory=dict)  # EvalStatus value → evaluations
    reference_ms: dict[str, float] = field(default_factory=dict)  # "eager" / "compile" → median ms
    duplicates: int = 0  # proposals whose kernel was already known (transposition hits)
    not_applied: int = 0  # proposals that yielded no kernel

    @property
    def failures(self) -> int:
        return sum(n for status, n in self.status_counts.items() if status != "ok")

    @property
    def best_speedup(self) -> float | None:
        """Best time so far over the root's (search-time measurements, not yet re-timed)."""
        if self.root_ms is None or self.best_ms is None or self.best_ms <= 0:
            return None
        return self.root_ms / self.best_ms

    def reference_speedup(self, name: str) -> float | None:
        reference = self.reference_ms.get(name)
        if reference is None or self.best_ms is None or self.best_ms <= 0:
            return None
        return reference / self.best_ms


@dataclass(frozen=True)
class SearchEvent:
    kind: EventKind
    message: str
    progress: Progress


EventSink = Callable[[SearchEvent], None]
