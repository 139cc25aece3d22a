"""The report's figures, built with Plotly and handed to the page as JSON specs.

Each function returns a :class:`Chart` (or None when the data for it is missing); the page draws
them with the Plotly bundle it inlines (:mod:`optiml.report.html`), so a report needs no network.
Labels that come from proposers or LLMs are HTML-escaped before Plotly sees them (Plotly reads a
subset of HTML in text).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from optiml.report.bench_data import BenchReport, fast_p_curve
from optiml.report.roofline import RooflineView
from optiml.report.run_data import NodeView, RunReport, reference_name

TEMPLATE = "plotly_white"
COLORS = {
    "root": "#636efa",
    "best": "#00a86b",
    "PyTorch eager": "#ef553b",
    "torch.compile": "#ab63fa",
}
OTHER_COLORS = ("#ffa15a", "#19d3f3", "#ff6692", "#b6e880")
PHASE_COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692")


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    caption: str
    figure: go.Figure

    def spec(self) -> dict[str, Any]:
        """``{"id", "data", "layout"}`` as plain JSON values."""
        data = json.loads(pio.to_json(self.figure, validate=False))
        return {"id": self.id, "data": data.get("data", []), "layout": data.get("layout", {})}


def charts_json(charts: list[Chart]) -> str:
    """The specs as JSON that is safe inside a ``<script>`` element (no ``<``, ``>`` or ``&``)."""
    text = json.dumps([c.spec() for c in charts], separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _layout(fig: go.Figure, **extra: Any) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE,
        margin={"l": 60, "r": 20, "t": 10, "b": 50},
        height=380,
        legend={"orientation": "h", "y": -0.2},
        **extra,
    )
    return fig


def _color(label: str, index: int) -> str:
    return COLORS.get(label, OTHER_COLORS[index % len(OTHER_COLORS)])


def _node_label(node: NodeView) -> str:
    text = "root" if node.edit is None else node.edit.summary(80)
    return html.escape(f"#{node.number} {text}")


# -- run --------------------------------------------------------------------------------------
def best_so_far_chart(report: RunReport) -> Chart | None:
    """Every verified evaluation's search-time, the best so far as a step line, and the baselines."""
    verified = [n for n in report.nodes if n.timing is not None and n.result.ok]
    if not verified:
        return None
    best: list[float] = []
    for node in verified:
        assert node.timing is not None
        best.append(min([node.timing.median_ms, *best[-1:]]))
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[n.number for n in verified],
            y=[n.timing.median_ms for n in verified if n.timing is not None],
            error_y={"type": "data", "array": [n.timing.spread_ms for n in verified if n.timing is not None]},
            mode="markers",
            name="verified candidate",
            marker={"color": "#9aa5b1", "size": 7},
            text=[_node_label(n) for n in verified],
            hovertemplate="%{text}<br>%{y:.4f} ms<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[n.number for n in verified] + [report.nodes[-1].number],
            y=[*best, best[-1]],
            mode="lines",
            line={"shape": "hv", "color": COLORS["best"], "width": 3},
            name="best so far",
            hovertemplate="after evaluation %{x}: %{y:.4f} ms<extra></extra>",
        )
    )
    for index, (mode, timing) in enumerate(sorted(report.references.items())):
        name = reference_name(mode)
        fig.add_hline(
            y=timing.median_ms,
            line={"dash": "dash", "color": _color(name, index)},
            annotation_text=f"{name} {timing.median_ms:.4f} ms",
            annotation_position="top right",
        )
    _layout(fig, xaxis_title="evaluation", yaxis_title="time (ms, search-time median ± spread)")
    return Chart(
        "chart-best-so-far",
        "Best time so far",
        "Each verified candidate's search-time median (bars: ± half the inter-quartile range), the best so far,"
        " and the PyTorch baselines timed with the root.",
        fig,
    )


def evaluation_time_chart(report: RunReport) -> Chart | None:
    """Seconds each evaluation took, stacked by phase; None when no evaluation recorded its phases."""
    phases: list[str] = []
    for node in report.nodes:
        phases += [p for p in node.result.phase_seconds if p not in phases]
    if not phases:
        return None
    fig = go.Figure()
    numbers = [n.number for n in report.nodes]
    statuses = [html.escape(f"{_node_label(n)} · {n.status}") for n in report.nodes]
    for index, phase in enumerate(phases):
        fig.add_trace(
            go.Bar(
                x=numbers,
                y=[n.result.phase_seconds.get(phase, 0.0) for n in report.nodes],
                name=phase,
                marker={"color": PHASE_COLORS[index % len(PHASE_COLORS)]},
                text=statuses,
                hovertemplate=f"{html.escape(phase)} %{{y:.2f}} s<br>%{{text}}<extra></extra>",
                textposition="none",
            )
        )
    _layout(fig, barmode="stack", xaxis_title="evaluation", yaxis_title="seconds")
    return Chart(
        "chart-eval-time",
        "Time per evaluation",
        "The seconds each evaluation spent, by phase, as its worker measured them (evaluations in flight"
        " together overlap in wall time).",
        fig,
    )


def roofline_chart(view: RooflineView | None) -> Chart | None:
    """The task's roofline with each kernel at its attained rate; the bandwidth view without flops."""
    if view is None or not view.points:
        return None
    roof = view.roofline
    caption = f"Peaks: {roof.peaks.gpu}, {roof.peaks.source}; dtype {roof.dtype}."
    intensity, ridge = roof.intensity, roof.ridge
    if intensity is None or ridge is None or not roof.compute_peak:
        return _bandwidth_chart(view, caption)
    low, high = min(intensity, ridge) / 20, max(intensity, ridge) * 20
    bandwidth, peak = roof.peaks.dram_bandwidth, roof.compute_peak
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[low, ridge, high],
            y=[bandwidth * low, peak, peak],
            mode="lines",
            name="roof",
            line={"color": "#444", "width": 2},
            hovertemplate="%{x:.3g} flop/B: %{y:.3s}flop/s<extra>roof</extra>",
        )
    )
    for index, point in enumerate(view.points):
        attained = view.attained_flops(point)
        fraction = view.fraction(point)
        share = f", {fraction:.0%} of the roof" if fraction is not None else ""
        fig.add_trace(
            go.Scatter(
                x=[intensity],
                y=[attained],
                mode="markers",
                name=html.escape(point.label),
                marker={"size": 13, "color": _color(point.label, index), "line": {"width": 1, "color": "#fff"}},
                hovertemplate=f"{html.escape(point.label)}: {point.time_ms:.4f} ms, %{{y:.3s}}flop/s{share}"
                "<extra></extra>",
            )
        )
    _layout(
        fig,
        xaxis={"type": "log", "title": "arithmetic intensity (flop / byte of least traffic)"},
        yaxis={"type": "log", "title": "attained flop/s", "exponentformat": "SI"},
    )
    return Chart(
        "chart-roofline",
        "Roofline",
        f"Intensity {intensity:.3g} flop/B (ridge {ridge:.3g}): a {roof.regime}-bound task. " + caption,
        fig,
    )


def _bandwidth_chart(view: RooflineView, caption: str) -> Chart:
    labels = [html.escape(p.label) for p in view.points]
    rates = [view.bandwidth(p) or 0.0 for p in view.points]
    fig = go.Figure(
        go.Bar(
            x=rates,
            y=labels,
            orientation="h",
            marker={"color": [_color(p.label, i) for i, p in enumerate(view.points)]},
            text=[f"{p.time_ms:.4f} ms" for p in view.points],
            hovertemplate="%{y}: %{x:.3s}B/s (%{text})<extra></extra>",
        )
    )
    fig.add_vline(
        x=view.peaks.dram_bandwidth,
        line={"dash": "dash", "color": "#444"},
        annotation_text="DRAM peak",
        annotation_position="top",
    )
    _layout(fig, xaxis={"title": "effective bandwidth (least bytes / time)", "exponentformat": "SI"}, height=300)
    return Chart(
        "chart-roofline",
        "Roofline (bandwidth side)",
        "The task states no flops (OPTIML['flops']), so only the memory roof applies: each kernel's least"
        " traffic over its time, against the DRAM peak. " + caption,
        fig,
    )


def run_charts(report: RunReport) -> list[Chart]:
    found = [roofline_chart(report.roofline), best_so_far_chart(report), evaluation_time_chart(report)]
    return [c for c in found if c is not None]


# -- bench ------------------------------------------------------------------------------------
def fast_p_chart(bench: BenchReport) -> Chart | None:
    """fast_p as a function of p, one step line per baseline."""
    fig = go.Figure()
    for index, baseline in enumerate(bench.baselines):
        curve = fast_p_curve(bench.rows, baseline)
        name = reference_name(baseline)
        high = max(p for p, _ in curve) * 1.15
        fig.add_trace(
            go.Scatter(
                x=[p for p, _ in curve] + [high],
                y=[share for _, share in curve] + [0.0],
                mode="lines",
                line={"shape": "hv", "width": 3, "color": _color(name, index)},
                name=f"vs {name}",
                hovertemplate="fast_%{x:.2f} = %{y:.0%}<extra>" + html.escape(name) + "</extra>",
            )
        )
    if not fig.data:
        return None
    for p in (1.0, 1.5, 2.0):
        fig.add_vline(x=p, line={"dash": "dot", "color": "#999"}, annotation_text=f"p={p:g}")
    _layout(
        fig, xaxis_title="p (speedup threshold)", yaxis={"title": "fast_p (share of all tasks)", "range": [0, 1.05]}
    )
    return Chart(
        "chart-fast-p",
        "fast_p",
        "The share of all tasks whose kernel is verified and more than p times faster than the baseline"
        " (KernelBench's fast_p; fast_0 is the correctness rate).",
        fig,
    )


def bench_speedup_chart(bench: BenchReport) -> Chart | None:
    """Each verified task's speedup against each baseline (log scale)."""
    verified = [r for r in bench.rows if r.verified]
    if not verified or not bench.baselines:
        return None
    fig = go.Figure()
    for index, baseline in enumerate(bench.baselines):
        name = reference_name(baseline)
        fig.add_trace(
            go.Bar(
                x=[html.escape(r.task) for r in verified],
                y=[r.speedup(baseline) for r in verified],
                name=f"vs {name}",
                marker={"color": _color(name, index)},
                hovertemplate="%{x}: %{y:.2f}×<extra>" + html.escape(name) + "</extra>",
            )
        )
    fig.add_hline(y=1.0, line={"color": "#444"})
    _layout(fig, barmode="group", yaxis={"type": "log", "title": "speedup (×)"})
    return Chart("chart-speedups", "Speedup per task", "Verified tasks only; 1× is the baseline's time.", fig)


def bench_charts(bench: BenchReport) -> list[Chart]:
    found = [fast_p_chart(bench), bench_speedup_chart(bench)]
    return [c for c in found if c is not None]
