"""The ``optiml doctor`` table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from optiml.doctor import Check


def render_checks(console: Console, checks: list[Check]) -> None:
    table = Table(title="optiml doctor")
    table.add_column("check")
    table.add_column("ok")
    table.add_column("detail", overflow="fold")
    for check in checks:
        table.add_row(check.name, "[green]yes[/green]" if check.ok else "[red]no[/red]", check.detail)
    console.print(table)
