"""Request identity (cache keys), message validation, response serialisation, retry timing."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

import optiml
from optiml.llm import Backoff, ChatMessage, LLMRequest, LLMResponse
from optiml.llm.retry import parse_retry_after

MESSAGES = (ChatMessage("system", "s"), ChatMessage("user", "u"))
REQ = LLMRequest(MESSAGES, "model-a", 0.7, 256, n=2, purpose="x")
BASE = "http://127.0.0.1:8000/v1"


def test_cache_key_is_stable_and_covers_what_matters() -> None:
    key = REQ.cache_key("openai", BASE)
    assert key == LLMRequest(REQ.messages, "model-a", 0.7, 256, 2, "x").cache_key("openai", BASE + "/")
    assert len(key) == 64
    assert replace(REQ, purpose="other").cache_key("openai", BASE) == key  # purpose is a label only
    variants = [
        REQ.cache_key("anthropic", BASE),
        REQ.cache_key("openai", "http://127.0.0.1:9000/v1"),
        replace(REQ, model="model-b").cache_key("openai", BASE),
        replace(REQ, messages=(ChatMessage("user", "u"),)).cache_key("openai", BASE),
        replace(REQ, temperature=0.0).cache_key("openai", BASE),
        replace(REQ, max_tokens=512).cache_key("openai", BASE),
        replace(REQ, n=1).cache_key("openai", BASE),
    ]
    assert len({key, *variants}) == len(variants) + 1


def test_validation() -> None:
    with pytest.raises(ValueError, match="role"):
        ChatMessage("robot", "hi")
    with pytest.raises(ValueError, match="n must be"):
        replace(REQ, n=0)
    with pytest.raises(ValueError, match="at least one message"):
        replace(REQ, messages=())


def test_json_round_trips() -> None:
    assert LLMRequest.from_json(REQ.to_json()) == REQ
    response = LLMResponse(["a", "b"], "m", "openai", 10, 20, 0.5, 1.25, False, ["stop", "length"])
    assert LLMResponse.from_json(response.to_json(), cached=False) == response
    assert response.truncated and response.text == "a"
    merged = LLMResponse.merge([response, replace(response, texts=["c"], finish_reasons=["stop"])])
    assert merged.texts == ["a", "b", "c"] and merged.input_tokens == 20 and merged.cost_usd == 1.0


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": later}) or 0) <= 31


def test_backoff() -> None:
    backoff, rng = Backoff(base_s=1.0, max_s=8.0, retry_after_cap_s=60.0), random.Random(0)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        delays = [backoff.delay(attempt, None, rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert 10.0 <= backoff.delay(1, 10.0, rng) <= 11.0
    assert backoff.delay(1, 3600.0, rng) == 60.0


def test_importing_the_package_does_not_import_the_sdks() -> None:
    src = os.path.dirname(os.path.dirname(optiml.__file__))
    code = "import sys, optiml.llm; assert 'openai' not in sys.modules and 'anthropic' not in sys.modules"
    env = {**os.environ, "PYTHONPATH": src}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
