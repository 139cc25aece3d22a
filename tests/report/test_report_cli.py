"""`optiml report`, invoked in-process: a run's page, a bench's page, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.bench.metrics import BenchRow
from optiml.bench.runner import BenchConfig, write_state
from optiml.cli import app

runner = CliRunner()


def test_report_writes_a_run_page(stored_run: tuple[Path, str], tmp_path: Path) -> None:
    store_path, run_id = stored_run
    out = tmp_path / "run.html"
    result = runner.invoke(app, ["report", run_id[:15], "--store", str(store_path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "report written to" in result.output and "self-contained" in result.output
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>") and run_id in out.read_text(encoding="utf-8")


def test_the_default_name_is_the_whole_run_id(
    stored_run: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_path, run_id = stored_run
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["report", run_id[:15], "--store", str(store_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / f"{run_id}.html").is_file()


def test_report_writes_a_bench_page_beside_its_bench_json(tmp_path: Path) -> None:
    rows = [BenchRow("silu", "silu.py", "verified", best_ms=0.5, baselines_ms={"eager": 1.0}, run_id="r1")]
    write_state(tmp_path, rows, BenchConfig(), {"started": "now"})
    for target in (tmp_path, tmp_path / "bench.json"):
        result = runner.invoke(app, ["report", str(target)])
        assert result.exit_code == 0, result.output
        assert "silu" in (tmp_path / "bench.html").read_text(encoding="utf-8")


def test_bad_targets_are_one_line_errors(stored_run: tuple[Path, str], tmp_path: Path) -> None:
    store_path, run_id = stored_run
    cases = [
        (["report", "nope", "--store", str(store_path)], "no run 'nope'"),
        (["report", run_id, "--store", str(tmp_path / "none.db")], "no run store yet"),
        (["report", str(tmp_path)], "no bench.json there"),
        (["report", run_id, "--store", str(store_path), "-o", str(tmp_path / "missing" / "r.html")], "does not exist"),
    ]
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "bench.json").write_text("{not json")
    cases.append((["report", str(tmp_path / "broken")], "not an `optiml bench` result"))
    for argv, message in cases:
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, (argv, result.output)
        assert message in result.output and "Traceback" not in result.output
