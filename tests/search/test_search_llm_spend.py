"""LLM spend of a real search: the engine, the synthetic landscape and the real LLM proposer against a
scripted loopback server. Calls stay bounded when the model only repeats itself, the LLM budgets in
calls stop a run with a stop reason, and the summary and ``optiml show`` report calls, tokens and
dollars per verified candidate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from llm_servers import OpenAIServer, RecordedRequest, Reply, answer
from optiml.cli.views.runs import render_run_path
from optiml.cli.views.search import render_summary
from optiml.llm import LLMCallStore, LLMClient, LLMConfig
from optiml.propose.llm import LLMProposer
from optiml.report.llm_spend import load_run_spend
from optiml.search import Budgets, SearchConfig, SearchEvent, run_search
from optiml.search.events import EventKind
from optiml.search.landscape import KNOBS, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.search.outcome import SearchOutcome
from optiml.search.queries import best_path
from optiml.store import RunStore, new_run_id
from optiml.task import Task

DEFINE = re.compile(r"^#define (BLOCK|TILE|UNROLL|VEC) (\d+)$", re.MULTILINE)
NO_MATCH = """RATIONALE: vectorise the loads.
CATEGORY: vectorization
<<<<<<< SEARCH
    float v = x[idx];
=======
    float4 v = x4[idx];
>>>>>>> REPLACE
"""
PROSE = "I would make this kernel faster with shared memory."


def knobs_of(request: RecordedRequest) -> dict[str, int]:
    current = request.messages[1]["content"].split("# Current kernel", 1)[1]
    return {name: int(value) for name, value in DEFINE.findall(current)}


def move(knobs: dict[str, int], name: str, up: bool = True) -> str:
    values = KNOBS[name]
    index = values.index(knobs[name])
    new = values[index + 1] if up and index + 1 < len(values) else values[max(index - 1, 0)]
    return (
        f"RATIONALE: {name} {knobs[name]} to {new}.\nCATEGORY: tiling\nEDIT:\n<<<<<<< SEARCH\n"
        f"#define {name} {knobs[name]}\n=======\n#define {name} {new}\n>>>>>>> REPLACE\n"
    )


def repetitive(request: RecordedRequest) -> Reply:
    """The same BLOCK edit twice (new once, then a duplicate), an edit that does not apply, and prose;
    retries get prose."""
    if len(request.messages) > 2:
        return answer(*[PROSE] * request.n)
    knobs = knobs_of(request)
    texts = [move(knobs, "BLOCK"), move(knobs, "BLOCK"), NO_MATCH, PROSE]
    return answer(*(texts * 2)[: request.n])


def productive(request: RecordedRequest) -> Reply:
    """A different knob move for every sample: new kernels as long as the search asks."""
    if len(request.messages) > 2:
        return answer(*[PROSE] * request.n)
    knobs = knobs_of(request)
    names = list(KNOBS)
    return answer(*[move(knobs, names[(request.index + i) % 4], up=request.index % 3 != 0) for i in range(request.n)])


def search(
    task: Task,
    store_path: Path,
    config: LLMConfig,
    budgets: Budgets,
    *,
    strategy: str = "mcts",
    run_id: str | None = None,
    parallel_proposals: int = 2,
    events: list[SearchEvent] | None = None,
) -> SearchOutcome:
    run_id = run_id or new_run_id()
    with RunStore(store_path) as store, LLMCallStore(store_path) as calls:
        client = LLMClient(config, store=calls, run_id=run_id, sleep=lambda _s: None)
        try:
            return run_search(
                task,
                landscape_kernel(),
                LandscapeEvaluator(Landscape(seed=0)),
                [LLMProposer(client)],
                None,
                store,
                SearchConfig(strategy=strategy, budgets=budgets, parallel_proposals=parallel_proposals),
                on_event=events.append if events is not None else None,
                run_id=run_id,
            )
        finally:
            client.close()


@pytest.mark.parametrize(("strategy", "most_calls"), [("mcts", 30), ("greedy", 30), ("best-of-n", 8)])
def test_a_model_that_repeats_itself_costs_a_bounded_number_of_calls(
    task: Task, tmp_path: Path, strategy: str, most_calls: int
) -> None:
    # Before: 62 calls for 5 evaluations with mcts and greedy, 316 calls for 2 with best-of-n.
    with OpenAIServer(responder=repetitive) as server:
        outcome = search(task, tmp_path / "runs.db", server.config(), Budgets(max_evaluations=40), strategy=strategy)
        assert outcome.stop_reason.startswith("search space exhausted")
        assert server.request_count <= most_calls, server.request_count
        retries = [r for r in server.requests if len(r.messages) > 2]
        firsts = [r for r in server.requests if len(r.messages) == 2]
        assert len(retries) <= len(firsts)  # at most one retry per request, never one per answer
        assert firsts[0].n == 4 and min(r.n for r in firsts) < 4  # fewer samples once the model runs dry
        spend = load_run_spend(tmp_path / "runs.db", outcome.run_id)
        assert spend is not None and spend.paid.api_calls == server.request_count
        assert spend.llm_verified == outcome.evaluations - 1  # every new LLM kernel verified here


def test_the_call_budget_of_the_search_stops_the_run(task: Task, tmp_path: Path) -> None:
    with OpenAIServer(responder=productive) as server:
        outcome = search(
            task,
            tmp_path / "runs.db",
            server.config(),
            Budgets(max_evaluations=60, max_llm_calls=3),
            parallel_proposals=1,
        )
        assert outcome.stop_reason == "LLM call budget spent (3 calls)"
        assert server.request_count == 3 and outcome.evaluations > 3  # the paid-for candidates were evaluated


def test_the_clients_call_budget_stops_the_run_cleanly_with_its_reason(task: Task, tmp_path: Path) -> None:
    with OpenAIServer(responder=productive) as server:
        outcome = search(task, tmp_path / "runs.db", server.config(budget_calls=2), Budgets(max_evaluations=60))
        assert outcome.stop_reason == "LLM call budget spent (2 calls)"
        assert server.request_count == 2


def test_the_token_budget_of_the_search_stops_the_run(task: Task, tmp_path: Path) -> None:
    with OpenAIServer(responder=productive) as server:
        budgets = Budgets(max_evaluations=60, max_llm_tokens=500)  # canned: 100 in + 20 out per sample
        outcome = search(task, tmp_path / "runs.db", server.config(), budgets, parallel_proposals=1)
        assert outcome.stop_reason == "LLM token budget spent (500 tokens)"
        assert server.request_count == 3  # 180 tokens each: 360 < 500 before the third, 540 after it


def test_summary_and_show_report_calls_tokens_and_cost_per_verified_candidate(task: Task, tmp_path: Path) -> None:
    store_path = tmp_path / "runs.db"
    with OpenAIServer(responder=productive) as server:
        outcome = search(task, store_path, server.config(), Budgets(max_evaluations=8))
        calls = server.request_count
    spend = load_run_spend(store_path, outcome.run_id)
    assert spend is not None and spend.llm_verified >= 1
    # every billed call reached the server; a connection the client saw drop (and retried) is
    # counted by the server but never billed
    assert spend.paid.api_calls <= calls <= spend.paid.api_calls + 2
    calls = spend.paid.api_calls
    tokens_in = 100 * calls  # the canned 100 input tokens per call, 20 output per sample
    paid = spend.paid
    assert paid.input_tokens == tokens_in and paid.cost_usd == pytest.approx(
        1e-6 * tokens_in + 2e-6 * paid.output_tokens
    )
    per = spend.per_verified()
    assert per is not None and per[0] == pytest.approx(calls / spend.llm_verified)
    assert per[2] == pytest.approx(spend.search.cost_usd / spend.llm_verified) and per[2] > 0

    console = Console(record=True, width=220)
    console.print(render_summary(outcome, spend))
    summary = console.export_text()
    assert f"{calls}, {tokens_in:,} tokens in, {paid.output_tokens:,} out" in summary
    assert f"{calls / spend.llm_verified:.1f} calls" in summary and "per verified candidate" in summary
    assert f"{spend.llm_verified} of {spend.llm_evaluated} evaluated LLM candidates verified" in summary

    from optiml.cli import app

    result = CliRunner().invoke(app, ["show", outcome.run_id, "--store", str(store_path)], terminal_width=220)
    assert result.exit_code == 0, result.output
    assert "LLM calls" in result.output and "per verified candidate" in result.output
    assert f"{calls / spend.llm_verified:.1f} calls" in result.output


def test_cached_answers_and_unpriced_models_are_said_so(task: Task, tmp_path: Path) -> None:
    store_path = tmp_path / "runs.db"
    with OpenAIServer(responder=productive) as server:
        config = server.config(temperature=0.0, price_in_per_mtok=None, price_out_per_mtok=None)
        search(task, store_path, config, Budgets(max_evaluations=4), parallel_proposals=1)
        paid = server.request_count
        events: list[SearchEvent] = []
        again = search(task, store_path, config, Budgets(max_evaluations=4), parallel_proposals=1, events=events)
        assert server.request_count == paid  # the same questions at temperature 0: all from the cache
    proposed = [e.message for e in events if e.kind is EventKind.PROPOSED]
    assert proposed and all("answers from the cache)" in m for m in proposed)
    spend = load_run_spend(store_path, again.run_id)
    assert spend is not None and spend.total.cached_calls == spend.total.calls > 0 and spend.paid.api_calls == 0
    with RunStore(store_path) as store:
        console = Console(record=True, width=220)
        console.print(render_run_path(best_path(store, again.run_id), spend))
    text = console.export_text()
    assert f"({spend.total.calls} from the cache, free)" in text

    with RunStore(store_path) as store:
        [first_id] = [r.id for r in store.runs() if r.id != again.run_id]
    first = load_run_spend(store_path, first_id)
    assert first is not None and first.unpriced == ("test-model",)
    console = Console(record=True, width=220)
    console.print(render_summary(again, first))
    assert "no price known for test-model: cost not counted" in console.export_text()
