"""The root of a search started without a kernel: the fastest verified of the offline root
(template kernels and the kernel the task ships) and, with an LLM, the Mixture-of-Thoughts one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from optiml.errors import OptimlError
from optiml.evaluate.cost import CostFunction
from optiml.generate.config import GenerationConfig, load_generation_config
from optiml.generate.mixture import generate_root
from optiml.generate.offline import OfflineRoot
from optiml.generate.outcome import GenerationOutcome
from optiml.generate.store import GenerationStore
from optiml.kernel.source import KernelSource
from optiml.llm import LLMClient
from optiml.task import Task


@dataclass(frozen=True)
class LLMRoot:
    """What the LLM's generation gave: its outcome (None when it failed, with ``error``), and its
    verified kernel and time, or None for both."""

    outcome: GenerationOutcome | None
    error: str = ""
    kernel: KernelSource | None = None
    time_ms: float | None = None


@dataclass(frozen=True)
class Root:
    kernel: KernelSource
    label: str  # "the LLM's kernel", or the offline candidate's label
    time_ms: float


def llm_root(
    task: Task,
    llm: LLMClient,
    evaluator: CostFunction,
    store: GenerationStore,
    config: GenerationConfig | None = None,
) -> LLMRoot:
    """The LLM's verified root and its time. A generation that fails (its configuration included: None
    reads ``[generate]`` of optiml.toml) is an ``error``, not an exception: the templates may still give a root."""
    try:
        outcome = generate_root(task, llm, evaluator, config or load_generation_config(), store=store)
    except OptimlError as exc:
        return LLMRoot(outcome=None, error=str(exc))
    kernel, result = outcome.best_kernel, outcome.best_result
    if kernel is None:
        return LLMRoot(outcome)
    if result is None or not result.ok or result.time_ms is None:  # e.g. a stored outcome without its timing
        result = evaluator.evaluate(kernel)
    if not result.ok or result.time_ms is None:
        return LLMRoot(outcome)
    return LLMRoot(outcome, kernel=kernel, time_ms=result.time_ms)


def choose_root(task: Task, offline: OfflineRoot, llm: LLMRoot | None) -> Root:
    """The faster of the two (the offline one on a tie); `OptimlError` saying why, and how to get one,
    when neither verified. ``llm`` None: no LLM was asked."""
    best = offline.best
    if (
        llm is not None
        and llm.kernel is not None
        and llm.time_ms is not None
        and (best is None or llm.time_ms < (best.result.time_ms or 0.0))
    ):
        return Root(llm.kernel, "the LLM's kernel", llm.time_ms)
    if best is None or best.result.time_ms is None:
        raise OptimlError(no_root_message(task, offline, llm_tried=llm is not None))
    return Root(best.kernel, best.label, best.result.time_ms)


def no_root_message(task: Task, offline: OfflineRoot, llm_tried: bool) -> str:
    """One line: why no template or shipped kernel is a root, and the two ways to get one."""
    reasons = []
    if offline.error:  # e.g. "t.py: no template for aten.sort.default: configure an LLM, or …"
        reason = str(offline.error).removeprefix(f"{task.path.name}: ")
        reasons.append(re.split(r": configure an LLM", reason, maxsplit=1, flags=re.IGNORECASE)[0])
    if offline.candidates:
        reasons.append(f"none of the {len(offline.candidates)} template/shipped candidates verified")
    if llm_tried:
        reasons.append("the LLM's generation found no verified kernel")
    how = (
        "write one with"
        if llm_tried
        else "configure an LLM (OPTIML_LLM_MODEL and an API key, or --llm-base-url), or write one with"
    )
    return (
        f"{task.path.name}: no root kernel: {'; '.join(reasons) or 'no candidate'}. "
        f"To start from your own, {how} `optiml init-kernel {task.path}` and pass it with --kernel"
    )
