"""LLMProposer against real loopback HTTP servers (OpenAI and Anthropic protocols) with scripted answers."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest
from propose_helpers import TASKS, read_kernel, suite_task

from llm_servers import AnthropicServer, OpenAIServer, RecordedRequest, Reply, answer, error, slow
from optiml.llm import LLMBudgetExceeded, LLMCallStore, LLMClient, LLMUnavailable
from optiml.propose.base import HistoryEntry, ProposalContext, Proposer
from optiml.propose.llm import LLMProposer
from optiml.values import Edit, EvalResult, EvalStatus, TimingStats

SILU_PATH = TASKS / "silu.naive.cu"
SILU = SILU_PATH.read_text()


def sr_answer(new_block: int, category: str = "launch configuration") -> str:
    return f"""RATIONALE: Memory bound; try {new_block} threads per block for more loads in flight.
CATEGORY: {category}
EDIT:
<<<<<<< SEARCH
#define BLOCK_SIZE 256  // threads per block
=======
#define BLOCK_SIZE {new_block}  // threads per block
>>>>>>> REPLACE
"""


NO_MATCH = """RATIONALE: vectorise.
CATEGORY: vectorization
<<<<<<< SEARCH
    const float v = x[idx];
=======
    const float4 v = reinterpret_cast<const float4*>(x)[idx];
>>>>>>> REPLACE
"""


@pytest.fixture
def openai() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def anthropic() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


def context(**kwargs: object) -> ProposalContext:
    return ProposalContext(task=suite_task(SILU_PATH), kernel=read_kernel(SILU_PATH), **kwargs)  # type: ignore[arg-type]


def proposer_for(server: OpenAIServer | AnthropicServer, **overrides: object) -> LLMProposer:
    return LLMProposer(LLMClient(server.config(**overrides), sleep=lambda _s: None))


def test_good_search_replace_answer(openai: OpenAIServer) -> None:
    openai.script(answer(sr_answer(512)))
    proposer = proposer_for(openai)
    assert isinstance(proposer, Proposer) and proposer.name == "llm:test-model"
    timing = TimingStats.from_samples([1.0, 1.0, 1.0])
    history = (
        HistoryEntry(
            Edit("knob", "BLOCK_SIZE=128", "launch_config", "fewer threads", "heuristic"),
            "wrong_answer",
            message="max abs error 3.2",
        ),
    )
    ctx = context(
        result=EvalResult(status=EvalStatus.OK, timing=timing), diagnosis_text="DRAM throughput 40%", history=history
    )

    [proposal] = proposer.propose(ctx, 1)

    assert proposal.usable and proposal.kernel is not None
    assert "#define BLOCK_SIZE 512" in proposal.kernel.code
    edit = proposal.edit
    assert (edit.kind, edit.category, edit.proposer) == ("search_replace", "launch_config", "llm:test-model@propose_v1")
    assert edit.rationale.startswith("Memory bound; try 512 threads")
    [request] = openai.requests
    system, user = (m["content"] for m in request.messages)
    assert "OPTIML_ABI_VERSION" in system and "<<<<<<< SEARCH" in system
    assert "class Model(nn.Module)" in user and "silu_kernel<<<grid, BLOCK_SIZE" in user
    assert "correct; 1.0000 ms" in user and "DRAM throughput 40%" in user
    assert "fewer threads → wrong_answer: max abs error 3.2" in user
    assert proposer.spent_usd == pytest.approx(proposer.client.usage.cost_usd) and proposer.spent_usd > 0


def test_fenced_whole_source_answer(openai: OpenAIServer) -> None:
    new_source = SILU.replace("expf(-v)", "__expf(-v)")
    openai.script(answer(f"RATIONALE: cheaper exp.\nCATEGORY: other\nEDIT:\n```cuda\n{new_source}```\n"))
    [proposal] = proposer_for(openai).propose(context(), 1)
    assert proposal.usable and proposal.edit.kind == "full_source"
    assert proposal.kernel is not None and proposal.kernel.code == new_source


def test_garbled_answer_then_good_one_on_retry(openai: OpenAIServer) -> None:
    openai.script(answer("Sure! I think the kernel could be faster with better memory access."), answer(sr_answer(128)))
    [proposal] = proposer_for(openai).propose(context(), 1)
    assert proposal.usable and proposal.kernel is not None and "#define BLOCK_SIZE 128" in proposal.kernel.code
    assert openai.request_count == 2
    retry = openai.requests[1].messages
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "user"]
    assert retry[2]["content"].startswith("Sure! I think")
    assert "Your answer could not be used: no edit found" in retry[3]["content"]


def test_search_that_does_not_match_fails_after_one_retry(openai: OpenAIServer) -> None:
    openai.script(answer(NO_MATCH), answer(NO_MATCH))
    [proposal] = proposer_for(openai).propose(context(), 1)
    assert not proposal.usable and proposal.kernel is None
    assert proposal.error is not None
    assert proposal.error.startswith("block 1: SEARCH text not found in the current kernel")
    line = SILU.splitlines().index("    const float v = x[i];") + 1
    assert f"is closest to line {line}: 'const float v = x[i];'" in proposal.error
    assert "(after one retry" in proposal.error
    assert "block 1: SEARCH text not found" in openai.requests[1].messages[-1]["content"]
    assert proposal.edit.category == "vectorization" and proposal.edit.payload == NO_MATCH
    assert openai.request_count == 2


def test_several_answers_from_one_request(openai: OpenAIServer) -> None:
    openai.script(answer(sr_answer(512), sr_answer(128), sr_answer(1024)))
    proposals = proposer_for(openai).propose(context(), 3)
    assert [p.usable for p in proposals] == [True, True, True]
    assert openai.request_count == 1 and openai.requests[0].n == 3
    assert len({p.kernel.digest for p in proposals if p.kernel is not None}) == 3


def test_more_answers_than_one_request_holds_run_in_parallel(openai: OpenAIServer) -> None:
    def by_size(request: RecordedRequest) -> Reply:  # the two requests race: answer by what each asks for
        return answer(sr_answer(512), sr_answer(128)) if request.n == 2 else answer(sr_answer(1024))

    openai.script(by_size, by_size)
    proposer = LLMProposer(LLMClient(openai.config(), sleep=lambda _s: None), samples_per_request=2)
    proposals = proposer.propose(context(), 3)
    assert len(proposals) == 3 and all(p.usable for p in proposals)
    assert sorted(r.n for r in openai.requests) == [1, 2]


def test_anthropic_gets_one_request_per_sample(anthropic: AnthropicServer) -> None:
    anthropic.script(answer(sr_answer(512)), answer(sr_answer(128)), answer(sr_answer(64)))
    proposals = proposer_for(anthropic).propose(context(), 3)
    assert all(p.usable for p in proposals)
    assert anthropic.request_count == 3
    blocks = sorted(p.kernel.code.split("#define BLOCK_SIZE ")[1].split()[0] for p in proposals if p.kernel)
    assert blocks == ["128", "512", "64"]


def test_duplicate_answers_in_one_batch(openai: OpenAIServer) -> None:
    openai.script(answer(sr_answer(512), sr_answer(512)))
    first, second = proposer_for(openai).propose(context(), 2)
    assert first.usable and not second.usable
    assert second.error == "same kernel as proposal 1 of this batch"


def test_already_tried_kernel_is_sent_back(openai: OpenAIServer) -> None:
    tried = SILU.replace("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 512")
    openai.script(answer(sr_answer(512)), answer(sr_answer(128)))
    ctx = context(tried_digests=frozenset({read_kernel(SILU_PATH).with_code(tried).digest}))
    [proposal] = proposer_for(openai).propose(ctx, 1)
    assert proposal.usable and proposal.kernel is not None and "BLOCK_SIZE 128" in proposal.kernel.code
    assert "already evaluated" in openai.requests[1].messages[-1]["content"]


def test_cut_off_answer_mentions_max_tokens(openai: OpenAIServer) -> None:
    openai.script(answer(sr_answer(512)[:150], finish_reason="length"), answer(sr_answer(512)))
    [proposal] = proposer_for(openai).propose(context(), 1)
    assert proposal.usable
    assert "hit the max_tokens limit" in openai.requests[1].messages[-1]["content"]


def test_unavailable_service_is_raised_when_every_request_failed(openai: OpenAIServer) -> None:
    openai.script(*[error(503)] * 4)
    with pytest.raises(LLMUnavailable, match=r"failed 4 attempts \(4× server error"):
        proposer_for(openai, max_retries=3).propose(context(), 2)


def test_a_failed_request_beside_a_good_one_gives_failed_proposals(openai: OpenAIServer) -> None:
    def by_size(request: RecordedRequest) -> Reply:  # the two requests race: fail the one of one sample
        return answer(sr_answer(512), sr_answer(128)) if request.n == 2 else error(400, "too long")

    openai.script(by_size, by_size)
    proposer = LLMProposer(LLMClient(openai.config(), sleep=lambda _s: None), samples_per_request=2)
    proposals = proposer.propose(context(), 3)
    assert [p.usable for p in proposals].count(True) == 2
    [failed] = [p for p in proposals if not p.usable]
    assert failed.error is not None and failed.error.startswith("LLM request failed:") and "too long" in failed.error


def test_spent_budget_is_raised_when_nothing_was_proposed(openai: OpenAIServer) -> None:
    proposer = proposer_for(openai, budget_usd=0.0)
    with pytest.raises(LLMBudgetExceeded):
        proposer.propose(context(), 2)
    assert openai.request_count == 0


# -- what a call costs: retries, samples, cache, interrupts ------------------------------------------


def test_one_retry_per_call_not_one_per_unusable_answer(openai: OpenAIServer) -> None:
    openai.script(answer(NO_MATCH, NO_MATCH, NO_MATCH, NO_MATCH), answer(sr_answer(128)))
    proposals = proposer_for(openai).propose(context(), 4)
    assert [p.usable for p in proposals] == [True, False, False, False]
    assert openai.request_count == 2  # before: one retry for each of the four answers


def test_answers_beside_a_usable_one_are_not_retried(openai: OpenAIServer) -> None:
    openai.script(answer(sr_answer(512), NO_MATCH, "no edit here"))
    proposals = proposer_for(openai).propose(context(), 3)
    assert [p.usable for p in proposals] == [True, False, False] and openai.request_count == 1


def test_fewer_samples_after_a_mostly_wasted_batch_and_back_after_a_good_one(openai: OpenAIServer) -> None:
    proposer = proposer_for(openai, temperature=0.0)
    ctx = context()
    digest = ctx.kernel.digest
    openai.script(answer(sr_answer(512), sr_answer(512), NO_MATCH, NO_MATCH))  # 1 new of 4
    proposer.propose(ctx, 4)
    assert proposer.samples_for(digest, 4) == 2
    openai.script(answer(NO_MATCH, NO_MATCH), answer("still prose"))  # nothing new (+ its retry)
    assert not any(p.usable for p in proposer.propose(ctx, 4))
    assert openai.requests[-2].n == 2 and proposer.samples_for(digest, 4) == 1
    openai.script(answer(sr_answer(1024)))
    proposer.propose(ctx, 4)
    assert openai.requests[-1].n == 1 and proposer.samples_for(digest, 4) == 2  # useful again: doubled
    assert proposer.samples_for("another kernel", 4) == 4


def test_answers_from_the_cache_are_marked_as_cached(openai: OpenAIServer) -> None:
    store = LLMCallStore(":memory:")
    client = LLMClient(openai.config(temperature=0.0), store=store, sleep=lambda _s: None)
    openai.script(answer(sr_answer(512)))
    first = LLMProposer(client, adaptive=False)
    first.propose(context(), 1)
    assert first.last_sources == ["network"]
    again = LLMProposer(client, adaptive=False)
    [proposal] = again.propose(context(), 1)
    assert proposal.usable and again.last_sources == ["cached"] and openai.request_count == 1


def test_ctrl_c_while_the_server_is_silent_returns_at_once(openai: OpenAIServer) -> None:
    openai.script(*[slow(60.0)] * 4)
    client = LLMClient(openai.config(timeout_s=30.0, deadline_s=60.0), sleep=lambda _s: None)
    proposer = LLMProposer(client, samples_per_request=1)
    main = threading.main_thread().ident
    assert main is not None

    def interrupt() -> None:
        while openai.request_count < 2:
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        proposer.propose(context(), 2)
    assert time.monotonic() - start < 3.0 and client.cancelled
