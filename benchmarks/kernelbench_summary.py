"""KernelBench levels from the bench's partial runs: per level, the latest row of every problem run, and the
suite metrics over them (verified count, KernelBench's own check, geomeans and fast_p on the user's clock).

    python benchmarks/kernelbench_summary.py benchmarks/results/kernelbench/level*.json \
        --out benchmarks/results/kernelbench/summary.json

A problem run in several parts counts once, by its latest run (a re-run after a fix replaces the row it fixed).
Reads the committed ``bench.json`` copies only; no GPU.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from result_file import head_commit, write_result

from optiml.bench.metrics import BenchRow, suite_metrics

LEVEL = re.compile(r"level(\d)")
#: The figures each level's line prints, in order.
SHOWN = ("tasks", "verified", "kernelbench_passed", "geomean_vs_eager", "geomean_vs_eager_tf32", "geomean_vs_compile")


def level_of(row: BenchRow, source: Path) -> str:
    """The row's KernelBench level: from the problem file's folder, else the result file's name."""
    found = LEVEL.search(Path(row.file).parent.name) or LEVEL.search(source.name)
    return f"level{found.group(1)}" if found else "unknown"


def latest_rows(sources: list[Path]) -> dict[str, dict[str, tuple[BenchRow, str]]]:
    """level -> task -> (its latest row, the file it came from); run ids start with the run's UTC time."""
    levels: dict[str, dict[str, tuple[BenchRow, str]]] = {}
    for source in sources:
        document = json.loads(source.read_text(encoding="utf-8"))
        for data in document.get("rows", []):
            row = BenchRow.from_dict(data)
            level = levels.setdefault(level_of(row, source), {})
            kept = level.get(row.task)
            if kept is None or (row.run_id or "") >= (kept[0].run_id or ""):
                level[row.task] = (row, source.name)
    return levels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="bench.json copies (benchmarks/results/kernelbench/)")
    parser.add_argument("--out", type=Path, default=Path("kernelbench_summary.json"))
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    summary: dict[str, Any] = {}
    for level, tasks in sorted(latest_rows(args.results).items()):
        rows = [row for row, _ in tasks.values()]
        metrics = suite_metrics(rows)
        summary[level] = {
            "metrics": metrics,
            "devices": sorted({row.device for row in rows if row.device}),
            "sources": {task: source for task, (_, source) in sorted(tasks.items())},
        }
        shown = ", ".join(
            f"{key} {metrics[key]:.3f}" if isinstance(metrics[key], float) else f"{key} {metrics[key]}"
            for key in SHOWN
            if key in metrics
        )
        print(f"{level}: {shown}; not verified: {', '.join(metrics['not_verified']) or 'none'}")
    write_result(args.out, "kernelbench_summary", head_commit(args.commit), gpu=False, levels=summary)


if __name__ == "__main__":
    main()
