"""The written pages, read as HTML: self-contained, complete, and showing stored text as text."""

from __future__ import annotations

import json
from pathlib import Path

from page_checks import scan
from report_helpers import HOSTILE, manual_run

from optiml.bench.metrics import BenchRow
from optiml.bench.runner import BenchConfig, write_state
from optiml.report import load_bench_report, load_run_report, render_bench_html, render_run_html


def test_a_run_page_is_self_contained_and_shows_every_part(stored_run: tuple[Path, str]) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id)
    html = render_run_html(report)
    page = scan(html)
    assert page.references == []  # no script, style, image or link to fetch: it opens from disk offline
    assert page.scripts.count("application/json") == 1 and "Plotly.newPlot" in html
    assert {f"node-{n.number}" for n in report.nodes} <= page.ids
    assert {"summary", "task", "path", "charts", "tree", "failures", "llm"} <= page.ids
    text = " ".join(page.text)
    assert run_id in text and "get_init_inputs" in text and "scale a vector by two" in text
    for node in report.path[1:]:
        assert node.edit is not None and node.edit.rationale in text
    assert "cudaErrorIllegalAddress" in text and "gpt-test" in text and "$0.0125" in text
    assert "uncoalesced global stores" in text  # profiler evidence on the path
    charts = json.loads(html.split('id="optiml-charts">')[1].split("</script>")[0])
    assert [c["id"] for c in charts] == ["chart-roofline", "chart-best-so-far", "chart-eval-time"]


def test_stored_text_is_escaped_everywhere(tmp_path: Path) -> None:
    store_path, run_id = manual_run(tmp_path)
    html = render_run_html(load_run_report(store_path, run_id))
    assert HOSTILE not in html and "window.owned = 1</script>" not in html
    page = scan(html)
    assert page.references == []  # the hostile <img src=https://…> is text, not an element
    assert any(HOSTILE in chunk for chunk in page.text)  # shown, verbatim, as text
    assert "Not re-timed" in " ".join(page.text)


def test_a_bench_page_has_the_suite_table_and_fast_p(tmp_path: Path) -> None:
    rows = [
        BenchRow("softmax", "softmax.py", "verified", best_ms=0.5, baselines_ms={"eager": 1.0, "compile": 0.6},
                 floor_ms=0.25, evaluations=30, run_id="r1"),
        BenchRow("layernorm", "layernorm.py", "verified", best_ms=1.0, baselines_ms={"eager": 1.2, "compile": 1.5},
                 evaluations=30, run_id="r2"),
        BenchRow("conv", "conv.py", "no kernel", reason="no template for aten.convolution"),
    ]  # fmt: skip
    write_state(tmp_path, rows, BenchConfig(), {"started": "2026-12-01 10:00"})
    bench = load_bench_report(tmp_path)
    assert bench.baselines == ("eager", "compile") and bench.metrics["verified"] == 2
    html = render_bench_html(bench)
    page = scan(html)
    assert page.references == []
    text = " ".join(page.text)
    for expected in ("softmax", "layernorm", "no template for aten.convolution", "2.00×", "67%", "r1"):
        assert expected in text, expected
    charts = json.loads(html.split('id="optiml-charts">')[1].split("</script>")[0])
    assert [c["id"] for c in charts] == ["chart-fast-p", "chart-speedups"]
    eager = charts[0]["data"][0]
    assert eager["name"] == "vs PyTorch eager" and eager["y"][0] == 2 / 3
