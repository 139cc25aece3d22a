"""The Typer app, shared option types, and the one place that turns errors into one red line."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

from optiml import __version__

try:  # the click that typer runs on: its own copy since typer 0.2x, the click package before
    from typer import _click as click
except ImportError:  # pragma: no cover - older typer
    import click  # type: ignore[no-redef]
from optiml.errors import ConfigError, OptimlError
from optiml.integrity.children import end_all


class _FlagOption(typer.core.TyperOption):
    """A boolean flag in the help: no value type after it (typer's rich help prints ``--json <bool>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class _Argument(typer.core.TyperArgument):
    """An argument in the usage line as click writes it: ``TASK``, or ``[RUN]`` when optional (typer
    writes ``{task}``)."""

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.metavar or (self.name or "ARG").upper()
        return [name if self.required else f"[{name}]"]


def _plain_help(params: list[Any]) -> list[Any]:
    for param in params:
        if type(param) is typer.core.TyperOption and getattr(param, "is_flag", False):
            param.__class__ = _FlagOption
        elif type(param) is typer.core.TyperArgument:
            param.__class__ = _Argument
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()  # the same name in the usage line and the table
    return params


def reflow(text: str) -> str:
    """A docstring as help text: the lines of each paragraph joined, so the help wraps at the terminal's
    width instead of breaking where the source's lines did."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


class Command(typer.core.TyperCommand):
    """Every ``optiml`` command: flags shown as flags and arguments by their metavar in ``--help``; the
    help text in paragraphs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.help:
            self.help = reflow(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_help(super().get_params(ctx))


class Group(typer.core.TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_help(super().get_params(ctx))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """As click's, but a usage error (unknown option, bad or missing value) is one red line, like
        every other error, instead of typer's boxed message and usage block."""
        extra["windows_expand_args"] = windows_expand_args
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # `optiml` alone: the help, once
            text = exc.format_message()  # the help, built when the error was: typer's rich help printed it then
            if text.strip():
                err_console.print(text, highlight=False, markup=False)
            sys.exit(exc.exit_code)
        except click.exceptions.UsageError as exc:
            print_error(usage_line(exc), exc.exit_code, "--json" in (sys.argv[1:] if args is None else args))
            sys.exit(exc.exit_code)
        except click.exceptions.ClickException as exc:
            print_error(exc.format_message(), exc.exit_code, "--json" in (sys.argv[1:] if args is None else args))
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("[yellow]aborted[/yellow]")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def usage_line(exc: click.exceptions.UsageError) -> str:
    """``Missing argument 'KERNEL'; usage: optiml eval [OPTIONS] TASK KERNEL (`optiml eval --help`)``."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    if exc.ctx is None:
        return message
    usage = " ".join(exc.ctx.get_usage().split()).removeprefix("Usage:").strip()
    return f"{message}; usage: {usage} (`{exc.ctx.command_path} --help` for more)"


class _App(typer.Typer):
    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)


app = _App(
    name="optiml",
    cls=Group,
    help="Turn what you want computed into a verified, fast CUDA kernel.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
#: the width of output that goes to a file or a pipe: wide enough for paths, so a log is not cut at 80 columns
PIPED_WIDTH = 200


def make_console(stderr: bool = False) -> Console:
    """A console for stdout or stderr. On a terminal (or with COLUMNS set) rich's own width; into a file
    or a pipe, lines are not wrapped (``soft_wrap``) and tables and panels get :data:`PIPED_WIDTH`."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and "COLUMNS" not in os.environ
    return Console(stderr=stderr, soft_wrap=piped, width=PIPED_WIDTH if piped else None)


console = make_console()
err_console = make_console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

TaskArg = Annotated[
    Path, typer.Argument(metavar="TASK", help="Task file in KernelBench format (Model, get_inputs, get_init_inputs).")
]
KernelArg = Annotated[Path, typer.Argument(metavar="KERNEL", help="Candidate kernel (.cu) in the OptiML ABI.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
DEFAULT_STORE = Path(".optiml") / "runs.db"


def print_error(message: str, code: int, as_json: bool) -> None:
    """An error as one red line on stderr, or (``as_json``) as a JSON object on stdout."""
    if as_json:
        sys.stdout.write(json.dumps({"ok": False, "error": message, "exit_code": code}) + "\n")
    else:
        err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)


def reports_errors(func: F) -> F:
    """Map OptiML's exceptions to one red line and exit code 2 (the one place that does it); a command
    called with ``as_json=True`` gets the error as JSON on stdout instead."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OptimlError as exc:
            print_error(str(exc), 2, bool(kwargs.get("as_json")))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            end_all()  # what the command started runs in groups of its own, which Ctrl-C does not reach
            if kwargs.get("as_json"):
                print_error("interrupted", 130, True)
            else:
                err_console.print("[yellow]interrupted[/yellow]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def check_output(path: Path, *, force: bool | None = None) -> Path:
    """Fail now, in one line, for an output file that cannot be written later: its folder is missing or
    not a folder, a folder is in its place, it exists and ``force`` is False (None: overwriting is fine),
    or it is not writable. Paths are shown as the user gave them."""
    if path.is_dir():
        raise OptimlError(f"{path}: is a folder; give a file name to write")
    parent = path.parent
    if not parent.exists():
        raise OptimlError(f"{path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise OptimlError(f"{path}: {parent} is not a folder")
    if path.exists() and force is False:
        raise OptimlError(f"{path} exists; pass --force to overwrite")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OptimlError(f"{path}: not writable (permission denied)")
    return path


def require_at_least(option: str, value: int | None, least: int = 1, what: str = "") -> None:
    """A whole-number flag below ``least`` (None: not given) is one line naming the flag."""
    if value is not None and value < least:
        raise ConfigError(f"{option} must be at least {least}{f' ({what})' if what else ''}, got {value}")


def require_number(option: str, value: float | None, *, positive: bool = True, unit: str = "") -> None:
    """A number flag that is NaN, infinite, negative or (``positive``) zero is one line naming the flag."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "a positive number" if positive else "a number >= 0"
        raise ConfigError(f"{option} must be {bound}{f' ({unit})' if unit else ''}, got {value:g}")


_ARCH = re.compile(r"(sm|compute)_\d{2,3}[af]?|native|all|all-major")


def require_arch(arch: str | None) -> None:
    """An ``--arch`` nvcc would not take is bad input (one line), not a failed compile of the candidate."""
    if arch is not None and _ARCH.fullmatch(arch) is None:
        raise ConfigError(f"--arch {arch!r}: expected an nvcc architecture like sm_90a, sm_80 or native")


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path``; an OS error is one line, not a traceback."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OptimlError(f"{path}: cannot write: {exc.strerror or exc}") from exc


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


BudgetUsdOpt = Annotated[
    float | None,
    typer.Option("--budget-usd", help="LLM cost budget in USD (refused for a model without a known price)."),
]
MaxLlmCallsOpt = Annotated[
    int | None, typer.Option("--max-llm-calls", min=1, help="LLM budget in API calls (needs no prices).")
]
MaxLlmTokensOpt = Annotated[
    int | None, typer.Option("--max-llm-tokens", min=1, help="LLM budget in input + output tokens (needs no prices).")
]
AllowUnpricedOpt = Annotated[
    bool,
    typer.Option("--allow-unpriced", help="Accept --budget-usd for a model without a known price (it cannot bind)."),
]


def llm_overrides(
    model: str | None,
    base_url: str | None,
    budget_usd: float | None = None,
    *,
    max_calls: int | None = None,
    max_tokens: int | None = None,
    allow_unpriced: bool = False,
) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if budget_usd is not None:
        overrides["budget_usd"] = budget_usd
    if max_calls is not None:
        overrides["budget_calls"] = max_calls
    if max_tokens is not None:
        overrides["budget_tokens"] = max_tokens
    if allow_unpriced:
        overrides["allow_unpriced"] = True
    return overrides


def main() -> None:
    """The ``optiml`` program. After Ctrl-C (exit 130, every child already ended) it leaves at once: the
    interpreter's teardown with torch loaded took another second or more."""
    try:
        app()
    except SystemExit as exc:
        if exc.code == 130:
            end_all()  # again: a command that caught Ctrl-C itself (a search, a bench) did not end them
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        raise
