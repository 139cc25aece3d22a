"""A silent LLM's retries are counted against the deadline (issue 40): with 120 s attempts and a 180 s deadline the
user was told "retry 1 of 4" although only one retry fits. Against a real server on loopback that never answers."""

from __future__ import annotations

import logging

import pytest

from llm_servers import OpenAIServer, slow
from optiml.llm import ChatMessage, LLMClient, LLMUnavailable


def test_the_retry_count_is_what_the_deadline_allows(caplog: pytest.LogCaptureFixture) -> None:
    with OpenAIServer(responder=lambda _r: slow(30.0)) as server:
        client = LLMClient(server.config(timeout_s=1.0, deadline_s=2.5, max_retries=4), sleep=lambda _s: None)
        with caplog.at_level(logging.WARNING, logger="optiml.llm"), pytest.raises(LLMUnavailable):
            client.complete([ChatMessage("user", "hello")])
    retries = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retries and all("of at most 1 in" in message for message in retries), retries
    assert server.request_count == 2
