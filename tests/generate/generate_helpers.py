"""Helpers for generation tests: a scripted model for the loopback server, and an evaluator that
compiles for real with nvcc but decides correctness by a rule (there is no GPU in CI).

The rule: a kernel is correct iff its source defines ``FAKE_TIME_MS <t>`` (and then it "runs" in
``t`` ms); a kernel that compiles without it is a wrong answer. Kernels are variants of the
starter suite's SiLU kernel (tasks/silu.naive.cu), so they are realistic and compile.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llm_servers import RecordedRequest, Reply, answer
from optiml.kernel.compiler import Compiler
from optiml.kernel.source import KernelSource
from optiml.llm.types import LLMRequest, LLMResponse
from optiml.values import EvalResult, EvalStatus, TimingStats

ROOT = Path(__file__).resolve().parents[2]
SILU_TASK = ROOT / "tasks" / "silu.py"
SILU_KERNEL = (ROOT / "tasks" / "silu.naive.cu").read_text(encoding="utf-8")
_TIME = re.compile(r"^#define FAKE_TIME_MS ([0-9.]+)$", re.MULTILINE)


def silu_kernel(time_ms: float | None, variant: str, *, broken: bool = False) -> str:
    """A compiling SiLU kernel; ``time_ms`` None makes it a wrong answer; ``broken`` a compile error."""
    lines = [f"#define VARIANT_{variant.upper()} 1"]
    if time_ms is not None:
        lines.append(f"#define FAKE_TIME_MS {time_ms}")
    if broken:
        lines.append("this_is_not_declared_anywhere x;")
    return SILU_KERNEL.replace('#include "optiml.h"\n', '#include "optiml.h"\n' + "\n".join(lines) + "\n", 1)


def fenced(code: str, prose: str = "This kernel does the work.") -> str:
    return f"{prose}\n\n```cuda\n{code}```\n"


class RuleEvaluator:
    """Compiles with the real Compiler; 'verifies' and 'times' by the FAKE_TIME_MS rule."""

    def __init__(self, compiler: Compiler | None) -> None:
        self.compiler = compiler
        self.evaluated: list[str] = []  # digests, in order
        self._lock = threading.Lock()

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        compiled = self.compiler.compile_many(list(kernels)) if self.compiler is not None else [None] * len(kernels)
        results = []
        for kernel, build in zip(kernels, compiled, strict=True):
            with self._lock:
                self.evaluated.append(kernel.digest)
            if build is not None and not build.ok:
                results.append(
                    EvalResult(EvalStatus.COMPILE_ERROR, build.error_summary(limit=1), kernel.digest, compile=build)
                )
                continue
            found = _TIME.search(kernel.code)
            if found is None:
                message = "output 0: 4096 of 8192 elements differ (max abs err 0.5, max rel err 1.0)"
                results.append(EvalResult(EvalStatus.WRONG_ANSWER, message, kernel.digest, compile=build))
                continue
            ms = float(found.group(1))
            timing = TimingStats.from_samples([ms * 0.99, ms, ms * 1.01])
            results.append(EvalResult(EvalStatus.OK, "", kernel.digest, compile=build, timing=timing))
        return results


@dataclass
class ScriptedModel:
    """Answers by who is asking: ``answers[(step, k)]`` is the k-th answer to a step.

    A step is a thought's name, ``aggregate``, ``adapt`` or ``task``; with one sample per thought
    the k-th request of a step is its k-th repair (0: the first request). Every request is
    remembered, so tests can read the prompts back. Serve it over HTTP as a loopback server's
    ``responder``, or in-process with :class:`ScriptedProvider` (no SDK needed).
    """

    answers: dict[tuple[str, int], str | Reply]
    seen: list[tuple[str, int, list[str]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reply_to(self, contents: list[str]) -> Reply:
        step = classify(contents)
        with self._lock:
            index = sum(1 for s, _, _ in self.seen if s == step)
            self.seen.append((step, index, contents))
        reply = self.answers.get((step, index), "I cannot help with that.")
        return reply if isinstance(reply, Reply) else answer(reply)

    def __call__(self, request: RecordedRequest) -> Reply:
        return self.reply_to([m["content"] for m in request.messages])

    def prompts(self, step: str, index: int) -> list[str]:
        """The last message of the ``index``-th request of ``step``."""
        return [contents[-1] for s, n, contents in self.seen if (s, n) == (step, index)]


class ScriptedProvider:
    """An in-process `Provider` answering from a :class:`ScriptedModel` (for machines without SDKs)."""

    name = "openai"

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def complete(self, request: LLMRequest) -> LLMResponse:
        reply = self.model.reply_to([m.content for m in request.messages])
        texts = list(reply.texts) or ["I cannot help with that."]
        return LLMResponse(
            texts=texts,
            model=request.model,
            provider=self.name,
            input_tokens=100,
            output_tokens=20 * len(texts),
            cost_usd=0.0,
            latency_s=0.0,
            cached=False,
            finish_reasons=[reply.finish_reason] * len(texts),
        )

    def close(self) -> None:
        pass


def classify(contents: list[str]) -> str:
    system, first_user = contents[0], contents[1]
    if "problems in the KernelBench format" in system:
        return "task"
    if "## Verified kernels" in first_user:
        return "aggregate"
    if "## Existing CUDA code to adapt" in first_user:
        return "adapt"
    found = re.search(r"^## Your approach: (\S+)$", first_user, re.MULTILINE)
    return found.group(1) if found else "?"
