"""``optiml report``: the HTML report of a stored run or of a bench result."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from optiml.cli.app import DEFAULT_STORE, StoreOpt, app, check_output, console, reports_errors, write_output
from optiml.cli.preflight import require_store_file
from optiml.cli.views.waiting import waiting
from optiml.errors import StoreError


@app.command("report")
@reports_errors
def report_cmd(
    target: Annotated[
        str,
        typer.Argument(
            metavar="RUN|BENCH", help="Run id (see `optiml runs`), or an `optiml bench` folder or its bench.json."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="HTML file to write (default: RUN.html, or bench.html in the bench folder)."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Write one self-contained HTML report (opens from disk, no network): a run's task, search tree,
    best path with diffs, gains and profiler evidence, roofline and curves, failures, LLM calls and
    cost; or a bench's suite table and fast_p curves."""
    if out is not None:
        check_output(out)
    path = Path(target)
    bench = path.is_dir() or path.suffix == ".json"
    if not bench:  # before the report's imports (torch among them): a store that is not there
        require_store_file(store)
        if not store.exists():
            raise StoreError(f"{store}: no run store yet (run `optiml optimize` first, or pass --store)")
    with waiting(console, "loading the report's parts (PyTorch among them)"):
        from optiml.report import bench_file, load_bench_report, load_run_report, render_bench_html, render_run_html

    if bench:
        source = bench_file(path)
        html_path = check_output(out or source.parent / "bench.html")
        html = render_bench_html(load_bench_report(source))
    else:
        with console.status(f"reading run {target} from {store}"):
            report = load_run_report(store, target)
            html_path = check_output(out or Path(f"{report.run.id}.html"))
            html = render_run_html(report)
    write_output(html_path, html)
    console.print(f"report written to [bold]{html_path}[/bold] ({len(html) / 1e6:.1f} MB, self-contained)")
