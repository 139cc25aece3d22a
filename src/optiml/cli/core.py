"""Commands on one task and one kernel: check-task, init-kernel, eval, profile, export, doctor."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from optiml.cli.app import (
    DEFAULT_STORE,
    JsonOpt,
    KernelArg,
    StoreOpt,
    TaskArg,
    app,
    check_output,
    console,
    err_console,
    reports_errors,
    require_arch,
    require_at_least,
    write_output,
)
from optiml.cli.preflight import require_gpu, require_nvcc, require_task_and_kernel, require_task_file
from optiml.cli.views.waiting import waiting
from optiml.errors import NoGPUError, OptimlError, StoreError

COMPILE_ONLY_HINT = "`optiml eval --compile-only` checks compilation and ptxas resources without one"
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?(?:e\d+)?)\s*(?P<unit>[kmgt]?)b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_size(text: str, option: str = "--max-bytes") -> int:
    """``2G``, ``500M``, ``1.5GB`` or a plain number of bytes (decimal units)."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise OptimlError(f"{option} {text!r}: expected a size like 2G, 500M or 1000000 (bytes)")
    size = int(float(match["number"]) * _UNITS[match["unit"].lower()])
    if size < 1:
        raise OptimlError(f"{option} {text!r}: must be at least one byte")
    return size


@app.command("check-task")
@reports_errors
def check_task_cmd(
    task: TaskArg,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the dynamic check may run (in its own process).")
    ] = 600.0,
    max_bytes: Annotated[
        str,
        typer.Option(
            "--max-bytes",
            help="Largest full-size check (inputs, parameters and outputs, e.g. 2G); a bigger task is checked "
            "on the meta device only.",
        ),
    ] = "2G",
) -> None:
    """Load a task and run its static and dynamic checks on the CPU (smallest shape set), in a separate
    process with a timeout; a task too big for --max-bytes is dry-run on the meta device instead."""
    require_task_file(task)
    if not (timeout > 0 and math.isfinite(timeout)):
        raise OptimlError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    limit = parse_size(max_bytes)
    from optiml.generate.task_check import validate_task_file

    with waiting(err_console, f"checking {task} on the CPU, in a process of its own (--timeout {timeout:g} s)"):
        check = validate_task_file(task, timeout_s=timeout, max_bytes=limit)
    loaded = check.task
    mark = "[green]ok[/green]" if check.full else "[yellow]ok on the meta device only[/yellow] (over --max-bytes)"
    console.print(f"{mark} {escape(loaded.shown)}: {escape(loaded.meta.description or loaded.name)}", highlight=False)
    for note in check.notes:
        console.print(f"  {escape(note)}", highlight=False, soft_wrap=True)
    console.print(
        f"  shape sets: {loaded.num_shape_sets}; dtype {loaded.meta.dtype}; "
        f"atol {loaded.meta.atol:g}, rtol {loaded.meta.rtol:g}",
        highlight=False,
    )


@app.command("init-kernel")
@reports_errors
def init_kernel_cmd(
    task: TaskArg,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default: stdout).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented skeleton .cu for TASK: argument order, shapes, dtypes, launch pattern."""
    require_task_file(task)
    if output is not None:
        check_output(output, force=force)
    with waiting(err_console, f"loading PyTorch and {task}"):
        from optiml.kernel.skeleton import render_skeleton
        from optiml.task import load_task

        text = render_skeleton(load_task(task))
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text)
    console.print(f"wrote {output}", highlight=False)


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
    compile_only: Annotated[
        bool,
        typer.Option(
            "--compile-only", help="Screen and compile only, with ptxas resources per kernel (no GPU needed)."
        ),
    ] = False,
    user_clock: Annotated[
        bool,
        typer.Option(
            "--user-clock",
            help="Also run the verified kernel as an exported ModelNew in a fresh process, as KernelBench does: "
            "its correctness check, and its time beside eager and torch.compile (with --compile) there.",
        ),
    ] = False,
) -> None:
    """Compile, verify and time KERNEL against TASK's reference (--compile-only: screen and compile)."""
    if compile_only and torch_compile:
        raise OptimlError("--compile-only builds the kernel only; --compile (timing torch.compile) needs a full run")
    if compile_only and user_clock:
        raise OptimlError("--compile-only builds the kernel only; --user-clock runs it, which needs a full run")
    require_at_least("--seeds", seeds, what="verification trials on the default shape set")
    require_arch(arch)
    require_task_and_kernel(task, kernel)
    from optiml.kernel.source import KernelSource  # light: no torch

    source = KernelSource.from_file(kernel)
    if not compile_only:
        require_gpu("evaluation", instead=COMPILE_ONLY_HINT)
    require_nvcc()
    with waiting(err_console, f"loading PyTorch and {task}"):
        from optiml.cli.views.evaluation import eval_to_json, render_eval, user_clock_line
        from optiml.session import SessionOptions, check_compiles, eval_config, make_evaluator
        from optiml.task import load_task

        loaded = load_task(task)
    if compile_only:
        with waiting(err_console, f"screening and compiling {kernel}"):
            result = check_compiles(loaded, source, arch, screen=not no_screen)
    else:
        options = SessionOptions(arch=arch, torch_compile=torch_compile)
        config = eval_config(options, seeds=seeds, screen=not no_screen)
        try:
            what = f"compiling {kernel}, then verifying and timing it and the reference on the GPU"
            with waiting(err_console, what), make_evaluator(loaded, options, config) as evaluator:
                result = evaluator.evaluate(source)
        except NoGPUError as exc:
            raise NoGPUError(f"{exc}; {COMPILE_ONLY_HINT}") from exc
    measured: dict[str, Any] | None = None
    if user_clock and result.ok:
        from optiml.bench.user_clock import UserClockOptions, eval_block

        with waiting(err_console, "exporting the kernel and running it in a fresh process, as KernelBench does"):
            measured = eval_block(
                loaded, source, judge_ms=result.time_ms, options=UserClockOptions(torch_compile=torch_compile)
            )
    if as_json:
        data = eval_to_json(loaded, kernel, result)
        data["compile_only"] = compile_only
        if measured is not None:
            data["user_clock"] = measured
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        render_eval(console, loaded, kernel, result, compile_only=compile_only)
        if measured is not None:
            console.print(user_clock_line(measured))
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
    require_arch(arch)
    require_task_and_kernel(task, kernel)
    from optiml.kernel.source import KernelSource  # light: no torch

    source = KernelSource.from_file(kernel)
    require_gpu("profiling", instead=COMPILE_ONLY_HINT)
    require_nvcc()
    with waiting(err_console, f"loading PyTorch and {task}"):
        from optiml.cli.views.profile import render_report
        from optiml.profile import ProfileConfig, report_to_json
        from optiml.session import SessionOptions, make_evaluator, make_profiler
        from optiml.task import load_task

        loaded = load_task(task)
    what = f"compiling, verifying and timing {kernel}, then profiling it with Nsight Compute"
    with waiting(err_console, what), make_evaluator(loaded, SessionOptions(arch=arch)) as evaluator:
        result = evaluator.evaluate(source)
        report = make_profiler(loaded, evaluator, ProfileConfig(raw_dir=raw_dir)).report(source, result)
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
    form: Annotated[
        str,
        typer.Option(
            "--as",
            help="modelnew: a KernelBench ModelNew file; op: a torch.library custom op file; cu: a standalone .cu "
            "with main() and the recorded case it checks (<out stem>.bin beside it).",
        ),
    ] = "modelnew",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Default: <task>_model_new.py, <task>_op.py or <task>_standalone.cu (by --as)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing files.")] = False,
    unverified: Annotated[
        bool,
        typer.Option(
            "--unverified", help="Export a kernel the store has no verified evaluation of (labelled UNVERIFIED)."
        ),
    ] = False,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="--as op: the op namespace (default: optiml).")
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="--as op: the op name (default: the task's name).")] = None,
    shape_set: Annotated[
        int | None,
        typer.Option("--shape-set", help="--as cu: the shape set of the recorded case (default: the smallest)."),
    ] = None,
    store: StoreOpt = DEFAULT_STORE,
) -> None:
    """Write KERNEL as a self-contained drop-in: a KernelBench ModelNew (default), a PyTorch custom op
    (torch.ops.NAMESPACE.NAME, works under torch.compile) or a standalone .cu with main().

    Each states what was verified (run, date, task digest, shape sets, tolerances) from the store.

    Without a verified evaluation of KERNEL for TASK in the store, export refuses unless --unverified."""
    from optiml.export.formats import ExportRequest, check_request, data_path, default_output, render_export
    from optiml.export.verification import find_verification
    from optiml.kernel.source import KernelSource
    from optiml.task import load_task

    check_request(ExportRequest(form, Path(), namespace, name, shape_set))  # before reading anything
    require_task_and_kernel(task, kernel)
    loaded = load_task(task)
    source = KernelSource.from_file(kernel)
    request = ExportRequest(form, out or default_output(loaded, form), namespace, name, shape_set)
    check_output(request.out, force=force)
    if form == "cu":
        check_output(data_path(request.out), force=force)
    if store.is_dir():
        raise StoreError(f"{store}: is a folder; --store takes the run store file (default {DEFAULT_STORE})")
    verification = find_verification(store, loaded, source)
    if verification is None and not unverified:
        holds = "does not exist, so it holds" if not store.exists() else "holds"
        raise OptimlError(
            f"{kernel}: the run store {store} {holds} no verified evaluation of this kernel (digest {source.digest}) "
            f"for {loaded.shown}; verify it (`optiml optimize {loaded.shown} --kernel {kernel}`, with --store if "
            "you use another store) or pass --unverified to export it labelled UNVERIFIED"
        )
    with waiting(err_console, f"writing the export ({form})"):
        files, usage = render_export(request, loaded, source, verification, str(store))
    for path, contents in files:
        if isinstance(contents, str):
            write_output(path, contents)
        else:
            try:
                path.write_bytes(contents)
            except OSError as exc:
                raise OptimlError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    written = " and ".join(str(path) for path, _ in files)
    if verification is None:
        err_console.print(
            f"[bold yellow]warning: UNVERIFIED export[/bold yellow]: {store} has no verified evaluation of {kernel} "
            f"for {loaded.shown}; {written} {'say' if len(files) > 1 else 'says'} so"
            f"{' and warns when imported' if form != 'cu' else ''}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(f"verified: {verification.summary()}", highlight=False)
    console.print(f"wrote {written}: {usage}", highlight=False, soft_wrap=True)


@app.command("doctor")
@reports_errors
def doctor_cmd() -> None:
    """Report what this machine offers: nvcc, GPU, ncu, cuobjdump, sandboxing."""
    from optiml.cli.views.doctor import render_checks
    from optiml.doctor import collect

    render_checks(console, collect())
