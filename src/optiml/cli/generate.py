"""Generation commands (need an LLM): generate, adapt."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from optiml.cli.app import (
    DEFAULT_STORE,
    LlmModelOpt,
    LlmUrlOpt,
    StoreOpt,
    app,
    console,
    err_console,
    llm_overrides,
    reports_errors,
)
from optiml.errors import OptimlError


def generate_root_for(task: Any, session: Any, store: Path, out: Console) -> Any:
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

    config = llm_config(SessionOptions(llm_overrides=llm_overrides(model, base_url, budget_usd)))
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
