"""``optiml adapt``: wrap an existing CUDA kernel, with its own host code, into the OptiML ABI.

The model rewrites the host side (no ``main``, no allocation or copies, sizes from the ABI's
tensors, launches on the given stream) while keeping the device code, so that the user's own
kernel is what gets verified and then optimized. The result is verified against the task and
repaired like any generated candidate.
"""

from __future__ import annotations

from optiml.evaluate.cost import CostFunction
from optiml.generate.config import GenerationConfig
from optiml.generate.errors import GenerationError
from optiml.generate.outcome import EventSink, GenerationOutcome
from optiml.generate.pipeline import GenerationSession, Step
from optiml.generate.prompts import TaskBrief, adapt_conversation
from optiml.generate.store import GenerationStore
from optiml.llm.client import LLMClient
from optiml.task import Task

ADAPT = "adapt"
ADAPT_STRATEGY = "Wrap the existing kernel into the OptiML ABI, keeping its device code and algorithm."


def adapt_kernel(
    cuda_source: str,
    task: Task,
    client: LLMClient,
    evaluator: CostFunction,
    config: GenerationConfig | None = None,
    store: GenerationStore | None = None,
    on_event: EventSink | None = None,
) -> GenerationOutcome:
    """The existing kernel in the OptiML ABI, verified against ``task`` (see :func:`generate_root`
    for what is returned and raised; ``samples_per_thought`` and ``max_repairs`` apply)."""
    if not cuda_source.strip():
        raise GenerationError("the CUDA source to adapt is empty")
    config = config or GenerationConfig()
    brief = TaskBrief.of(task)
    session = GenerationSession("adapt", task, client, evaluator, config, store, on_event)
    records = session.run([Step(ADAPT, ADAPT_STRATEGY, tuple(adapt_conversation(brief, cuda_source)))])
    return session.finish(records)
