"""LLMClient against real loopback HTTP servers: answers, retries, cache, replay, budget, concurrency."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from llm_servers import OpenAIServer, ScriptedLLMServer, answer, error, garbled, slow, truncated
from optiml.llm import (
    ChatMessage,
    LLMBudgetExceeded,
    LLMCallStore,
    LLMClient,
    LLMConfigError,
    LLMReplayMiss,
    LLMRequestError,
    LLMResponseError,
    LLMUnavailable,
    make_client,
)

MSGS = [ChatMessage("system", "You write CUDA kernels."), ChatMessage("user", "Row softmax, float32.")]
MakeClient = Callable[..., LLMClient]


def conversation(i: int) -> list[ChatMessage]:
    return [ChatMessage("user", f"question {i}")]


# -- normal answers ------------------------------------------------------------------------------


def test_answers_n_samples(server: ScriptedLLMServer, make_client: MakeClient) -> None:
    client = make_client(server)
    response = client.complete(MSGS, n=3, purpose="generate")

    assert len(response.texts) == 3 and len(set(response.texts)) == 3
    assert response.finish_reasons == ["stop"] * 3
    assert response.provider == server.provider and response.model == "test-model"
    assert not response.cached
    if server.provider == "openai":  # one call with n=3
        assert server.request_count == 1
        body = server.requests[0].json
        assert body["n"] == 3 and body["max_tokens"] == 4096 and body["temperature"] == 0.7
        assert body["messages"][0] == {"role": "system", "content": "You write CUDA kernels."}
        expected_in, expected_out = 100, 60
    else:  # Messages has no n: three calls, system prompt in `system`
        assert server.request_count == 3
        body = server.requests[0].json
        assert body["system"] == "You write CUDA kernels."
        assert body["messages"] == [{"role": "user", "content": "Row softmax, float32."}]
        assert body["max_tokens"] == 4096
        expected_in, expected_out = 300, 60
    assert (response.input_tokens, response.output_tokens) == (expected_in, expected_out)
    assert response.cost_usd == pytest.approx(expected_in * 1e-6 + expected_out * 2e-6)
    usage = client.usage
    assert usage.calls == 1 and usage.api_calls == server.request_count
    assert usage.cost_usd == pytest.approx(response.cost_usd)
    assert usage.by_purpose["generate"] == pytest.approx(response.cost_usd)


def test_scripted_text_and_truncation_flag(server: ScriptedLLMServer, make_client: MakeClient) -> None:
    server.script(answer("__global__ void k() {}", finish_reason="length", output_tokens=7))
    response = make_client(server).complete(MSGS, max_tokens=7, temperature=0.2)
    assert response.text == "__global__ void k() {}"
    assert response.truncated and response.output_tokens == 7
    body = server.requests[0].json
    assert body["max_tokens"] == 7


def test_openai_server_ignoring_n_is_topped_up(make_client: MakeClient) -> None:
    with OpenAIServer(honour_n=False) as server:
        response = make_client(server).complete(MSGS, n=3)
        assert len(response.texts) == 3
        assert [r.n for r in server.requests] == [3, 2, 1]
        assert "n" not in server.requests[2].json  # n=1 is not sent at all
        assert response.input_tokens == 300


# -- retries -------------------------------------------------------------------------------------


def test_rate_limit_honours_retry_after(server: ScriptedLLMServer, make_client: MakeClient, sleeps: Any) -> None:
    server.script(error(429, "slow down", retry_after=7), answer("ok"))
    client = make_client(server)
    assert client.complete(MSGS).text == "ok"
    assert server.request_count == 2
    assert len(sleeps.delays) == 1 and 7.0 <= sleeps.delays[0] <= 7.7
    assert client.usage.retries == 1 and client.usage.api_calls == 1


def test_server_error_then_success(server: ScriptedLLMServer, make_client: MakeClient, sleeps: Any) -> None:
    server.script(error(500), answer("recovered"))
    client = make_client(server)
    assert client.complete(MSGS).text == "recovered"
    assert len(sleeps.delays) == 1 and 0.5 <= sleeps.delays[0] <= 1.0  # first backoff: 1 s with jitter
    assert client.usage.retries == 1


def test_repeated_server_errors_give_up(server: ScriptedLLMServer, make_client: MakeClient, sleeps: Any) -> None:
    server.script(*[error(503, "overloaded")] * 3)
    client = make_client(server, max_retries=2)
    with pytest.raises(LLMUnavailable) as info:
        client.complete(MSGS)
    message = str(info.value)
    assert "failed 3 attempts" in message and "3× server error (HTTP 503)" in message
    assert info.value.attempts == 3 and info.value.kinds == ("server_error",) * 3
    assert server.request_count == 3
    assert len(sleeps.delays) == 2 and sleeps.delays[1] >= 1.0  # second backoff ceiling is 2 s


def test_timeout_is_retried(server: ScriptedLLMServer, make_client: MakeClient, sleeps: Any) -> None:
    server.script(slow(5.0), answer("in time"))
    client = make_client(server, timeout_s=0.3)
    start = time.monotonic()
    assert client.complete(MSGS).text == "in time"
    assert time.monotonic() - start < 3.0
    assert client.usage.retries == 1 and server.request_count == 2


def test_timeouts_exhausted_say_so(make_client: MakeClient, openai_server: OpenAIServer) -> None:
    openai_server.script(slow(5.0), slow(5.0))
    client = make_client(openai_server, timeout_s=0.2, max_retries=1)
    with pytest.raises(LLMUnavailable, match=r"2× timed out"):
        client.complete(MSGS)


def test_garbled_body_is_retried(server: ScriptedLLMServer, make_client: MakeClient) -> None:
    server.script(garbled(), truncated(), answer("clean"))
    client = make_client(server)
    assert client.complete(MSGS).text == "clean"
    assert client.usage.retries == 2


def test_persistently_garbled_body_is_a_response_error(server: ScriptedLLMServer, make_client: MakeClient) -> None:
    server.script(*[garbled()] * 3)
    with pytest.raises(LLMResponseError, match="malformed body on all 3 attempts"):
        make_client(server, max_retries=2).complete(MSGS)


def test_bad_request_is_not_retried(server: ScriptedLLMServer, make_client: MakeClient, sleeps: Any) -> None:
    server.script(error(400, "max_tokens too large"))
    with pytest.raises(LLMRequestError, match="max_tokens too large") as info:
        make_client(server).complete(MSGS)
    assert info.value.status_code == 400
    assert server.request_count == 1 and sleeps.delays == []


def test_wrong_key_is_reported_with_a_hint(server: ScriptedLLMServer, make_client: MakeClient) -> None:
    with pytest.raises(LLMRequestError, match=r"rejected the API key.*OPTIML_LLM_API_KEY"):
        make_client(server, api_key="sk-wrong-key").complete(MSGS)
    assert server.request_count == 1


def test_server_down_fails_at_once_in_one_line(make_client: MakeClient, sleeps: Any) -> None:
    server = OpenAIServer().start()
    client = make_client(server, max_retries=3)
    server.stop()
    start = time.monotonic()
    with pytest.raises(LLMUnavailable, match="connection refused: is the server running") as info:
        client.complete(MSGS)
    assert time.monotonic() - start < 2.0 and sleeps.delays == []  # no retries, no back-off
    assert info.value.attempts == 1 and info.value.kinds == ("refused",) and "\n" not in str(info.value)


# -- cache, record, replay -----------------------------------------------------------------------


def test_identical_deterministic_request_is_cached(
    server: ScriptedLLMServer, make_client: MakeClient, store: LLMCallStore
) -> None:
    client = make_client(server, store=store)
    first = client.complete(MSGS, temperature=0.0)
    second = client.complete(MSGS, temperature=0.0)
    assert server.request_count == 1
    assert second.texts == first.texts and second.cached and second.cost_usd == 0.0
    usage = client.usage
    assert usage.calls == 2 and usage.cached_calls == 1 and usage.api_calls == 1
    assert usage.cost_usd == pytest.approx(first.cost_usd)


def test_sampled_requests_are_cached_per_sample(
    server: ScriptedLLMServer, make_client: MakeClient, store: LLMCallStore
) -> None:
    run1 = make_client(server, store=store, run_id="run-1")
    texts1 = [run1.complete(MSGS).text for _ in range(2)]
    assert server.request_count == 2 and texts1[0] != texts1[1]  # two distinct samples

    run2 = make_client(server, store=store, run_id="run-2")  # the same run again: served from the cache
    texts2 = [run2.complete(MSGS).text for _ in range(3)]
    assert texts2[:2] == texts1 and server.request_count == 3  # only the third sample is new
    assert [c.cached for c in store.calls("run-2")] == [True, True, False]

    uncached = make_client(server, store=store, cache=False)
    uncached.complete(MSGS)
    assert server.request_count == 4


def test_record_then_replay_without_server(server: ScriptedLLMServer, store: LLMCallStore, sleeps: Any) -> None:
    recorder = LLMClient(server.config(mode="record"), store=store, run_id="recorded", sleep=sleeps)
    convs = [conversation(i) for i in range(3)]
    recorded = [r.texts for r in recorder.complete_many(convs, purpose="propose")]
    recorded.append(recorder.complete(MSGS, n=2).texts)
    recorder.close()
    config = server.config(mode="replay")
    server.stop()  # replay must not need it

    replayer = LLMClient(config, store=store, run_id="replayed", sleep=sleeps)
    replayed = [r.texts for r in replayer.complete_many(convs, purpose="propose")]
    replayed.append(replayer.complete(MSGS, n=2).texts)
    assert replayed == recorded
    assert replayer.usage.cached_calls == 4 and replayer.usage.api_calls == 0
    assert replayer.usage.cost_usd == pytest.approx(recorder.usage.cost_usd)  # budgets replay faithfully
    assert store.usage("replayed").cost_usd == pytest.approx(store.usage("recorded").cost_usd)

    with pytest.raises(LLMReplayMiss, match=r"no recorded answer.*mode=record"):
        replayer.complete([ChatMessage("user", "never asked")])
    with pytest.raises(LLMReplayMiss):
        replayer.complete(MSGS, n=2)  # a second sample was never recorded


def test_record_and_replay_need_a_store(openai_server: OpenAIServer) -> None:
    for mode in ("record", "replay"):
        with pytest.raises(LLMConfigError, match="needs a store"):
            LLMClient(openai_server.config(mode=mode))


def test_make_client_persists_to_a_file(openai_server: OpenAIServer, tmp_path: Any) -> None:
    db = tmp_path / "runs.db"
    with make_client(openai_server.config(), store_path=db, run_id="r1") as client:
        client.complete(MSGS)
    with LLMCallStore(db) as store:
        (call,) = store.calls("r1")
    assert call.request.messages == tuple(MSGS) and call.response.text == "reply 1"


# -- budget and concurrency ----------------------------------------------------------------------


def test_budget_stops_paid_calls(server: ScriptedLLMServer, make_client: MakeClient, store: LLMCallStore) -> None:
    per_call = 100 * 1e-6 + 20 * 2e-6  # canned tokens × test prices
    client = make_client(server, store=store, budget_usd=1.5 * per_call, temperature=0.0)
    client.complete(conversation(1))
    client.complete(conversation(2))  # spent < budget before it; crosses the budget
    with pytest.raises(LLMBudgetExceeded, match="budget spent") as info:
        client.complete(conversation(3))
    assert info.value.spent_usd == pytest.approx(2 * per_call)
    assert server.request_count == 2
    assert client.complete(conversation(1)).cached  # cached answers are free, still served
    assert client.budget_left_usd == 0.0


def test_concurrency_limit_is_respected(server: ScriptedLLMServer, make_client: MakeClient) -> None:
    server.responder = lambda request: slow(0.15)
    client = make_client(server, concurrency=3)
    responses = client.complete_many([conversation(i) for i in range(9)])
    assert len(responses) == 9
    assert server.max_concurrent == 3

    server.reset()
    threads = [threading.Thread(target=client.complete, args=(conversation(i),)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= server.max_concurrent <= 3 and server.request_count == 6


def test_complete_many_keeps_order_and_can_return_errors(openai_server: OpenAIServer, make_client: MakeClient) -> None:
    def reply(request: Any) -> Any:
        content = request.messages[-1]["content"]
        return error(400, "refused") if content == "question 2" else answer(f"answer to {content}")

    openai_server.responder = reply
    client = make_client(openai_server, concurrency=2)
    results = client.complete_many([conversation(i) for i in range(4)], return_exceptions=True)
    assert isinstance(results[2], LLMRequestError)
    assert [r.text for r in results if not isinstance(r, Exception)] == [
        "answer to question 0",
        "answer to question 1",
        "answer to question 3",
    ]
    with pytest.raises(LLMRequestError):
        client.complete_many([conversation(i) for i in range(4)])


def test_a_failed_request_does_not_use_up_its_sample(
    openai_server: OpenAIServer, make_client: MakeClient, store: LLMCallStore
) -> None:
    openai_server.script(error(400, "once"))
    client = make_client(openai_server, store=store)
    with pytest.raises(LLMRequestError):
        client.complete(MSGS)
    client.complete(MSGS)
    assert [c.sample_index for c in store.calls()] == [0]
