"""Show a generation to the user: which thought won, why, and what every other thought went through."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from optiml.generate.outcome import GenerationOutcome, ThoughtRecord


def outcome_table(outcome: GenerationOutcome) -> Table:
    """One row per thought: its attempts' statuses in order, its wall time and its verdict."""
    table = Table(title=f"generation {outcome.id} ({outcome.kind}, task {outcome.task_name})", title_justify="left")
    table.add_column("thought")
    table.add_column("attempts")
    table.add_column("time", justify="right")
    table.add_column("verdict")
    for record in outcome.thoughts:
        name = f"[bold green]{record.name}[/bold green]" if record.chosen else record.name
        table.add_row(name, attempt_trail(record), f"{record.seconds:.1f} s", record.verdict)
    return table


def attempt_trail(record: ThoughtRecord) -> str:
    """``compile_error → ok`` per sample: the path each of the thought's candidates took."""
    samples = sorted({a.sample for a in record.attempts})
    trails = [" → ".join(a.status for a in record.attempts if a.sample == s) for s in samples]
    return "; ".join(trails) or "—"


def render_generation(outcome: GenerationOutcome) -> Group:
    """The table, the notes, the winner (or why there is none) and the totals, ready to print."""
    parts: list[RenderableType] = [outcome_table(outcome)]
    parts += [Text(note, style="dim") for note in outcome.notes]
    if outcome.ok:
        parts.append(Text.assemble(("root: ", "green"), outcome.reason))
    else:
        parts.append(Text.assemble(("no verified kernel: ", "red"), outcome.reason))
    parts.append(Text(f"{outcome.attempts} candidates, {outcome.seconds:.1f} s, LLM cost ${outcome.cost_usd:.4f}"))
    return Group(*parts)
