"""One self-contained HTML file per report: Jinja2 templates, with the style, the script and the
Plotly bundle inlined, so the page opens from disk with no network."""

from __future__ import annotations

import functools
import math
import time
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup
from plotly.offline import get_plotlyjs
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name

from optiml import __version__
from optiml.report.bench_data import BenchReport
from optiml.report.charts import Chart, bench_charts, charts_json, run_charts
from optiml.report.run_data import RunReport, reference_name
from optiml.values import Speedup, TimingStats

_TEMPLATES = resources.files("optiml.report") / "templates"
_HIGHLIGHT_CLASS = "hl"


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("optiml.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        ms=_ms,
        timing=_timing,
        speedup=_speedup,
        pct=_pct,
        usd=_usd,
        num=_num,
        duration=_duration,
        when=_when,
        code=_code,
        reference=reference_name,
    )
    return env


def render_run_html(report: RunReport) -> str:
    return _page("run.html.j2", run_charts(report), report=report)


def render_bench_html(bench: BenchReport) -> str:
    return _page("bench.html.j2", bench_charts(bench), bench=bench)


def _page(template: str, charts: list[Chart], **context: Any) -> str:
    page = _environment().get_template(template)
    return page.render(
        charts=charts,
        charts_json=charts_json(charts),
        style=(_TEMPLATES / "report.css").read_text(encoding="utf-8")
        + HtmlFormatter(style="default").get_style_defs(f".{_HIGHLIGHT_CLASS}"),
        script=(_TEMPLATES / "report.js").read_text(encoding="utf-8"),
        plotly_js=get_plotlyjs() if charts else "",
        version=__version__,
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        **context,
    )


# -- filters ----------------------------------------------------------------------------------
def _ms(value: float | None) -> str:
    return f"{value:.4f} ms" if value is not None else "–"


def _timing(stats: TimingStats | None) -> str:
    if stats is None:
        return "–"
    return f"{stats.median_ms:.4f} ms ± {stats.spread_ms:.4f} (n={stats.trials})"


def _speedup(value: Speedup | None) -> str:
    if value is None:
        return "–"
    return f"{value.value:.2f}× [{value.low:.2f}–{value.high:.2f}]"


def _pct(value: float | None) -> str:
    return f"{value:.0%}" if value is not None and math.isfinite(value) else "–"


def _usd(value: float) -> str:
    return f"${value:.4f}" if value else "$0"


def _num(value: float | None, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if value is not None else "–"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _code(source: str, language: str) -> Any:
    """Source highlighted by Pygments (its output escapes the text), marked safe for the page."""
    formatter = HtmlFormatter(cssclass=_HIGHLIGHT_CLASS)
    return Markup(highlight(source, get_lexer_by_name(language), formatter))
