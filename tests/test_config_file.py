"""optiml.config_file: an optiml.toml that is not UTF-8 is one line, not a UnicodeDecodeError traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.cli import app
from optiml.config_file import read_toml_section
from optiml.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "optiml.toml"
    path.write_bytes(b'[llm]\nmodel = "caf\xe9"\n')  # Latin-1, as an editor might save it
    with pytest.raises(ConfigError, match=r"optiml.toml: not UTF-8 text \(byte 18\); save it as UTF-8"):
        read_toml_section(path, "llm", required=False, error=ConfigError)


def test_the_cli_reports_it_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "optiml.toml").write_bytes(b"\xff\xfe[llm]\n")
    args = ["propose", str(ROOT / "tasks" / "silu.py"), str(ROOT / "tasks" / "silu.naive.cu"), "--proposer", "llm"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot read optiml.toml: not UTF-8 text"), result.output
