"""``optiml profile TASK KERNEL.cu`` in a terminal: the metrics table, roofline position and diagnosis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table

from optiml.profile.diagnosis import Diagnosis
from optiml.profile.metrics import KernelMetrics
from optiml.profile.report import ProfileReport
from optiml.profile.results import Profile

#: (row label, how to read it from a kernel's metrics) for the metrics table
_ROWS: tuple[tuple[str, Callable[[KernelMetrics], str]], ...] = (
    ("time", lambda m: _num(m.duration_ms, " ms", 4)),
    ("DRAM throughput", lambda m: _num(m.dram_pct, "%")),
    ("L2 throughput", lambda m: _num(m.l2_pct, "%")),
    ("L1 throughput", lambda m: _num(m.l1_pct, "%")),
    ("SM throughput", lambda m: _num(m.sm_pct, "%")),
    ("FMA pipe", lambda m: _num(m.fma_pipe_pct, "%")),
    ("tensor pipe", lambda m: _num(m.tensor_pipe_pct, "%")),
    (
        "occupancy achieved / theoretical",
        lambda m: f"{_num(m.achieved_occupancy_pct, '%')} / {_num(m.theoretical_occupancy_pct, '%')}",
    ),
    (
        "blocks/SM limit regs / smem / warps",
        lambda m: f"{_num(m.block_limit_registers)} / {_num(m.block_limit_shared_mem)} / {_num(m.block_limit_warps)}",
    ),
    ("registers/thread", lambda m: _num(m.registers_per_thread)),
    ("block × grid", lambda m: f"{_num(m.block_size)} × {_num(m.grid_size)}"),
    ("L1 / L2 hit rate", lambda m: f"{_num(m.l1_hit_pct, '%')} / {_num(m.l2_hit_pct, '%')}"),
    (
        "sectors/request load / store",
        lambda m: f"{_num(m.load_sectors_per_request)} / {_num(m.store_sectors_per_request)}",
    ),
    ("shared bank conflicts", lambda m: _num(m.bank_conflicts)),
    ("DRAM bytes", lambda m: _bytes(m.dram_bytes)),
    ("flops (CUDA cores)", lambda m: _num(m.flops)),
    ("top stalls (cycles/inst)", lambda m: ", ".join(f"{r} {v:.1f}" for r, v in m.top_stalls(2)) or "n/a"),
)


def render_report(report: ProfileReport, console: Console) -> None:
    """Print the report: header, per-kernel metrics, roofline, diagnosis."""
    diagnosis = report.diagnosis
    result = report.evaluation
    head = f"[bold]{report.task}[/bold] · kernel {report.kernel_digest[:12]} · {result.status.value}"
    if result.time_ms is not None:
        head += f" · {result.time_ms:.4f} ms"
    speedup = result.speedup("eager")
    if speedup is not None:
        head += f" · {speedup.value:.2f}x vs eager"
    console.print(head)
    if result.message:
        console.print(f"[red]{result.message}[/red]")
    if diagnosis.profile is not None and diagnosis.profile.kernels:
        console.print(_metrics_table(diagnosis.profile))
    if diagnosis.roofline is not None:
        console.print(_roofline_panel(diagnosis))
    console.print(_diagnosis_panel(diagnosis))


def _metrics_table(profile: Profile) -> Table:
    table = Table(title="Nsight Compute metrics", title_justify="left")
    table.add_column("metric")
    for kernel in profile.kernels:
        table.add_column(f"{kernel.short_name} ({profile.time_share(kernel):.0%})", justify="right")
    for label, read in _ROWS:
        table.add_row(label, *(read(k.metrics) for k in profile.kernels))
    return table


def _roofline_panel(diagnosis: Diagnosis) -> Panel:
    roofline = diagnosis.roofline
    assert roofline is not None
    peaks = roofline.peaks
    lines = [
        f"peaks ({peaks.source}): DRAM {peaks.dram_bandwidth / 1e12:.2f} TB/s, "
        f"{roofline.dtype} compute {roofline.compute_peak / 1e12:.1f} TFLOP/s",
        f"task: {_num(roofline.flops)} flop, {_bytes(roofline.min_bytes)} minimum traffic, "
        f"intensity {_num(roofline.intensity, ' flop/B', 3)} (ridge {_num(roofline.ridge, ' flop/B', 3)}), "
        f"{roofline.regime or 'unknown'}-bound",
        f"floor {_num(roofline.floor_ms, ' ms', 4)}; measured {_num(diagnosis.time_ms, ' ms', 4)}; "
        f"roofline fraction {_num(diagnosis.roofline_fraction, '', 3)}; proxy score {diagnosis.proxy_score:.3f}",
    ]
    return Panel("\n".join(lines), title="Roofline", title_align="left")


def _diagnosis_panel(diagnosis: Diagnosis) -> Panel:
    table = Table(show_header=True, box=None, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column("bottleneck")
    table.add_column("severity", justify="right")
    table.add_column("evidence")
    table.add_column("suggestion")
    for rank, b in enumerate(diagnosis.bottlenecks, 1):
        evidence = "; ".join(f"{k} {_num(v, '', 3)}" for k, v in b.evidence.items())
        title = b.title + (f" ({b.kernel})" if b.kernel else "")
        table.add_row(str(rank), title, f"{b.severity:.2f}", f"{evidence}\n[dim]{b.threshold}[/dim]", b.suggestion)
    parts: list[Any] = [f"[bold]Bound:[/bold] {diagnosis.summary}"]
    parts.append(table if diagnosis.bottlenecks else "No bottleneck found in the available evidence.")
    if diagnosis.missing_evidence:
        parts.append("[yellow]Missing evidence:[/yellow] " + "; ".join(diagnosis.missing_evidence))
    return Panel(Group(*parts), title="Diagnosis", title_align="left")


def _num(value: float | None, unit: str = "", digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 1e4:
        return f"{value:,.0f}{unit}"
    return f"{value:.{digits}g}{unit}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "n/a"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"
