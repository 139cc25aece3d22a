"""The conversations generation sends, rendered from versioned jinja2 templates (templates/*_v1.j2).

Every prompt is a function of the task, the thought and earlier *answers and verdicts* only —
never of measured times. Timings on a GPU vary from run to run; a prompt that quoted them would
differ on a replay and miss the recorded answer. So the aggregation step sees its candidates in
thought order, all marked verified, without their times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from optiml.generate.thoughts import DEFAULT_TEMPLATE, Thought
from optiml.kernel.compiler import abi_header
from optiml.kernel.skeleton import render_skeleton
from optiml.llm.types import ChatMessage
from optiml.task import Task

#: Recorded with every generation; bump (and add *_v2.j2 files) when a template's meaning changes.
PROMPT_VERSION = "v1"

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("optiml.generate", "templates"),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    autoescape=False,
)


@dataclass(frozen=True)
class TaskBrief:
    """What every kernel prompt says about the task; built once per generation."""

    name: str
    description: str
    dtype: str
    atol: float
    rtol: float
    libraries: tuple[str, ...]
    reference: str  # the task file's source
    shapes: str  # the default sizes and every extra shape set, one line each
    skeleton: str  # `optiml init-kernel` output: argument order, dtypes, shapes, launch pattern
    abi_header: str

    @classmethod
    def of(cls, task: Task) -> TaskBrief:
        meta = task.meta
        return cls(
            name=task.name,
            description=meta.description,
            dtype=meta.dtype,
            atol=meta.atol,
            rtol=meta.rtol,
            libraries=meta.libraries,
            reference=task.source,
            shapes=describe_shapes(task),
            skeleton=render_skeleton(task),
            abi_header=abi_header(),
        )


@dataclass(frozen=True)
class VerifiedCandidate:
    """A verified kernel shown to the aggregation step."""

    thought: str
    strategy: str
    code: str


def describe_shapes(task: Task) -> str:
    """``default: M=8192, N=8192`` and one line per extra shape set."""

    def sizes(values: dict[str, object]) -> str:
        shown = [f"{k}={v}" for k, v in values.items() if isinstance(v, int) and not isinstance(v, bool)]
        return ", ".join(shown) or "(as in the reference)"

    lines = [f"- default: {sizes(task.namespace_globals(0))}"]
    lines += [f"- also verified at: {sizes(dict(task.meta.shape_sets[i]))}" for i in range(len(task.meta.shape_sets))]
    return "\n".join(lines)


def kernel_conversation(brief: TaskBrief, thought: Thought) -> list[ChatMessage]:
    """System rules plus the thought's prompt: the start of one thought's candidates."""
    if thought.template == DEFAULT_TEMPLATE:
        template = _ENV.get_template(DEFAULT_TEMPLATE)
    else:
        template = _ENV.from_string(Path(thought.template).read_text(encoding="utf-8"))
    return [_kernel_system(brief), ChatMessage("user", template.render(task=brief, thought=thought))]


def aggregate_conversation(brief: TaskBrief, candidates: Sequence[VerifiedCandidate]) -> list[ChatMessage]:
    user = _ENV.get_template("aggregate_v1.j2").render(task=brief, candidates=list(candidates))
    return [_kernel_system(brief), ChatMessage("user", user)]


def adapt_conversation(brief: TaskBrief, source: str) -> list[ChatMessage]:
    user = _ENV.get_template("adapt_v1.j2").render(task=brief, source=source)
    return [_kernel_system(brief), ChatMessage("user", user)]


def repair_conversation(base: Sequence[ChatMessage], answer: str, feedback: str) -> list[ChatMessage]:
    """The first request, the failed answer, and what went wrong (only the latest attempt is kept)."""
    text = _ENV.get_template("repair_v1.j2").render(feedback=feedback)
    return [*base, ChatMessage("assistant", answer), ChatMessage("user", text)]


def task_conversation(request: str) -> list[ChatMessage]:
    return [
        ChatMessage("system", _ENV.get_template("task_system_v1.j2").render()),
        ChatMessage("user", _ENV.get_template("task_v1.j2").render(request=request)),
    ]


def task_repair_conversation(base: Sequence[ChatMessage], answer: str, error: str) -> list[ChatMessage]:
    text = _ENV.get_template("task_repair_v1.j2").render(error=error)
    return [*base, ChatMessage("assistant", answer), ChatMessage("user", text)]


def _kernel_system(brief: TaskBrief) -> ChatMessage:
    return ChatMessage("system", _ENV.get_template("kernel_system_v1.j2").render(task=brief))
