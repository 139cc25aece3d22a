"""The machinery every kernel generation shares: ask → extract → evaluate → repair, and the verdict.

A :class:`Step` is one line of generation (a thought, the aggregation, an adaptation): a starting
conversation that asks for ``samples_per_thought`` answers. Each answer is evaluated (all of a
round's candidates in one ``evaluate_many`` call, so they compile in parallel); each failure goes
back to the model with its compiler or verifier message, at most ``max_repairs`` times.
A :class:`GenerationSession` runs steps in parallel threads, records every attempt as it happens, and at
the end picks the fastest verified candidate and writes down why every other one lost.

Failures of a candidate and of the model are values (an :class:`Attempt`); an error of the
environment (no GPU, no nvcc, a broken worker) stops every step and is raised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from optiml.evaluate.cost import CostFunction, EvaluationCache
from optiml.generate.answers import NoCodeError, extract_cuda
from optiml.generate.config import GenerationConfig
from optiml.generate.outcome import (
    LLM_ERROR,
    NO_CODE,
    Attempt,
    EventKind,
    EventSink,
    GenerationEvent,
    GenerationOutcome,
    ThoughtRecord,
)
from optiml.generate.prompts import PROMPT_VERSION, repair_conversation
from optiml.generate.store import STATUS_INTERRUPTED, GenerationStore
from optiml.kernel.source import KernelSource
from optiml.llm.client import LLMClient
from optiml.llm.errors import LLMError
from optiml.llm.types import ChatMessage, LLMResponse
from optiml.task import Task
from optiml.values import EvalResult

_CUT_OFF = (
    "Your answer was cut off by the token limit before the source was complete. Give the complete "
    "kernel again, more compactly (fewer comments, no repeated code), in one ```cuda code block."
)


@dataclass(frozen=True)
class Step:
    name: str
    strategy: str
    conversation: tuple[ChatMessage, ...]


@dataclass(frozen=True)
class _Answer:
    sample: int
    text: str
    cut_off: bool


class GenerationSession:
    """One generation: its id, store rows, events, evaluation memo, and the verdict at the end."""

    def __init__(
        self,
        kind: str,
        task: Task,
        client: LLMClient,
        evaluator: CostFunction,
        config: GenerationConfig,
        store: GenerationStore | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        self.kind = kind
        self.task = task
        self.client = client
        self.config = config
        self.store = store
        self._on_event = on_event
        self._evaluator = EvaluationCache.of(evaluator)  # a source several steps propose is evaluated once
        self._events = threading.Lock()
        self._stop = threading.Event()
        self._started = time.perf_counter()
        self._cost_before = client.usage.cost_usd
        self.id = (
            store.start(
                kind=kind,
                task_name=task.name,
                task_digest=task.digest,
                config_json=config.to_json(),
                prompt_version=PROMPT_VERSION,
                llm_run_id=client.run_id,
            )
            if store is not None
            else f"gen-{kind}-{task.name}"
        )

    # running --------------------------------------------------------------------------------------

    def run(self, steps: Sequence[Step]) -> list[ThoughtRecord]:
        """Run steps in parallel; records in the order of ``steps``. An environment error stops all."""
        try:
            with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="optiml-generate") as pool:
                futures = [pool.submit(self._guarded, step) for step in steps]
                return [f.result() for f in futures]
        except BaseException as exc:
            self.interrupted(exc)
            raise

    def interrupted(self, exc: BaseException) -> None:
        """Mark the generation interrupted in the store (an error or Ctrl-C ended it)."""
        if self.store is not None:
            reason = f"stopped by {type(exc).__name__}: {_one_line(str(exc))}"
            self.store.close_generation(self.id, STATUS_INTERRUPTED, reason, self.elapsed_s, self.cost_usd)

    def _guarded(self, step: Step) -> ThoughtRecord:
        try:
            return self._run_step(step)
        except BaseException:
            self._stop.set()  # the other steps ask the model no further questions
            raise

    def _run_step(self, step: Step) -> ThoughtRecord:
        started = time.perf_counter()
        attempts: list[Attempt] = []
        if self._stop.is_set():
            return ThoughtRecord(step.name, step.strategy, (), 0.0)
        self.event(EventKind.STARTED, step.name, step.strategy)
        first = self._ask([list(step.conversation)], step.name, self.config.samples_per_thought)[0]
        if isinstance(first, LLMError):
            attempts.append(self._record(Attempt(step.name, 0, 0, LLM_ERROR, _llm_line(first))))
            return ThoughtRecord(step.name, step.strategy, tuple(attempts), time.perf_counter() - started)
        pending = [
            _Answer(i, text, reason == "length")
            for i, (text, reason) in enumerate(zip(first.texts, first.finish_reasons, strict=False))
        ]
        for round_ in range(self.config.max_repairs + 1):
            failed = self._evaluate_round(step, round_, pending, attempts)
            if not failed or round_ == self.config.max_repairs or self._stop.is_set():
                break
            conversations = [repair_conversation(step.conversation, a.text, feedback) for a, feedback in failed]
            answers = self._ask(conversations, step.name + ".repair", 1)
            pending = []
            for (answer, _), reply in zip(failed, answers, strict=True):
                if isinstance(reply, LLMError):
                    error = Attempt(step.name, answer.sample, round_ + 1, LLM_ERROR, _llm_line(reply))
                    attempts.append(self._record(error))
                else:
                    pending.append(_Answer(answer.sample, reply.text, reply.truncated))
            if not pending:
                break
        return ThoughtRecord(step.name, step.strategy, tuple(attempts), time.perf_counter() - started)

    def _evaluate_round(
        self, step: Step, round_: int, answers: list[_Answer], attempts: list[Attempt]
    ) -> list[tuple[_Answer, str]]:
        """Evaluate one round's answers; returns the failed ones with the feedback for their repair."""
        kernels: dict[int, KernelSource] = {}
        failed: list[tuple[_Answer, str]] = []
        for answer in answers:
            if answer.cut_off:
                attempt = Attempt(
                    step.name, answer.sample, round_, NO_CODE, f"{NO_CODE}: answer cut off at max_tokens", _CUT_OFF
                )
                attempts.append(self._record(attempt))
                failed.append((answer, _CUT_OFF))
                continue
            try:
                kernels[answer.sample] = KernelSource(extract_cuda(answer.text))
            except NoCodeError as exc:
                attempts.append(
                    self._record(Attempt(step.name, answer.sample, round_, NO_CODE, f"{NO_CODE}: {exc}", str(exc)))
                )
                failed.append((answer, str(exc)))
        results = dict(zip(kernels, self._evaluator.evaluate_many(list(kernels.values())), strict=True))
        for answer in answers:
            if answer.sample not in results:
                continue
            result = results[answer.sample]
            feedback = "" if result.ok else result.feedback()
            attempt = Attempt(
                step.name, answer.sample, round_, result.status.value, _result_line(result), feedback,
                kernels[answer.sample], result,
            )  # fmt: skip
            attempts.append(self._record(attempt))
            if not result.ok:
                failed.append((answer, feedback))
        return failed

    def _ask(self, conversations: list[list[ChatMessage]], purpose: str, n: int) -> list[LLMResponse | LLMError]:
        return self.client.complete_many(
            conversations,
            n=n,
            purpose=f"generate.{purpose}",
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            return_exceptions=True,
        )

    # recording ------------------------------------------------------------------------------------

    def event(self, kind: EventKind, thought: str, message: str, attempt: Attempt | None = None) -> None:
        if self._on_event is not None:
            with self._events:
                self._on_event(GenerationEvent(kind, thought, message, attempt))

    def _record(self, attempt: Attempt) -> Attempt:
        if self.store is not None:
            self.store.add_attempt(self.id, attempt)
        where = f"sample {attempt.sample}, " if self.config.samples_per_thought > 1 else ""
        self.event(EventKind.ATTEMPT, attempt.thought, f"{where}round {attempt.round}: {attempt.message}", attempt)
        return attempt

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started

    @property
    def cost_usd(self) -> float:
        return self.client.usage.cost_usd - self._cost_before

    # verdict ----------------------------------------------------------------------------------------

    def finish(self, records: Sequence[ThoughtRecord], notes: Sequence[str] = ()) -> GenerationOutcome:
        """Choose the winner, explain every verdict, store and announce the outcome."""
        judged, winner, reason = judge(records)
        best = winner.best if winner is not None else None
        outcome = GenerationOutcome(
            id=self.id,
            kind=self.kind,
            task_name=self.task.name,
            thoughts=tuple(judged),
            winner=winner.name if winner is not None else None,
            best_kernel=best.kernel if best is not None else None,
            best_result=best.result if best is not None else None,
            reason=reason,
            seconds=self.elapsed_s,
            cost_usd=self.cost_usd,
            notes=tuple(notes),
        )
        if self.store is not None:
            self.store.finish(outcome)
        self.event(EventKind.FINISHED, outcome.winner or "", reason)
        return outcome


def judge(records: Sequence[ThoughtRecord]) -> tuple[list[ThoughtRecord], ThoughtRecord | None, str]:
    """Verdicts for every record, the winner (fastest verified; ties go to the earlier record), the reason."""
    verified = sorted(
        ((r.best.sort_key(), i, r) for i, r in enumerate(records) if r.best is not None), key=lambda x: x[:2]
    )
    if not verified:
        failures = "; ".join(f"{r.name}: {_failure(r)}" for r in records)
        return [replace(r, verdict=_failure(r)) for r in records], None, f"no candidate passed ({failures})"
    winner = verified[0][2]
    win_ms = winner.best.time_ms if winner.best is not None else None
    judged = []
    for record in records:
        if record is winner:
            verdict = _win_verdict(winner, verified)
            judged.append(replace(record, chosen=True, verdict=verdict))
        elif record.best is not None:
            judged.append(replace(record, verdict=_lose_verdict(record.best.time_ms, win_ms, winner.name)))
        else:
            judged.append(replace(record, verdict=_failure(record)))
    return judged, next(r for r in judged if r.chosen), f"{winner.name}: {_win_verdict(winner, verified)}"


def _win_verdict(winner: ThoughtRecord, verified: list[tuple[float, int, ThoughtRecord]]) -> str:
    best = winner.best
    assert best is not None
    shown = f"{best.time_ms:.4f} ms" if best.time_ms is not None else "not timed"
    where = f"round {best.round}" + (f", sample {best.sample}" if best.sample else "")
    if len(verified) == 1:
        return f"chosen: the only thought with a verified kernel ({shown}, {where})"
    runner_up = verified[1][2]
    assert runner_up.best is not None
    next_ms = runner_up.best.time_ms
    next_shown = f"{next_ms:.4f} ms" if next_ms is not None else "not timed"
    return (
        f"chosen: fastest of {len(verified)} verified candidates ({shown}, {where}; "
        f"next {runner_up.name} at {next_shown})"
    )


def _lose_verdict(time_ms: float | None, win_ms: float | None, winner: str) -> str:
    if time_ms is None or win_ms is None:
        return f"verified, but {winner} was chosen (timings missing, earlier thought preferred)"
    if time_ms == win_ms:
        return f"verified, {time_ms:.4f} ms: as fast as {winner}, which came first"
    return f"verified, {time_ms:.4f} ms: {time_ms / win_ms:.2f}x slower than {winner}"


def _failure(record: ThoughtRecord) -> str:
    last = record.last
    if last is None:
        return "no attempt"
    count = len(record.attempts)
    return f"no verified kernel in {count} attempt{'s' if count != 1 else ''}; last: {last.message}"


def _result_line(result: EvalResult) -> str:
    if result.ok:
        return f"verified, {result.time_ms:.4f} ms" if result.time_ms is not None else "verified"
    return f"{result.status.value}: {_one_line(result.message) or 'no message'}"


def _llm_line(error: LLMError) -> str:
    return f"{LLM_ERROR}: {type(error).__name__}: {_one_line(str(error))}"


def _one_line(text: str, width: int = 240) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
