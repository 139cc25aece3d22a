"""optiml.bench.suite: a list file that is not text, and a suite path that does not exist, are one line; a list
file's paths are read from its folder, else from the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.bench import discover_suite
from optiml.cli import app
from optiml.errors import OptimlError


def test_a_binary_list_file_is_one_clear_line(tmp_path: Path) -> None:
    listing = tmp_path / "suite.bin"
    listing.write_bytes(b"\x7fELF\x02\x01\x01\x00\xe1\xff")
    with pytest.raises(OptimlError, match=r"suite.bin: not a list of task files \(not UTF-8 text, byte 8\)"):
        discover_suite(str(listing))
    result = CliRunner().invoke(app, ["bench", str(listing), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert next(line for line in result.output.splitlines() if line.strip()).startswith("error: ")
    assert not (tmp_path / "out").exists()


def test_a_missing_suite_says_so(tmp_path: Path) -> None:
    with pytest.raises(OptimlError, match="nope: no task files: no such folder or file"):
        discover_suite(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(OptimlError, match=r"empty: no task files \(give"):  # it exists: just no tasks in it
        discover_suite(str(tmp_path / "empty"))
    with pytest.raises(OptimlError, match=r"\*.py: no task files \(give"):  # a glob that matched nothing
        discover_suite(str(tmp_path / "empty" / "*.py"))


def test_a_list_file_s_paths_are_read_from_its_folder_then_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lists").mkdir()
    (tmp_path / "tasks").mkdir()
    for name in ("a", "b"):
        (tmp_path / "tasks" / f"{name}.py").write_text("# a task\n")
    (tmp_path / "lists" / "b.py").write_text("# beside the list: wins over the working directory's\n")
    listing = tmp_path / "lists" / "suite.txt"
    listing.write_text("tasks/a.py  # from where the user stands\nb.py\n")
    monkeypatch.chdir(tmp_path)
    assert discover_suite(str(listing)) == [tmp_path / "tasks" / "a.py", tmp_path / "lists" / "b.py"]
    listing.write_text("tasks/missing.py\n")
    with pytest.raises(OptimlError, match=r"suite.txt:1: no such task file tasks/missing.py \(looked in .*lists and "):
        discover_suite(str(listing))
