"""Rendering one evaluation: a rich summary for people, a JSON document for tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from optiml.task import Task
from optiml.values import EvalResult, EvalStatus, TimingStats


def _fmt_time(stats: TimingStats) -> str:
    return f"{stats.median_ms:.4f} ms ± {stats.spread_ms:.4f} (n={stats.trials})"


def render_eval(console: Console, task: Task, kernel: Path, result: EvalResult, compile_only: bool = False) -> None:
    table = Table(title=f"{kernel.name} on {task.name}", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    compiled = result.compile
    if result.status is EvalStatus.REJECTED:
        why = result.message.removeprefix("rejected by screening:").strip()  # the row says screening already
        table.add_row("screening", f"[red]rejected[/red]: {escape(why)}")
    elif compiled is not None:
        cached = " (cached)" if compiled.cached else ""
        state = "[green]yes[/green]" if compiled.ok else "[red]no[/red]"
        table.add_row("compiled", f"{state} {compiled.seconds:.2f} s{cached}, {compiled.arch}")
        if not compiled.ok:
            table.add_row("", escape(compiled.error_summary()))
    if result.verify is not None:
        verdict = "[green]yes[/green]" if result.verify.passed else "[red]no[/red]"
        trials = len(result.verify.trials)
        table.add_row(
            "correct",
            f"{verdict} ({trials} trials; max abs err {result.verify.max_abs_err:.3g}, "
            f"max rel err {result.verify.max_rel_err:.3g})",
        )
    if compile_only and result.ok:
        table.add_row(
            "correct", "[yellow]not checked[/yellow] (--compile-only: no run; `optiml eval` verifies on a GPU)"
        )
    compile_failed = compiled is not None and not compiled.ok
    if result.status not in (EvalStatus.OK, EvalStatus.REJECTED) and not compile_failed:
        table.add_row("status", f"[red]{result.status.value}[/red]: {escape(result.message)}")
    if result.timing is not None:
        table.add_row("time", _fmt_time(result.timing))
    if result.clock:
        table.add_row("clock", _clock(result.clock))
    for mode, stats in result.reference.items():
        table.add_row(f"reference ({mode})", _fmt_time(stats))
        speedup = result.speedup(mode)
        if speedup is not None:
            mark = "" if speedup.significant or speedup.high < 1 else " (within noise)"
            table.add_row(f"speedup vs {mode}", f"{speedup.value:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]{mark}")
    if result.floor_ms:
        table.add_row("physical floor", f"{result.floor_ms:.4f} ms (bytes / copy bandwidth, flops / compute roof)")
    for note in result.task_notes:  # distributions used, tolerances adjusted, the floor's roofs
        table.add_row("judged by", escape(note))
    if result.memory.get("peak_bytes"):
        table.add_row("GPU memory", _memory(result.memory))
    if compiled is not None:
        for res in compiled.resources:
            spills = f", [yellow]spills {res.spill_stores}/{res.spill_loads} B[/yellow]" if res.spills else ""
            usage = f"{res.registers} regs, {res.shared_bytes} B smem, {res.stack_bytes} B stack"
            table.add_row("resources", f"{escape(res.name)}: {usage}{spills}")
    for warning in result.warnings:
        table.add_row("[yellow]warning[/yellow]", escape(warning))
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in result.phase_seconds.items())
    table.add_row("phases", phases)
    console.print(table)


def _clock(clock: dict[str, Any]) -> str:
    calls = int(clock.get("window_calls", 1))
    window = "one call a window" if calls == 1 else f"{calls} calls a window"
    return (
        f"windows end on the {clock.get('window_end', 'host')}, {window}, {clock.get('round_trip_ms', 0.0):.4f} ms "
        f"round trip subtracted; the candidate's own events read {clock.get('claimed_stream_ms', 0.0):.4f} ms a call"
    )


def _memory(memory: dict[str, Any]) -> str:
    peak, footprint = memory["peak_bytes"], memory.get("footprint_bytes") or 0
    if not footprint:
        return f"peak {peak / 1e9:.2f} GB"
    task = f"{footprint / 1e9:.2f} GB"
    return f"peak {peak / 1e9:.2f} GB ({peak / footprint:.1f}x the task's inputs + outputs + references, {task})"


def eval_to_json(task: Task, kernel: Path, result: EvalResult) -> dict[str, Any]:
    data = result.to_dict()
    data["task"] = str(task.path)
    data["kernel"] = str(kernel)
    data["speedup"] = {mode: vars(s) for mode in result.reference if (s := result.speedup(mode)) is not None}
    if data.get("compile"):
        data["compile"].pop("log", None)
    return data


def user_clock_line(measured: dict[str, Any]) -> str:
    """One line of the user's clock for the text view: KernelBench's verdict, the export's time, the ratios."""
    if measured.get("error"):
        return f"user's process: not measured ({measured['error']})"
    verdict = measured.get("verdict") or {}
    passed = "passes" if verdict.get("passed") else f"fails ({verdict.get('reason', '')})"
    cold = ((measured.get("timings") or {}).get("model_new") or {}).get("cold") or {}
    parts = [f"user's process: KernelBench's check {passed}"]
    if cold.get("median_ms") is not None:
        parts.append(f"ModelNew {cold['median_ms']:.4f} ms (KernelBench's timing)")
    speedups = measured.get("speedups") or {}
    parts += [f"{speedup:.2f}x {name}" for name, speedup in speedups.items() if speedup is not None]
    if measured.get("agreement") is not None:
        parts.append(f"judge ÷ user {measured['agreement']:.3f}")
    return "; ".join(parts)
