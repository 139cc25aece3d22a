"""The shipped price table, the user's prices on top, and dollar budgets that must be enforceable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llm_servers import OpenAIServer, answer
from optiml.llm import ChatMessage, LLMBudgetExceeded, LLMClient, LLMConfig, LLMConfigError, load_llm_config
from optiml.llm.prices import SHIPPED_PRICES, shipped_prices

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

HI = ChatMessage("user", "hi")


def test_the_shipped_table_names_its_source_and_date_and_covers_the_common_families() -> None:
    data = tomllib.loads(SHIPPED_PRICES.read_text())
    assert "litellm" in data["source"] and data["taken"] == "2026-12-01"
    assert "Source, taken 2026-12-01" in SHIPPED_PRICES.read_text()
    table = shipped_prices()
    for model in (
        "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "o3", "o4-mini", "gpt-5", "gpt-5-mini", "gpt-5.1",
        "claude-sonnet-4-5", "claude-opus-4-1", "claude-opus-4-5", "claude-haiku-4-5", "claude-3-5-haiku",
        "deepseek-chat", "deepseek-reasoner",
    ):  # fmt: skip
        price = table.lookup(model)
        assert price is not None and price.input_per_mtok > 0 and price.output_per_mtok > price.input_per_mtok, model


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", (2.5, 10.0)),
        ("GPT-4o", (2.5, 10.0)),
        ("gpt-4o-2024-08-06", (2.5, 10.0)),  # a dated snapshot of a listed model
        ("gpt-4o-2024-05-13", (5.0, 15.0)),  # ... unless it has its own row
        ("gpt-4o-mini-2024-07-18", (0.15, 0.6)),
        ("openai/gpt-4.1", (2.0, 8.0)),  # a routing prefix (OpenRouter, proxies)
        ("claude-sonnet-4-5-20250929", (3.0, 15.0)),
        ("claude-opus-4-20250514", (15.0, 75.0)),
        ("claude-3-5-sonnet-latest", (3.0, 15.0)),
        ("deepseek/deepseek-chat", (0.28, 0.42)),
    ],
)
def test_lookup(model: str, expected: tuple[float, float]) -> None:
    price = shipped_prices().lookup(model)
    assert price is not None and (price.input_per_mtok, price.output_per_mtok) == expected


@pytest.mark.parametrize("model", ["o3-pro", "gpt-4o-realtime-preview", "claude-opus", "llama-3-70b", "", None])
def test_other_models_are_unpriced_not_priced_as_a_cheaper_sibling(model: str | None) -> None:
    assert shipped_prices().lookup(model) is None


def test_config_prices_explicit_then_table_then_unpriced() -> None:
    assert LLMConfig(model="gpt-4o").price is not None and LLMConfig(model="gpt-4o").prices_known
    assert LLMConfig(model="gpt-4o").cost_usd(1_000_000, 100_000) == pytest.approx(2.5 + 1.0)
    explicit = LLMConfig(model="gpt-4o", price_in_per_mtok=1.0, price_out_per_mtok=3.0)
    assert explicit.cost_usd(1_000_000, 1_000_000) == pytest.approx(4.0)
    unpriced = LLMConfig(model="my-local-model")
    assert unpriced.price is None and not unpriced.prices_known and unpriced.cost_usd(10**6, 10**6) == 0.0


def test_user_prices_from_optiml_toml_and_a_prices_file(tmp_path: Path) -> None:
    toml = tmp_path / "optiml.toml"
    toml.write_text('[llm]\nmodel = "my-model"\n\n[llm.prices]\n"my-model" = { input = 0.5, output = 1.5 }\n')
    config = load_llm_config(toml, env={})
    assert (config.price_in_per_mtok, config.price_out_per_mtok) == (0.5, 1.5)
    assert config.price is not None and "optiml.toml [llm.prices]" in config.price.source

    prices = tmp_path / "prices.toml"
    prices.write_text('taken = "2026-11-30"\n[models]\n"gpt-4o" = { input = 2.0, output = 9.0 }\n')
    env = {"OPTIML_LLM_PRICES_FILE": str(prices), "OPTIML_LLM_MODEL": "gpt-4o-2024-11-20"}
    overridden = load_llm_config(toml, env=env)
    assert (overridden.price_in_per_mtok, overridden.price_out_per_mtok) == (2.0, 9.0)
    assert overridden.price is not None and overridden.price.source == "prices.toml, 2026-11-30"
    # an explicit price beats every table
    explicit = load_llm_config(toml, env={**env, "OPTIML_LLM_PRICE_IN_PER_MTOK": "7"})
    assert (explicit.price_in_per_mtok, explicit.price_out_per_mtok) == (7.0, None)


@pytest.mark.parametrize(
    "text",
    [
        '[llm]\n[llm.prices]\n"m" = 3\n',
        '[llm]\n[llm.prices]\n"m" = { input = -1 }\n',
        '[llm]\n[llm.prices]\n"m" = { input = 1, outptu = 2 }\n',
        "[llm]\nprices = 5\n",
    ],
)
def test_bad_user_prices_are_one_line_errors(tmp_path: Path, text: str) -> None:
    toml = tmp_path / "optiml.toml"
    toml.write_text(text)
    with pytest.raises(LLMConfigError, match=r"price") as info:
        load_llm_config(toml, env={"OPTIML_LLM_MODEL": "m"})
    assert "\n" not in str(info.value)


def test_a_dollar_budget_for_an_unpriced_model_is_refused_unless_allowed() -> None:
    with OpenAIServer() as server:
        config = server.config(price_in_per_mtok=None, price_out_per_mtok=None, budget_usd=1.0)
        assert not config.prices_known
        with pytest.raises(LLMConfigError) as info:
            LLMClient(config)
        message = str(info.value)
        assert "cannot be enforced: no price is known for openai model 'test-model'" in message
        assert "--allow-unpriced" in message and "--max-llm-calls" in message and "\n" not in message
        assert server.request_count == 0

        allowed = LLMClient(server.config(price_in_per_mtok=None, budget_usd=1.0, allow_unpriced=True))
        server.script(answer("fine"))
        assert allowed.complete([HI]).text == "fine"
        allowed.close()
        # a priced model, or a budget in calls or tokens, needs no override
        LLMClient(server.config(model="gpt-4o", price_in_per_mtok=None, budget_usd=1.0)).close()
        LLMClient(server.config(price_in_per_mtok=None, budget_calls=3, budget_tokens=1000)).close()


def test_a_priced_table_model_binds_its_dollar_budget() -> None:
    with OpenAIServer() as server:
        server.script(answer("x", input_tokens=400_000, output_tokens=100_000))  # $1 + $1 at gpt-4o prices
        client = LLMClient(
            server.config(model="gpt-4o", price_in_per_mtok=None, price_out_per_mtok=None, budget_usd=1.5),
            sleep=lambda _s: None,
        )
        first = client.complete([HI])
        assert first.cost_usd == pytest.approx(2.0)
        with pytest.raises(LLMBudgetExceeded, match="LLM budget spent") as info:
            client.complete([ChatMessage("user", "again")])
        assert info.value.limit == "usd" and info.value.reason == "LLM cost budget spent ($1.5)"
        assert server.request_count == 1
        client.close()
