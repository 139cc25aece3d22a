"""The ask → evaluate → repair loop and the verdict, with a rule evaluator that does not compile."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from generate_helpers import RuleEvaluator, ScriptedModel, fenced, silu_kernel

from llm_servers import OpenAIServer, answer, error
from optiml.errors import NoGPUError
from optiml.generate import GenerationConfig, GenerationStore, Thought, generate_root
from optiml.generate.outcome import Attempt, ThoughtRecord
from optiml.generate.pipeline import judge
from optiml.kernel.source import KernelSource
from optiml.llm import LLMClient
from optiml.task import Task
from optiml.values import EvalResult, EvalStatus, TimingStats

FAST = silu_kernel(1.0, "fast")
SLOW = silu_kernel(4.0, "slow")
WRONG = silu_kernel(None, "wrong")


def test_a_failing_model_is_recorded_and_the_other_thoughts_go_on(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task
) -> None:
    server.responder = ScriptedModel(
        {("direct", 0): error(400, "context length exceeded"), ("fusion_first", 0): fenced(SLOW)}
    )
    config = GenerationConfig(thoughts=("direct", "fusion_first"))
    outcome = generate_root(silu_task, make_client(server), RuleEvaluator(None), config)

    direct, fusion = outcome.thoughts
    assert [a.status for a in direct.attempts] == ["llm_error"]
    assert "LLMRequestError" in direct.attempts[0].message and "context length exceeded" in direct.attempts[0].message
    assert outcome.winner == "fusion_first" and fusion.verdict.startswith(
        "chosen: the only thought with a verified kernel"
    )
    assert outcome.notes == ("aggregation skipped: it needs two verified candidates, there was one",)


def test_an_answer_cut_off_at_max_tokens_is_repaired_with_a_request_to_be_shorter(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task
) -> None:
    model = ScriptedModel(
        {("direct", 0): answer(fenced(FAST)[:300], finish_reason="length"), ("direct", 1): fenced(FAST)}
    )
    server.responder = model
    config = GenerationConfig(thoughts=("direct",))
    outcome = generate_root(silu_task, make_client(server), RuleEvaluator(None), config)

    assert [a.status for a in outcome.thoughts[0].attempts] == ["no_code", "ok"]
    assert "cut off by the token limit" in model.prompts("direct", 1)[0]
    assert outcome.ok


def test_several_samples_per_thought_repair_only_the_failing_one(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task
) -> None:
    model = ScriptedModel({("direct", 0): answer(fenced(WRONG), fenced(SLOW)), ("direct", 1): fenced(FAST)})
    server.responder = model
    config = GenerationConfig(thoughts=("direct",), samples_per_thought=2)
    outcome = generate_root(silu_task, make_client(server), RuleEvaluator(None), config)

    attempts = outcome.thoughts[0].attempts
    assert [(a.sample, a.round, a.status) for a in attempts] == [
        (0, 0, "wrong_answer"),
        (1, 0, "ok"),
        (0, 1, "ok"),
    ]
    assert server.requests[0].n == 2 and server.request_count == 2
    assert outcome.best_kernel == KernelSource(FAST)  # the repaired sample 0 beat sample 1
    assert outcome.reason == "direct: chosen: the only thought with a verified kernel (1.0000 ms, round 1)"


def test_user_thoughts_run_with_their_own_strategy(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task
) -> None:
    model = ScriptedModel({("warp_per_row", 0): fenced(FAST)})
    server.responder = model
    mine = Thought("warp_per_row", "Give every row to one warp and reduce with shuffles.")
    config = GenerationConfig(thoughts=("warp_per_row",), extra_thoughts=(mine,))
    outcome = generate_root(silu_task, make_client(server), RuleEvaluator(None), config)

    assert outcome.winner == "warp_per_row"
    (prompt,) = model.prompts("warp_per_row", 0)
    assert "Give every row to one warp and reduce with shuffles." in prompt


class NoGPU:
    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        raise NoGPUError("no CUDA GPU is visible: evaluation needs one")


def test_an_environment_error_stops_generation_and_marks_it_interrupted(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task, tmp_path: Path
) -> None:
    server.responder = ScriptedModel({("direct", 0): fenced(FAST), ("fusion_first", 0): fenced(SLOW)})
    config = GenerationConfig(thoughts=("direct", "fusion_first"))
    with GenerationStore(tmp_path / "runs.db") as store:
        with pytest.raises(NoGPUError):
            generate_root(silu_task, make_client(server), NoGPU(), config, store=store)
        (row,) = store.generations()
    assert row.status == "interrupted"
    assert row.reason == "stopped by NoGPUError: no CUDA GPU is visible: evaluation needs one"


def _record(name: str, *times: float | None) -> ThoughtRecord:
    attempts = []
    for i, ms in enumerate(times):
        timing = TimingStats.from_samples([ms]) if ms is not None else None
        result = EvalResult(EvalStatus.OK, timing=timing)
        attempts.append(Attempt(name, 0, i, "ok", "verified", kernel=KernelSource(f"// {name} {i}"), result=result))
    return ThoughtRecord(name, "s", tuple(attempts), 1.0)


def test_judge_prefers_the_faster_then_the_earlier_and_puts_untimed_last() -> None:
    failed = ThoughtRecord("broken", "s", (Attempt("broken", 0, 0, "compile_error", "compile_error: x"),), 1.0)
    judged, winner, reason = judge([_record("a", None), _record("b", 2.0), _record("c", 3.0, 2.0), failed])

    assert winner is not None and winner.name == "b"
    assert reason == "b: chosen: fastest of 3 verified candidates (2.0000 ms, round 0; next c at 2.0000 ms)"
    verdicts = {r.name: r.verdict for r in judged}
    assert verdicts["c"] == "verified, 2.0000 ms: as fast as b, which came first"
    assert verdicts["a"] == "verified, but b was chosen (timings missing, earlier thought preferred)"
    assert verdicts["broken"] == "no verified kernel in 1 attempt; last: compile_error: x"
    assert [r.chosen for r in judged] == [False, True, False, False]
