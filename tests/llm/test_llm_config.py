"""LLMConfig loading: overrides > environment > optiml.toml [llm] > defaults; keys; 'not configured'."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.llm import LLMConfig, LLMConfigError, LLMError, load_llm_config


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "optiml.toml"
    path.write_text(text)
    return path


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no optiml.toml here
    config = load_llm_config(env={})
    assert config == LLMConfig()
    assert (config.provider, config.model, config.temperature) == ("openai", None, 0.7)
    assert config.max_tokens == 4096
    assert (config.timeout_s, config.max_retries, config.concurrency) == (120.0, 4, 4)
    assert (config.connect_timeout_s, config.deadline_s) == (10.0, 180.0)  # a silent server: 3 minutes, not 10
    assert config.budget_usd is None and config.cache and config.mode == "live"
    assert (config.budget_calls, config.budget_tokens, config.allow_unpriced) == (None, None, False)
    assert (config.price_in_per_mtok, config.price_out_per_mtok, config.price) == (None, None, None)
    assert config.effective_base_url == "https://api.openai.com/v1"
    assert not config.is_configured


def test_precedence_toml_env_overrides(tmp_path: Path) -> None:
    toml = write_toml(
        tmp_path,
        '[llm]\nmodel = "from-toml"\ntemperature = 0.1\nmax_tokens = 1000\nconcurrency = 2\nbudget_usd = 5\n',
    )
    only_toml = load_llm_config(toml, env={})
    assert (only_toml.model, only_toml.temperature, only_toml.max_tokens, only_toml.budget_usd) == (
        "from-toml", 0.1, 1000, 5.0,
    )  # fmt: skip

    env = {"OPTIML_LLM_MODEL": "from-env", "OPTIML_LLM_TEMPERATURE": "0.3", "OPTIML_LLM_BUDGET_USD": "none"}
    with_env = load_llm_config(toml, env=env)
    assert (with_env.model, with_env.temperature, with_env.max_tokens) == ("from-env", 0.3, 1000)
    assert with_env.budget_usd is None

    overrides = {"model": "from-cli", "temperature": None, "concurrency": "8"}  # None = option not given
    with_cli = load_llm_config(toml, env=env, overrides=overrides)
    assert (with_cli.model, with_cli.temperature, with_cli.concurrency) == ("from-cli", 0.3, 8)


def test_all_documented_env_vars(tmp_path: Path) -> None:
    env = {
        "OPTIML_LLM_PROVIDER": "Anthropic",
        "OPTIML_LLM_MODEL": "claude-x",
        "OPTIML_LLM_BASE_URL": "https://proxy.example/anthropic",
        "OPTIML_LLM_API_KEY": "sk-env",
        "OPTIML_LLM_TEMPERATURE": "0",
        "OPTIML_LLM_MAX_TOKENS": "512",
        "OPTIML_LLM_CONCURRENCY": "16",
        "OPTIML_LLM_BUDGET_USD": "2.5",
        "OPTIML_LLM_MODE": "record",
        "OPTIML_LLM_CACHE": "false",
        "OPTIML_LLM_PRICE_IN_PER_MTOK": "3",
    }
    c = load_llm_config(write_toml(tmp_path, ""), env=env)
    assert (c.provider, c.model, c.api_key) == ("anthropic", "claude-x", "sk-env")
    assert c.base_url == env["OPTIML_LLM_BASE_URL"]
    assert (c.temperature, c.max_tokens, c.concurrency, c.budget_usd, c.mode) == (0.0, 512, 16, 2.5, "record")
    assert c.cache is False and c.price_in_per_mtok == 3.0 and c.is_configured


def test_budgets_deadlines_and_the_unpriced_override_from_the_environment(tmp_path: Path) -> None:
    env = {
        "OPTIML_LLM_BUDGET_CALLS": "40",
        "OPTIML_LLM_BUDGET_TOKENS": "200000",
        "OPTIML_LLM_ALLOW_UNPRICED": "yes",
        "OPTIML_LLM_DEADLINE_S": "30",
        "OPTIML_LLM_CONNECT_TIMEOUT_S": "2.5",
    }
    c = load_llm_config(write_toml(tmp_path, ""), env=env)
    assert (c.budget_calls, c.budget_tokens, c.allow_unpriced, c.deadline_s, c.connect_timeout_s) == (
        40, 200000, True, 30.0, 2.5,
    )  # fmt: skip
    assert load_llm_config(write_toml(tmp_path, ""), env={"OPTIML_LLM_BUDGET_CALLS": "none"}).budget_calls is None
    with pytest.raises(LLMConfigError, match="budget_calls must be >= 1"):
        load_llm_config(write_toml(tmp_path, ""), env={"OPTIML_LLM_BUDGET_CALLS": "0"})
    with pytest.raises(LLMConfigError, match="deadline_s must be > 0"):
        LLMConfig(deadline_s=0)


def test_api_key_resolution(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, '[llm]\nmodel = "m"\napi_key_env = "MY_KEY"\n')
    assert load_llm_config(toml, env={"OPENAI_API_KEY": "vendor"}).api_key == "vendor"
    assert load_llm_config(toml, env={"OPENAI_API_KEY": "vendor", "MY_KEY": "mine"}).api_key == "mine"
    env = {"OPENAI_API_KEY": "vendor", "MY_KEY": "mine", "OPTIML_LLM_API_KEY": "optiml"}
    assert load_llm_config(toml, env=env).api_key == "optiml"
    assert load_llm_config(toml, env=env, overrides={"api_key": "cli"}).api_key == "cli"


def test_vendor_key_only_goes_to_the_vendor(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
    assert load_llm_config(env=env, overrides={"model": "gpt"}).api_key == "sk-openai"
    assert load_llm_config(env=env, overrides={"model": "c", "provider": "anthropic"}).api_key == "sk-ant"
    elsewhere = load_llm_config(env=env, overrides={"model": "deepseek-chat", "base_url": "https://api.deepseek.com"})
    assert elsewhere.api_key is None and not elsewhere.is_configured


def test_local_servers_need_no_key() -> None:
    for url in ("http://localhost:8000/v1", "http://127.0.0.1:11434/v1", "http://[::1]:30000/v1"):
        assert LLMConfig(model="llama", base_url=url).is_configured, url
    assert not LLMConfig(model="llama", base_url="http://gpu-box:8000/v1").is_configured
    assert LLMConfig(model="m", mode="replay").is_configured  # replay never calls anyone


def test_not_configured_messages() -> None:
    with pytest.raises(LLMConfigError) as info:
        LLMConfig().require_configured()
    message = str(info.value)
    assert "OPTIML_LLM_MODEL" in message and "optiml.toml" in message and "\n" not in message
    with pytest.raises(LLMConfigError, match=r"No API key for openai model 'gpt-x'.*OPTIML_LLM_API_KEY"):
        LLMConfig(model="gpt-x").require_configured()
    assert issubclass(LLMConfigError, LLMError)


def test_repr_hides_key() -> None:
    config = LLMConfig(model="m", api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(config) and "api_key='***'" in repr(config)
    assert "sk-very-secret" not in str(config)


@pytest.mark.parametrize(
    ("text", "env", "overrides", "match"),
    [
        ("", {"OPTIML_LLM_TEMPERATURE": "warm"}, {}, "environment: LLM setting temperature must be a number"),
        ("", {"OPTIML_LLM_MAX_TOKENS": "1.5"}, {}, "max_tokens must be an integer"),
        ("", {"OPTIML_LLM_PROVIDER": "gemini"}, {}, "provider must be one of openai, anthropic"),
        ("", {"OPTIML_LLM_MODE": "fake"}, {}, "mode must be one of live, record, replay"),
        ("[llm]\ncolour = 1\n", {}, {}, "Unknown LLM setting 'colour'"),
        ("", {}, {"concurrency": 0}, "concurrency must be >= 1"),
        ("[llm\n", {}, {}, "cannot read"),
        ("llm = 3\n", {}, {}, r"\[llm\] must be a table"),
    ],
)
def test_bad_settings(tmp_path: Path, text: str, env: dict[str, str], overrides: dict[str, object], match: str) -> None:
    toml = write_toml(tmp_path, text)
    with pytest.raises(LLMConfigError, match=match):
        load_llm_config(toml, env=env, overrides=overrides)


def test_missing_explicit_toml_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LLMConfigError, match="does not exist"):
        load_llm_config(tmp_path / "nope.toml", env={})


def test_default_toml_is_read_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_toml(tmp_path, '[llm]\nmodel = "cwd-model"\n')
    monkeypatch.chdir(tmp_path)
    assert load_llm_config(env={}).model == "cwd-model"
