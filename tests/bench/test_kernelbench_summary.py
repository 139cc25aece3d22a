"""benchmarks/kernelbench_summary.py: a problem run in several parts counts once, by its latest run, per level."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import benchmark_module, run_benchmark_script


def _row(task: str, level: int, run_id: str, status: str) -> dict:
    row = {"task": task, "file": f"/kb/level{level}/{task}.py", "status": status, "run_id": run_id}
    if status == "verified":
        row.update(best_ms=1.0, baselines_ms={"eager": 2.0})
    return row


def _part(folder: Path, name: str, rows: list[dict]) -> Path:
    path = folder / name
    path.write_text(json.dumps({"config": {}, "rows": rows}), encoding="utf-8")
    return path


def test_a_re_run_replaces_the_row_it_fixed_and_levels_stay_apart(tmp_path: Path) -> None:
    first = _part(
        tmp_path,
        "level3_part1.json",
        [
            _row("31_VisionAttention", 3, "20261207-041500-aa", "failed"),
            _row("2_ShallowWideMLP", 3, "20261207-041600-bb", "verified"),
        ],
    )
    second = _part(tmp_path, "level3_part2.json", [_row("31_VisionAttention", 3, "20261207-061600-cc", "verified")])
    level1 = _part(tmp_path, "level1_part1.json", [_row("19_ReLU", 1, "20261206-101500-dd", "no kernel")])
    levels = benchmark_module("kernelbench_summary").latest_rows([second, first, level1])
    assert sorted(levels) == ["level1", "level3"]
    kept, source = levels["level3"]["31_VisionAttention"]
    assert kept.status == "verified" and source == "level3_part2.json"  # the later run, whatever the file order
    assert len(levels["level3"]) == 2 and levels["level1"]["19_ReLU"][0].status == "no kernel"


def test_the_script_prints_each_level_and_writes_its_metrics(tmp_path: Path) -> None:
    part = _part(
        tmp_path,
        "level3_part1.json",
        [_row("1_MLP", 3, "20261207-041500-aa", "verified"), _row("48_Mamba2", 3, "20261207-041600-bb", "no kernel")],
    )
    out = tmp_path / "summary.json"
    run = run_benchmark_script("kernelbench_summary", str(part), "--out", str(out), "--commit", "abc1234")
    assert run.returncode == 0, run.stderr
    assert "level3: tasks 2, verified 1" in run.stdout and "not verified: 48_Mamba2" in run.stdout
    metrics = json.loads(out.read_text())["levels"]["level3"]["metrics"]
    assert metrics["verified"] == 1 and metrics["geomean_vs_eager"] == 2.0
