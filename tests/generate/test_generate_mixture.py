"""End to end on the CPU: scripted model on a loopback server, real nvcc, rule-based verification."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from generate_helpers import RuleEvaluator, ScriptedModel, fenced, silu_kernel

from llm_servers import OpenAIServer
from optiml.generate import GenerationConfig, GenerationStore, generate_root
from optiml.generate.outcome import EventKind, GenerationEvent
from optiml.kernel.compiler import Compiler
from optiml.llm import LLMCallStore, LLMClient
from optiml.task import Task

pytestmark = pytest.mark.nvcc

BROKEN = silu_kernel(2.0, "memory", broken=True)
FIXED = silu_kernel(2.0, "memory")
DIRECT = silu_kernel(5.0, "direct")
FUSION = silu_kernel(3.0, "fusion")
WRONG = silu_kernel(None, "parallel")
AGGREGATED = silu_kernel(1.0, "aggregate")


def scripted_model() -> ScriptedModel:
    return ScriptedModel(
        {
            ("direct", 0): fenced(DIRECT),
            ("memory_first", 0): fenced(BROKEN),  # does not compile ...
            ("memory_first", 1): fenced(FIXED, "The undeclared name was a typo; removed."),  # ... then repaired
            ("parallel_first", 0): "I would use one warp per row.",  # no code at all
            ("parallel_first", 1): fenced(WRONG),  # compiles, wrong answer
            ("parallel_first", 2): fenced(WRONG),  # the same again: still wrong
            ("fusion_first", 0): fenced(FUSION),
            ("aggregate", 0): fenced(AGGREGATED, "Combined float4 loads with the fused epilogue."),
        }
    )


def test_mixture_of_thoughts_end_to_end(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task, compiler: Compiler, tmp_path: Path
) -> None:
    model = scripted_model()
    server.responder = model
    evaluator = RuleEvaluator(compiler)
    events: list[GenerationEvent] = []
    with GenerationStore(tmp_path / "runs.db") as store:
        outcome = generate_root(
            silu_task, make_client(server), evaluator, GenerationConfig(), store=store, on_event=events.append
        )
        stored = store.load(outcome.id)

    # the aggregated kernel is the fastest verified one, so it is the root
    assert outcome.ok and outcome.winner == "aggregate"
    assert outcome.best_kernel is not None and "VARIANT_AGGREGATE" in outcome.best_kernel.code
    assert outcome.best_result is not None and outcome.best_result.time_ms == pytest.approx(1.0)
    assert outcome.reason.startswith("aggregate: chosen: fastest of 4 verified candidates (1.0000 ms")

    by_name = {t.name: t for t in outcome.thoughts}
    assert list(by_name) == ["direct", "memory_first", "parallel_first", "fusion_first", "aggregate"]
    assert [a.status for a in by_name["memory_first"].attempts] == ["compile_error", "ok"]
    assert [a.status for a in by_name["parallel_first"].attempts] == ["no_code", "wrong_answer", "wrong_answer"]
    assert by_name["memory_first"].verdict == "verified, 2.0000 ms: 2.00x slower than aggregate"
    assert by_name["direct"].verdict == "verified, 5.0000 ms: 5.00x slower than aggregate"
    assert by_name["parallel_first"].verdict.startswith("no verified kernel in 3 attempts; last: wrong_answer")
    assert [t.name for t in outcome.thoughts if t.chosen] == ["aggregate"]

    # the compiler's own message went back to the model, and so did the verifier's
    compile_error = by_name["memory_first"].attempts[0]
    assert "this_is_not_declared_anywhere" in compile_error.feedback
    assert compile_error.feedback in model.prompts("memory_first", 1)[0]
    assert "no ```cuda block" in model.prompts("parallel_first", 1)[0]
    assert "4096 of 8192 elements differ" in model.prompts("parallel_first", 2)[0]

    # aggregation saw the verified kernels in thought order, without their (noisy) times
    (aggregate_prompt,) = model.prompts("aggregate", 0)
    positions = [aggregate_prompt.index(f"#define VARIANT_{v} 1") for v in ("DIRECT", "MEMORY", "FUSION")]
    assert positions == sorted(positions)
    assert "VARIANT_PARALLEL" not in aggregate_prompt and " ms" not in aggregate_prompt

    # the identical wrong kernel of parallel_first was evaluated once
    assert len(evaluator.evaluated) == len(set(evaluator.evaluated)) == 6

    # what was stored is what was returned
    assert stored.winner == "aggregate" and stored.best_kernel == outcome.best_kernel
    assert [(t.name, t.verdict, len(t.attempts)) for t in stored.thoughts] == [
        (t.name, t.verdict, len(t.attempts)) for t in outcome.thoughts
    ]
    assert stored.thoughts[1].attempts[0].result is not None
    assert stored.thoughts[1].attempts[0].result.status.value == "compile_error"

    kinds = [e.kind for e in events]
    assert kinds.count(EventKind.STARTED) == 5 and kinds[-1] is EventKind.FINISHED
    assert kinds.count(EventKind.ATTEMPT) == outcome.attempts == 8


def test_recorded_generation_replays_without_the_server(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task, compiler: Compiler, tmp_path: Path
) -> None:
    server.responder = scripted_model()
    db = tmp_path / "runs.db"
    with LLMCallStore(db) as calls, GenerationStore(db) as store:
        recorded = generate_root(
            silu_task, make_client(server, calls, "run-1", mode="record"), RuleEvaluator(compiler), store=store
        )
        asked = server.request_count
        replay_config = server.config(mode="replay")
        server.stop()  # replay must not need it
        with LLMClient(replay_config, store=calls, run_id="run-2") as replayer:
            replayed = generate_root(silu_task, replayer, RuleEvaluator(compiler), store=store)
        rows = store.generations()

    assert asked == 8  # 4 thoughts, 3 repairs, 1 aggregation
    assert replayed.best_kernel == recorded.best_kernel and replayed.winner == recorded.winner == "aggregate"
    assert [[a.status for a in t.attempts] for t in replayed.thoughts] == [
        [a.status for a in t.attempts] for t in recorded.thoughts
    ]
    assert replayer.usage.api_calls == 0 and replayer.usage.calls == 8
    assert replayed.cost_usd == pytest.approx(recorded.cost_usd) and recorded.cost_usd > 0
    assert [(r.llm_run_id, r.status, r.root_digest) for r in rows] == [
        ("run-1", "finished", recorded.best_kernel.digest if recorded.best_kernel else None),
        ("run-2", "finished", recorded.best_kernel.digest if recorded.best_kernel else None),
    ]


def test_no_verified_candidate_is_an_outcome_with_a_reason(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task, compiler: Compiler
) -> None:
    server.responder = ScriptedModel({("direct", 0): fenced(WRONG), ("fusion_first", 0): fenced(BROKEN)})
    config = GenerationConfig(thoughts=("direct", "fusion_first"), max_repairs=1)
    outcome = generate_root(silu_task, make_client(server), RuleEvaluator(compiler), config)

    assert not outcome.ok and outcome.winner is None
    assert outcome.notes == ("aggregation skipped: it needs two verified candidates, there was none",)
    assert "direct: no verified kernel in 2 attempts" in outcome.reason
    assert "fusion_first: no verified kernel in 2 attempts; last: no_code" in outcome.reason
    with pytest.raises(Exception, match="generation found no verified kernel for silu: no candidate passed"):
        outcome.require_kernel()
