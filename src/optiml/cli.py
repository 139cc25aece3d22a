"""The ``optiml`` command line. Thin: parse, call the library, render; errors become one red line."""

from __future__ import annotations

import functools
import json
import re
import sys
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


StoreOpt = Annotated[Path, typer.Option("--store", help="Run store (SQLite).")]
ProposerOpt = Annotated[
    str, typer.Option("--proposer", help="auto (heuristic + LLM if configured) | heuristic | llm | mix.")
]
LlmModelOpt = Annotated[str | None, typer.Option("--llm-model", help="LLM model (overrides env/optiml.toml).")]
LlmUrlOpt = Annotated[str | None, typer.Option("--llm-base-url", help="OpenAI-compatible base URL (vLLM, …).")]


def _llm_overrides(model: str | None, base_url: str | None, budget_usd: float | None = None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if model:
        overrides["model"] = model
    if base_url:
        overrides["base_url"] = base_url
    if budget_usd is not None:
        overrides["budget_usd"] = budget_usd
    return overrides


@app.command("propose")
@reports_errors
def propose_cmd(
    task: TaskArg,
    kernel: KernelArg,
    proposer: Annotated[str, typer.Option("--proposer", help="heuristic | llm")] = "heuristic",
    count: Annotated[int, typer.Option("-n", help="How many proposals.")] = 4,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the proposed kernels.")] = Path("proposals"),
    seed: Annotated[int, typer.Option(help="Seed of the heuristic proposer.")] = 0,
    store: StoreOpt = DEFAULT_STORE,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
) -> None:
    """Propose edits to KERNEL without running a search; writes each proposal and its rationale."""
    from optiml.kernel.source import KernelSource
    from optiml.propose.base import ProposalContext
    from optiml.propose.factory import make_proposer
    from optiml.propose.output import write_proposals
    from optiml.session import SessionOptions, llm_config, make_llm_client
    from optiml.task import load_task

    loaded = load_task(task)
    source = KernelSource.from_file(kernel)
    client = None
    if proposer == "llm":
        config = llm_config(SessionOptions(llm_overrides=_llm_overrides(llm_model, llm_base_url)))
        config.require_configured()
        client = make_llm_client(config, store)
    try:
        chosen = make_proposer(proposer, seed=seed, client=client)
        proposals = chosen.propose(ProposalContext(task=loaded, kernel=source), count)
    finally:
        if client is not None:
            client.close()
    written = write_proposals(proposals, out)
    usable = sum(1 for p in proposals if p.usable)
    console.print(f"{usable} of {len(proposals)} proposals usable; {len(written)} files written to {out}/")
    for index, proposal in enumerate(proposals, start=1):
        mark = "[green]ok[/green]" if proposal.usable else f"[red]failed[/red] ({proposal.error})"
        console.print(f"  {index}. {mark} {proposal.edit.summary(100)}", highlight=False)


@app.command("optimize")
@reports_errors
def optimize_cmd(
    task: TaskArg,
    kernel: Annotated[
        Path | None,
        typer.Option("--kernel", "-k", help="Starting kernel (default: the task's naive kernel, else generation)."),
    ] = None,
    strategy: Annotated[str, typer.Option(help="mcts | greedy | best-of-n")] = "mcts",
    evaluations: Annotated[int, typer.Option("--evals", help="Evaluation budget.")] = 60,
    minutes: Annotated[float, typer.Option(help="Wall-time budget in minutes.")] = 30.0,
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", help="LLM cost budget.")] = None,
    proposer: ProposerOpt = "auto",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Where to write the best kernel (default: <task>.best.cu).")
    ] = None,
    torch_compile: Annotated[bool, typer.Option("--compile", help="Also compare with torch.compile.")] = False,
    no_profile: Annotated[bool, typer.Option("--no-profile", help="Skip Nsight Compute profiling.")] = False,
    store: StoreOpt = DEFAULT_STORE,
    seed: Annotated[int, typer.Option(help="Seed for proposers and tie-breaks.")] = 0,
    arch: Annotated[str | None, typer.Option(help="nvcc -arch (default: detect).")] = None,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
) -> None:
    """Optimize TASK's kernel by search under verification; writes the best verified kernel."""
    from optiml.search import Budgets, SearchConfig, run_search
    from optiml.search.live import LiveView, render_summary
    from optiml.session import SessionOptions, open_session, resolve_root
    from optiml.store import RunStore
    from optiml.task import load_task

    loaded = load_task(task)
    options = SessionOptions(
        arch=arch,
        torch_compile=torch_compile,
        profile=not no_profile,
        proposer=proposer,
        seed=seed,
        store_path=store,
        llm_overrides=_llm_overrides(llm_model, llm_base_url, budget_usd),
    )
    config = SearchConfig(
        strategy=strategy,
        budgets=Budgets(max_evaluations=evaluations, max_seconds=minutes * 60, max_cost_usd=budget_usd),
    )
    root = resolve_root(loaded, kernel)
    with open_session(loaded, options) as session:
        with console.status("preparing the task: inputs, reference outputs, reference timing"):
            session.evaluator.prepare()  # no GPU, a broken reference: fail here, before a run is stored
        if root is None:
            root = _generate_root(loaded, session, store, console)
        console.print(
            f"optimizing [bold]{loaded.name}[/bold] with {strategy}, proposers: {', '.join(session.proposer_names)}"
            + ("" if session.llm else " [dim](no LLM configured: heuristic proposer only)[/dim]")
        )
        with RunStore(store) as run_store, LiveView(console) as view:
            outcome = _interruptible(
                lambda: run_search(
                    loaded,
                    root,
                    session.evaluator,
                    session.proposers,
                    session.profiler,
                    run_store,
                    config,
                    on_event=view,
                ),
                store,
            )
    console.print(render_summary(outcome))
    target = out or Path(f"{loaded.name}.best.cu")
    target.write_text(outcome.best_kernel.to_file_text(), encoding="utf-8")
    console.print(
        f"best kernel written to [bold]{target}[/bold] (run {outcome.run_id}; `optiml show {outcome.run_id}`)"
    )


@app.command("resume")
@reports_errors
def resume_cmd(
    run_id: Annotated[str, typer.Argument(help="Run id (see `optiml runs`).")],
    evaluations: Annotated[int | None, typer.Option("--evals", help="New total evaluation budget.")] = None,
    minutes: Annotated[float | None, typer.Option(help="New total wall-time budget in minutes.")] = None,
    proposer: ProposerOpt = "auto",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write the best kernel.")] = None,
    no_profile: Annotated[bool, typer.Option("--no-profile", help="Skip Nsight Compute profiling.")] = False,
    store: StoreOpt = DEFAULT_STORE,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
) -> None:
    """Continue a stopped or interrupted run; no evaluated candidate is evaluated again."""
    from optiml.search import Budgets, SearchConfig, resume_search
    from optiml.search.live import LiveView, render_summary
    from optiml.session import SessionOptions, open_session
    from optiml.store import RunStore
    from optiml.task import load_task

    with RunStore(store) as run_store:
        run = run_store.get_run(run_id)
        loaded = load_task(run.task_path)
        budgets = None
        if evaluations is not None or minutes is not None:
            base = SearchConfig.from_json(run.config_json).budgets
            budgets = Budgets(
                max_evaluations=evaluations if evaluations is not None else base.max_evaluations,
                max_seconds=minutes * 60 if minutes is not None else base.max_seconds,
                max_cost_usd=base.max_cost_usd,
            )
        options = SessionOptions(
            profile=not no_profile,
            proposer=proposer,
            store_path=store,
            llm_overrides=_llm_overrides(llm_model, llm_base_url),
        )
        with open_session(loaded, options) as session, LiveView(console) as view:
            outcome = _interruptible(
                lambda: resume_search(
                    run_store,
                    run_id,
                    session.evaluator,
                    session.proposers,
                    session.profiler,
                    view,
                    task=loaded,
                    budgets=budgets,
                ),
                store,
            )
    console.print(render_summary(outcome))
    target = out or Path(f"{loaded.name}.best.cu")
    target.write_text(outcome.best_kernel.to_file_text(), encoding="utf-8")
    console.print(f"best kernel written to [bold]{target}[/bold]")


@app.command("runs")
@reports_errors
def runs_cmd(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the runs in the store."""
    from optiml.search import list_runs
    from optiml.search.live import render_runs
    from optiml.store import RunStore

    if not store.exists():
        raise OptimlError(f"{store}: no run store yet (run `optiml optimize` first)")
    with RunStore(store) as run_store:
        console.print(render_runs(list_runs(run_store)))


@app.command("show")
@reports_errors
def show_cmd(
    run_id: Annotated[str, typer.Argument(help="Run id (see `optiml runs`).")],
    store: StoreOpt = DEFAULT_STORE,
    kernel_out: Annotated[Path | None, typer.Option("--kernel-out", help="Also write the best kernel here.")] = None,
) -> None:
    """Show a run's best kernel path: each edit, why, and what it gained."""
    from optiml.search import best_path
    from optiml.search.live import render_run_path
    from optiml.store import RunStore

    if not store.exists():
        raise OptimlError(f"{store}: no run store yet (run `optiml optimize` first)")
    with RunStore(store) as run_store:
        path = best_path(run_store, run_id)
    console.print(render_run_path(path))
    if kernel_out is not None:
        kernel_out.write_text(path.best_kernel.to_file_text(), encoding="utf-8")
        console.print(f"best kernel written to {kernel_out}")


def _interruptible(run: Callable[[], Any], store: Path) -> Any:
    try:
        return run()
    except KeyboardInterrupt:
        err_console.print(
            f"[yellow]interrupted[/yellow]: resume with `optiml resume RUN --store {store}` (see `optiml runs`)"
        )
        raise typer.Exit(130) from None


def _generate_root(task: Any, session: Any, store: Path, out: Console) -> Any:
    """No kernel given and none shipped: OptiML-G generates one (needs an LLM)."""
    from optiml.generate import GenerationStore, generate_root, load_generation_config
    from optiml.generate.report import render_generation

    if session.llm is None:
        raise OptimlError(
            f"{task.path.name} ships no naive kernel and no --kernel was given: generation needs an LLM "
            "(set OPTIML_LLM_MODEL and an API key, or --llm-base-url for a local server), or write one "
            f"with `optiml init-kernel {task.path}`"
        )
    outcome = generate_root(
        task, session.llm, session.evaluator, load_generation_config(), store=GenerationStore(store)
    )
    out.print(render_generation(outcome))
    return outcome.require_kernel()


def _llm_client_for(model: str | None, base_url: str | None, store: Path, budget_usd: float | None = None) -> Any:
    """A configured LLM client for generation commands, or a one-line how-to-configure error."""
    from optiml.generate import require_llm
    from optiml.session import SessionOptions, llm_config, make_llm_client

    config = llm_config(SessionOptions(llm_overrides=_llm_overrides(model, base_url, budget_usd)))
    require_llm(config)
    return make_llm_client(config, store)


@app.command("generate")
@reports_errors
def generate_cmd(
    request: Annotated[str, typer.Argument(help='What to compute, e.g. "row softmax of a float32 4096x8192 matrix".')],
    task_out: Annotated[
        Path | None, typer.Option("--task-out", help="Where to write the task (default: from the request).")
    ] = None,
    reference: Annotated[
        Path | None, typer.Option("--reference", help="Use your own KernelBench task file instead.")
    ] = None,
    kernel_out: Annotated[Path | None, typer.Option("--kernel-out", help="Where to write the root kernel.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accept the generated task after showing it.")] = False,
    store: StoreOpt = DEFAULT_STORE,
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", help="LLM cost budget.")] = None,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
) -> None:
    """From a request: write and validate a task (shown to you), then generate a verified root kernel."""
    from rich.syntax import Syntax

    from optiml.generate import (
        GenerationStore,
        confirm_task,
        generate_root,
        generate_task_from_request,
        load_generation_config,
        validate_task_file,
    )
    from optiml.generate.report import render_generation
    from optiml.session import SessionOptions, make_evaluator

    client = _llm_client_for(llm_model, llm_base_url, store, budget_usd)
    generation_store = GenerationStore(store)
    config = load_generation_config()
    try:
        if reference is not None:
            task = validate_task_file(reference).task
        else:
            path = task_out or Path(_slug(request) + ".py")
            generate_task_from_request(request, client, path, config, generation_store)
            if yes:
                console.print(Syntax(path.read_text(encoding="utf-8"), "python", line_numbers=True))
                task = validate_task_file(path).task
            else:
                accepted = confirm_task(path, console)
                if accepted is None:
                    err_console.print(f"task rejected; the draft stays at {path}")
                    raise typer.Exit(1)
                task = accepted
        with make_evaluator(task, SessionOptions()) as evaluator:
            outcome = generate_root(task, client, evaluator, config, store=generation_store)
    finally:
        client.close()
    console.print(render_generation(outcome))
    kernel = outcome.require_kernel()
    target = kernel_out or task.path.with_name(task.name + ".gen.cu")
    target.write_text(kernel.to_file_text(), encoding="utf-8")
    console.print(
        f"root kernel written to [bold]{target}[/bold]; next: `optiml optimize {task.path} --kernel {target}`"
    )


@app.command("adapt")
@reports_errors
def adapt_cmd(
    code: Annotated[Path, typer.Argument(help="An existing CUDA file with its own host code.")],
    task: Annotated[Path, typer.Option("--task", help="The task the kernel must match.")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write the adapted kernel.")] = None,
    store: StoreOpt = DEFAULT_STORE,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
) -> None:
    """Wrap an existing CUDA kernel into the OptiML ABI (by the LLM, verified against TASK)."""
    from optiml.generate import GenerationStore, adapt_kernel, load_generation_config
    from optiml.generate.report import render_generation
    from optiml.session import SessionOptions, make_evaluator
    from optiml.task import load_task

    loaded = load_task(task)
    try:
        source = code.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OptimlError(f"{code}: cannot read: {exc}") from exc
    client = _llm_client_for(llm_model, llm_base_url, store)
    try:
        with make_evaluator(loaded, SessionOptions()) as evaluator:
            outcome = adapt_kernel(
                source, loaded, client, evaluator, load_generation_config(), store=GenerationStore(store)
            )
    finally:
        client.close()
    console.print(render_generation(outcome))
    kernel = outcome.require_kernel()
    target = out or code.with_name(code.stem + ".optiml.cu")
    target.write_text(kernel.to_file_text(), encoding="utf-8")
    console.print(f"adapted kernel written to [bold]{target}[/bold]; next: `optiml optimize {task} --kernel {target}`")


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:6]
    return "_".join(words) or "task"


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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
