"""[generate] settings, the thought registry and the offline message."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.errors import ConfigError
from optiml.generate import GenerationConfig, GenerationError, load_generation_config, require_llm
from optiml.generate.thoughts import BUILTIN_THOUGHTS, DEFAULT_TEMPLATE, load_thought_file
from optiml.llm import LLMConfig


def test_defaults_run_the_four_builtin_thoughts() -> None:
    config = GenerationConfig()
    assert [t.name for t in config.selected_thoughts()] == [
        "direct",
        "memory_first",
        "parallel_first",
        "fusion_first",
    ]
    assert len(BUILTIN_THOUGHTS) == 4 and all(t.template == DEFAULT_TEMPLATE for t in BUILTIN_THOUGHTS)


def test_toml_table_thought_files_and_inline_thoughts(tmp_path: Path) -> None:
    (tmp_path / "mine.j2").write_text("{{ thought.strategy }} for {{ task.name }}")
    (tmp_path / "more.toml").write_text(
        '[[thought]]\nname = "tensor_cores"\nstrategy = "Use WMMA."\ntemplate = "mine.j2"\n'
        '[[thought]]\nname = "direct"\nstrategy = "My own   direct\\nstrategy."\n'
    )
    toml = tmp_path / "optiml.toml"
    toml.write_text(
        "[generate]\n"
        'thoughts = ["direct", "tensor_cores", "split_k"]\n'
        'thought_files = ["more.toml"]\n'
        "max_repairs = 1\n"
        "aggregate = false\n"
        "[[generate.thought]]\n"
        'name = "split_k"\n'
        'strategy = "Split the reduction across blocks."\n'
    )
    config = load_generation_config(toml)
    thoughts = config.selected_thoughts()
    assert [t.name for t in thoughts] == ["direct", "tensor_cores", "split_k"]
    assert thoughts[0].strategy == "My own direct strategy."  # a file may replace a built-in
    assert thoughts[1].template == str((tmp_path / "mine.j2").resolve())
    assert config.max_repairs == 1 and config.aggregate is False

    overridden = load_generation_config(toml, {"thoughts": "split_k, direct", "max_repairs": None})
    assert [t.name for t in overridden.selected_thoughts()] == ["split_k", "direct"]
    assert overridden.max_repairs == 1  # None overrides are ignored


def test_without_a_thought_list_extra_thoughts_join_the_builtins(tmp_path: Path) -> None:
    toml = tmp_path / "optiml.toml"
    toml.write_text('[[generate.thought]]\nname = "split_k"\nstrategy = "Split it."\n')
    names = [t.name for t in load_generation_config(toml).selected_thoughts()]
    assert names == ["direct", "memory_first", "parallel_first", "fusion_first", "split_k"]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('thoughts = ["nope"]', r"unknown thought\(s\) \['nope'\]; known: direct, fusion_first"),
        ("max_repairs = -1", "max_repairs must be >= 0"),
        ('max_repairs = "2"', "max_repairs must be an integer"),
        ('aggregate = "yes"', "aggregate must be true or false"),
        ("colour = 1", r"unknown \[generate\] setting\(s\) \['colour'\]"),
        ("thoughts = []", "needs at least one thought"),
        ('thought_files = ["missing.toml"]', "missing.toml: no such thought file"),
        ('[[generate.thought]]\nname = "Bad Name"\nstrategy = "x"', "must be lower-case"),
        ('[[generate.thought]]\nname = "aggregate"\nstrategy = "x"', "reserved"),
        ('[[generate.thought]]\nname = "x"', "needs a non-empty `strategy`"),
        ('[[generate.thought]]\nname = "x"\nstrategy = "y"\ntemplate = "gone.j2"', "gone.j2 does not exist"),
    ],
)
def test_bad_settings_are_one_line_errors(tmp_path: Path, table: str, message: str) -> None:
    toml = tmp_path / "optiml.toml"
    toml.write_text("[generate]\n" + table + "\n" if not table.startswith("[[") else table + "\n")
    with pytest.raises(ConfigError, match=message) as caught:
        load_generation_config(toml)
    assert "\n" not in str(caught.value)


def test_a_thought_file_without_thoughts(tmp_path: Path) -> None:
    file = tmp_path / "t.toml"
    file.write_text("name = 'x'\n")
    with pytest.raises(ConfigError, match=r"expected one or more \[\[thought\]\] tables"):
        load_thought_file(file)


def test_no_toml_file_means_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_generation_config() == GenerationConfig()
    with pytest.raises(ConfigError, match="does not exist"):
        load_generation_config(tmp_path / "other.toml")


def test_offline_generation_says_how_to_configure_an_llm_and_names_init_kernel() -> None:
    with pytest.raises(GenerationError) as caught:
        require_llm(LLMConfig())
    text = str(caught.value)
    assert text.startswith("generation needs an LLM. No LLM model configured: set OPTIML_LLM_MODEL")
    assert "optiml init-kernel TASK" in text and "\n" not in text
    with pytest.raises(GenerationError, match="No API key for openai model 'gpt-x'"):
        require_llm(LLMConfig(model="gpt-x"))
    require_llm(LLMConfig(model="local", base_url="http://127.0.0.1:8000/v1"))  # keyless local server
