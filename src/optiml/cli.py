"""The ``optiml`` command line. Thin: parse, call the library, render; errors become one red line."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

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

TaskArg = Annotated[
    Path, typer.Argument(help="Task file in KernelBench format (Model, get_inputs, get_init_inputs).")
]
KernelArg = Annotated[Path, typer.Argument(help="Candidate kernel (.cu) in the OptiML ABI.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def reports_errors(func: F) -> F:
    """Map OptiML's exceptions to one red line and exit code 2 (the one place that does it)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OptimlError as exc:
            err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
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


@app.command("check-task")
@reports_errors
def check_task_cmd(task: TaskArg) -> None:
    """Load a task and run its static and dynamic checks on the CPU (smallest shape set)."""
    from optiml.evaluate.runtime import check_task
    from optiml.task import load_task

    loaded = load_task(task)
    notes = check_task(loaded, device="cpu")
    console.print(f"[green]ok[/green] {loaded.path.name}: {loaded.meta.description or loaded.name}")
    for note in notes:
        console.print(f"  {note}")
    console.print(
        f"  shape sets: {loaded.num_shape_sets}; dtype {loaded.meta.dtype}; "
        f"atol {loaded.meta.atol:g}, rtol {loaded.meta.rtol:g}"
    )


@app.command("init-kernel")
@reports_errors
def init_kernel_cmd(
    task: TaskArg,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write (default: stdout).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented skeleton .cu for TASK: argument order, shapes, dtypes, launch pattern."""
    from optiml.kernel.skeleton import render_skeleton
    from optiml.task import load_task

    text = render_skeleton(load_task(task))
    if output is None:
        sys.stdout.write(text)
        return
    if output.exists() and not force:
        raise OptimlError(f"{output} exists; pass --force to overwrite")
    output.write_text(text, encoding="utf-8")
    console.print(f"wrote {output}")


@app.command("eval")
@reports_errors
def eval_cmd(
    task: TaskArg,
    kernel: KernelArg,
    as_json: JsonOpt = False,
    torch_compile: Annotated[bool, typer.Option("--compile", help="Also time torch.compile.")] = False,
    seeds: Annotated[int, typer.Option(help="Verification trials on the default shape set.")] = 3,
    arch: Annotated[str | None, typer.Option(help="nvcc -arch (default: detect the GPU).")] = None,
    no_screen: Annotated[bool, typer.Option("--no-screen", help="Skip static screening (unsafe).")] = False,
) -> None:
    """Compile, verify and time KERNEL against TASK's reference."""
    from optiml.evaluate.config import EvalConfig
    from optiml.evaluate.evaluator import Evaluator
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.kernel.source import KernelSource
    from optiml.report.evaluation import eval_to_json, render_eval
    from optiml.task import load_task

    loaded = load_task(task)
    source = KernelSource.from_file(kernel)
    modes = ("eager", "compile") if torch_compile else ("eager",)
    config = EvalConfig(seeds=seeds, reference_modes=modes, screen=not no_screen)
    compiler = Compiler(CompilerConfig(arch=arch, libraries=loaded.meta.libraries))
    with Evaluator(loaded, config, compiler=compiler) as evaluator:
        result = evaluator.evaluate(source)
    if as_json:
        sys.stdout.write(json.dumps(eval_to_json(loaded, kernel, result), indent=2) + "\n")
    else:
        render_eval(console, loaded, kernel, result)
    raise typer.Exit(0 if result.ok else 1)


@app.command("doctor")
@reports_errors
def doctor_cmd() -> None:
    """Report what this machine offers: nvcc, GPU, ncu, cuobjdump, sandboxing."""
    from optiml.report.doctor import collect, render

    render(console, collect())


def main() -> None:
    app()


if __name__ == "__main__":
    main()
