"""OptiML-G: the Mixture-of-Thoughts generator that produces a search's root kernel.

Every configured thought (:mod:`optiml.generate.thoughts`) asks the model for a kernel written
with its own approach; the thoughts run in parallel, and every candidate is compiled, verified
and repaired a bounded number of times (:mod:`optiml.generate.pipeline`). When two or more
thoughts end with a verified kernel, an aggregation step shows them to the model and asks for
one kernel that combines their strongest ideas; it is verified and repaired the same way. The
fastest verified candidate of all becomes the root, and every thought's record says why it won
or lost.
"""

from __future__ import annotations

from optiml.evaluate.cost import CostFunction
from optiml.generate.config import GenerationConfig
from optiml.generate.outcome import EventKind, EventSink, GenerationOutcome, ThoughtRecord
from optiml.generate.pipeline import GenerationSession, Step
from optiml.generate.prompts import TaskBrief, VerifiedCandidate, aggregate_conversation, kernel_conversation
from optiml.generate.store import GenerationStore
from optiml.llm.client import LLMClient
from optiml.task import Task

AGGREGATE = "aggregate"
AGGREGATE_STRATEGY = "Combine the strongest ideas of the verified candidates into one kernel."


def generate_root(
    task: Task,
    client: LLMClient,
    evaluator: CostFunction,
    config: GenerationConfig | None = None,
    store: GenerationStore | None = None,
    on_event: EventSink | None = None,
) -> GenerationOutcome:
    """Generate, verify and choose the root kernel for ``task``.

    Returns the outcome even when no candidate passed (``outcome.ok`` is False and
    ``outcome.reason`` says what each thought ended with; ``require_kernel()`` raises then).
    Raises only for errors of the environment (no GPU, no nvcc, a broken worker), after marking
    the generation interrupted in the store.
    """
    config = config or GenerationConfig()
    brief = TaskBrief.of(task)
    session = GenerationSession("root", task, client, evaluator, config, store, on_event)
    steps = [Step(t.name, t.strategy, tuple(kernel_conversation(brief, t))) for t in config.selected_thoughts()]
    records = session.run(steps)
    notes: list[str] = []
    verified = [r for r in records if r.best is not None]
    if not config.aggregate:
        notes.append("aggregation is off ([generate] aggregate = false)")
    elif len(verified) < 2:
        notes.append(f"aggregation skipped: it needs two verified candidates, there {_were(len(verified))}")
    else:
        records.extend(session.run([_aggregate_step(brief, verified[: config.aggregate_max])]))
    for note in notes:
        session.event(EventKind.SKIPPED, AGGREGATE, note)
    return session.finish(records, notes)


def _aggregate_step(brief: TaskBrief, verified: list[ThoughtRecord]) -> Step:
    """The candidates go in thought order, without times, so a replay asks the same question."""
    candidates = []
    for record in verified:
        best = record.best
        assert best is not None and best.kernel is not None
        candidates.append(VerifiedCandidate(record.name, record.strategy, best.kernel.code))
    return Step(AGGREGATE, AGGREGATE_STRATEGY, tuple(aggregate_conversation(brief, candidates)))


def _were(count: int) -> str:
    return "was none" if count == 0 else "was one" if count == 1 else f"were {count}"
