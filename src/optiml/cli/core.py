"""Commands on one task and one kernel: check-task, init-kernel, eval, profile, export, doctor."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from optiml.cli.app import (
    JsonOpt,
    KernelArg,
    TaskArg,
    app,
    console,
    reports_errors,
)
from optiml.errors import OptimlError


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
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default: stdout).")] = None,
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


@app.command("profile")
@reports_errors
def profile_cmd(
    task: TaskArg,
    kernel: KernelArg,
    as_json: JsonOpt = False,
    arch: Annotated[str | None, typer.Option(help="nvcc -arch (default: detect the GPU).")] = None,
    raw_dir: Annotated[Path | None, typer.Option("--raw-dir", help="Keep ncu's raw CSV here.")] = None,
) -> None:
    """Verify, time and profile KERNEL: metrics per kernel, roofline position and a diagnosis."""
    from optiml.evaluate.evaluator import Evaluator
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.kernel.source import KernelSource
    from optiml.profile import ProfileConfig, Profiler, build_report, render_report, report_to_json
    from optiml.task import load_task

    loaded = load_task(task)
    source = KernelSource.from_file(kernel)
    compiler = Compiler(CompilerConfig(arch=arch, libraries=loaded.meta.libraries))
    with Evaluator(loaded, compiler=compiler) as evaluator:
        result = evaluator.evaluate(source)
        facts = evaluator.facts
        io_bytes = facts.input_bytes + facts.output_bytes if facts is not None else None
        profiler = Profiler(loaded, compiler, ProfileConfig(raw_dir=raw_dir), io_bytes=io_bytes)
        with evaluator.gpu_lock:
            report = build_report(profiler, source, result)
    if as_json:
        sys.stdout.write(report_to_json(report) + "\n")
    else:
        render_report(report, console)
    raise typer.Exit(0 if result.ok else 1)


@app.command("export")
@reports_errors
def export_cmd(
    task: TaskArg,
    kernel: KernelArg,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Default: <task>_model_new.py.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write KERNEL as a self-contained KernelBench ModelNew file (nvcc + ctypes, no torch extension build)."""
    from optiml.export.kernelbench import render_model_new
    from optiml.kernel.source import KernelSource
    from optiml.task import load_task

    loaded = load_task(task)
    target = out or Path(f"{loaded.name}_model_new.py")
    if target.exists() and not force:
        raise OptimlError(f"{target} exists; pass --force to overwrite")
    target.write_text(render_model_new(loaded, KernelSource.from_file(kernel)), encoding="utf-8")
    console.print(f"wrote {target}: `from {target.stem} import ModelNew` (same arguments as the task's Model)")


@app.command("doctor")
@reports_errors
def doctor_cmd() -> None:
    """Report what this machine offers: nvcc, GPU, ncu, cuobjdump, sandboxing."""
    from optiml.report.doctor import collect, render

    render(console, collect())
