"""The Typer app, shared option types, and the one place that turns errors into one red line."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from optiml import __version__
from optiml.errors import OptimlError

app = typer.Typer(
    name="optiml",
    help="Turn what you want computed into a verified, fast CUDA kernel.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

TaskArg = Annotated[Path, typer.Argument(help="Task file in KernelBench format (Model, get_inputs, get_init_inputs).")]
KernelArg = Annotated[Path, typer.Argument(help="Candidate kernel (.cu) in the OptiML ABI.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
DEFAULT_STORE = Path(".optiml") / "runs.db"


def reports_errors(func: F) -> F:
    """Map OptiML's exceptions to one red line and exit code 2 (the one place that does it)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OptimlError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/yellow]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def version_callback(value: bool) -> None:
    if value:
        console.print(f"optiml {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=version_callback, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """OptiML: generate, verify, time, profile and optimize CUDA kernels."""


StoreOpt = Annotated[Path, typer.Option("--store", help="Run store (SQLite).")]
ProposerOpt = Annotated[
    str, typer.Option("--proposer", help="auto (offline + LLM if configured) | heuristic (offline only) | llm | mix.")
]
LlmModelOpt = Annotated[str | None, typer.Option("--llm-model", help="LLM model (overrides env/optiml.toml).")]
LlmUrlOpt = Annotated[str | None, typer.Option("--llm-base-url", help="OpenAI-compatible base URL (vLLM, …).")]


def llm_overrides(model: str | None, base_url: str | None, budget_usd: float | None = None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if budget_usd is not None:
        overrides["budget_usd"] = budget_usd
    return overrides


def main() -> None:
    app()
