"""The pages in a real headless Chromium (Debian's `chromium`, driven by Playwright): they load from
disk with no console error and no network request, the tree expands, the diffs show, the charts draw.
Skipped where Chromium or Playwright is missing. Screenshots are saved in the test's tmp folder."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from report_helpers import HOSTILE, manual_run

from optiml.bench.metrics import BenchRow
from optiml.bench.runner import BenchConfig, write_state
from optiml.report import load_bench_report, load_run_report, render_bench_html, render_run_html

sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

#: Chromium as this machine runs it: no sandbox (root), no GPU, no background traffic to the network.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Watched:
    page: Any
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh profile per test
            executable_path=CHROMIUM,
            headless=True,
            args=ARGS,
            viewport={"width": 1300, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


def open_page(browser: Any, path: Path) -> Watched:
    page = browser.new_page()
    watched = Watched(page)
    page.on("console", lambda m: watched.errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: watched.errors.append(f"page error: {e}"))
    page.on(
        "request",
        lambda r: None if r.url.startswith(("file:", "data:", "blob:", "about:")) else watched.requests.append(r.url),
    )
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return watched


def test_the_run_page_loads_expands_and_shows_diffs(browser: Any, stored_run: tuple[Path, str], tmp_path: Path) -> None:
    store_path, run_id = stored_run
    report = load_run_report(store_path, run_id)
    path = tmp_path / "run.html"
    path.write_text(render_run_html(report), encoding="utf-8")
    watched = open_page(browser, path)
    page = watched.page
    page.wait_for_selector("#chart-best-so-far .main-svg")  # Plotly drew from the inlined bundle
    assert page.locator("#chart-eval-time .main-svg").count() >= 1

    off_path = next(n for n in report.nodes if not n.on_path and n.diff is not None)
    body = page.locator(f"#node-{off_path.number} > .node-body")
    assert not body.is_visible()
    page.click(f"#node-{off_path.number} > summary")
    assert body.is_visible()
    assert page.locator(f"#node-{off_path.number} .node-diff .diff").first.is_visible()
    assert off_path.edit is not None and off_path.edit.rationale in body.inner_text()

    first_step = page.locator("#step-1 .step-diff .diff")
    first_step.scroll_into_view_if_needed()
    assert first_step.is_visible() and first_step.locator(".add").count() >= 1
    page.screenshot(path=str(tmp_path / "run-step.png"))

    page.click("button[data-tree-action=path]")  # best path only: the other nodes hide
    assert not page.locator(f"#node-{off_path.number}").is_visible()
    assert page.locator(f"#node-{report.best.number} > summary").is_visible()
    page.click("button[data-tree-action=path]")

    failed = next(n for n in report.nodes if not n.result.ok)
    page.click(f'#failures a[href="#node-{failed.number}"]')  # a failure's link opens its node
    assert page.locator(f"#node-{failed.number} > .node-body").is_visible()
    page.locator("#tree").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "run-tree.png"))
    page.screenshot(path=str(tmp_path / "run-full.png"), full_page=True)

    assert watched.errors == [] and watched.requests == []
    for name in ("run-step.png", "run-tree.png", "run-full.png"):
        shot = (tmp_path / name).read_bytes()
        assert shot.startswith(b"\x89PNG") and len(shot) > 10_000


def test_the_bench_page_draws_fast_p(browser: Any, tmp_path: Path) -> None:
    rows = [
        BenchRow("softmax", "softmax.py", "verified", best_ms=0.5, baselines_ms={"eager": 1.0, "compile": 0.6}),
        BenchRow("relu", "relu.py", "verified", best_ms=0.9, baselines_ms={"eager": 1.0, "compile": 1.1}),
        BenchRow("conv", "conv.py", "failed", reason="out of memory"),
    ]
    write_state(tmp_path, rows, BenchConfig(), {"started": "now"})
    path = tmp_path / "bench.html"
    path.write_text(render_bench_html(load_bench_report(tmp_path)), encoding="utf-8")
    watched = open_page(browser, path)
    watched.page.wait_for_selector("#chart-fast-p .main-svg")
    assert watched.page.locator("#chart-fast-p .scatterlayer .trace").count() == 2  # eager, torch.compile
    assert "out of memory" in watched.page.locator("#suite").inner_text()
    watched.page.screenshot(path=str(tmp_path / "bench.png"), full_page=True)
    assert watched.errors == [] and watched.requests == []
    assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")


def test_hostile_stored_text_runs_no_script(browser: Any, tmp_path: Path) -> None:
    store_path, run_id = manual_run(tmp_path)
    path = tmp_path / "manual.html"
    path.write_text(render_run_html(load_run_report(store_path, run_id)), encoding="utf-8")
    watched = open_page(browser, path)
    assert watched.page.evaluate("window.owned === undefined")  # the edit's </script><script> stayed text
    assert HOSTILE in watched.page.locator("#failures").inner_text()
    assert watched.errors == [] and watched.requests == []  # its <img src=https://…> was never fetched
