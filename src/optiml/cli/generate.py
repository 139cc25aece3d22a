"""Generation commands (need an LLM): generate, adapt."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

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
from optiml.cli.preflight import require_gpu, require_nvcc, require_task_file
from optiml.cli.views.waiting import llm_where, retries_note, waiting
from optiml.errors import ConfigError, OptimlError

NO_GPU_ONLY = "run on a GPU machine (`optiml doctor` shows what this one offers)"
NO_GPU_HINT = "run on a GPU machine, or pass --no-verify to write the LLM's candidates compiled but unverified"

if TYPE_CHECKING:
    from optiml.llm import LLMClient


NO_VERIFY_HELP = "No GPU: write the LLM's candidate kernels (compiled, not verified) instead of a verified root."


def _llm_configured(model: str | None, base_url: str | None) -> bool:
    from optiml.llm.config import load_llm_config  # light: no torch

    return load_llm_config(overrides=llm_overrides(model, base_url) or None).is_configured


def _require_llm_now(model: str | None, base_url: str | None, why: str = "generation needs an LLM") -> None:
    """No LLM configured: one line saying how to configure one, before anything is loaded."""
    from optiml.llm.config import load_llm_config
    from optiml.llm.errors import LLMConfigError

    try:
        load_llm_config(overrides=llm_overrides(model, base_url) or None).require_configured()
    except LLMConfigError as exc:
        raise ConfigError(
            f"{why}. {exc} Without one, start from a hand-written kernel: "
            "`optiml init-kernel TASK -o kernel.cu` writes a skeleton to fill in."
        ) from exc


def _generate_offline(reference: Path, kernel_out: Path | None) -> None:
    """OptiML-G without an LLM: the fastest verified template kernel for a KernelBench file."""
    from optiml.cli.views.workflow import TemplateRootView
    from optiml.generate import validate_task_file
    from optiml.session import SessionOptions, make_evaluator, offline_session
    from optiml.workflow import Workflow

    task = validate_task_file(reference).task
    target = kernel_out or task.path.with_name(task.name + ".gen.cu")
    if not target.parent.is_dir():
        raise OptimlError(f"{target}: the folder {target.parent} does not exist")
    with make_evaluator(task, SessionOptions()) as evaluator:  # the workflow's first two steps: prepare, root
        flow = Workflow(offline_session(evaluator), TemplateRootView(console))
        flow.prepare()
        outcome = flow.root_candidates().offline
    best = outcome.best
    if best is None:
        raise OptimlError(
            f"{task.path.name}: no verified kernel: {outcome.error or 'no template candidate verified'}; configure "
            "an LLM for Mixture-of-Thoughts generation, or start from `optiml init-kernel`"
        )
    target.write_text(best.kernel.to_file_text(), encoding="utf-8")
    console.print(
        f"root kernel ({best.label}, {best.result.time_ms:.4f} ms) written to [bold]{target}[/bold]; next: "
        f"`optiml optimize {task.path} --kernel {target}`",
        highlight=False,
    )


def _llm_client_for(model: str | None, base_url: str | None, store: Path, budget_usd: float | None = None) -> LLMClient:
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
    no_verify: Annotated[bool, typer.Option("--no-verify", help=NO_VERIFY_HELP)] = False,
    store: StoreOpt = DEFAULT_STORE,
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", help="LLM cost budget.")] = None,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
) -> None:
    """From a request: write and validate a task (shown to you), then generate a verified root kernel.

    With --reference and no LLM configured, the root comes from the op graph's templates."""
    if reference is not None:
        require_task_file(reference)
    offline = reference is not None and not _llm_configured(llm_model, llm_base_url)
    if no_verify:  # the LLM's candidates, compiled: an LLM and nvcc, no GPU
        _require_llm_now(llm_model, llm_base_url, "--no-verify writes the LLM's candidate kernels: it needs an LLM")
        require_nvcc()
    elif offline:  # the templates' kernels, verified
        require_gpu("generating from templates (no LLM is configured) verifies every kernel: it", instead=NO_GPU_ONLY)
        require_nvcc()
    else:
        _require_llm_now(llm_model, llm_base_url)
        require_gpu("generation verifies every candidate (no LLM call was made): it", instead=NO_GPU_HINT)
        require_nvcc()
    from rich.syntax import Syntax

    from optiml.cli.views.confirm import confirm_task
    from optiml.cli.views.generation import render_generation
    from optiml.generate import (
        GenerationStore,
        generate_root,
        generate_task_from_request,
        load_generation_config,
        validate_task_file,
    )
    from optiml.generate.candidate_files import write_candidates
    from optiml.generate.unverified import CompileOnly
    from optiml.generate.unverified import require_gpu as require_cuda
    from optiml.session import SessionOptions, make_compiler, make_evaluator

    if offline:
        assert reference is not None
        _generate_offline(reference, kernel_out)  # a reference needs no LLM: the templates serve it
        return
    client = _llm_client_for(llm_model, llm_base_url, store, budget_usd)  # no call yet: checks the configuration
    generation_store = GenerationStore(store)
    config = load_generation_config()
    try:
        if not no_verify:
            require_cuda()  # a GPU device but no working CUDA: said before any paid call
        if reference is not None:
            task = validate_task_file(reference).task
        else:
            path = task_out or Path(_slug(request) + ".py")
            with waiting(console, f"waiting for the LLM ({llm_where(client)}) to write the task", retries_note(client)):
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
        checked = "compiling" if no_verify else "verifying"
        shown = waiting(
            console, f"generating kernels with the LLM ({llm_where(client)}), {checked} them", retries_note(client)
        )
        if no_verify:
            compile_only = CompileOnly(make_compiler(task))
            with shown:
                outcome = generate_root(
                    task, client, compile_only, replace(config, max_repairs=0), store=generation_store
                )
        else:
            with make_evaluator(task, SessionOptions()) as evaluator, shown:
                outcome = generate_root(task, client, evaluator, config, store=generation_store)
    finally:
        client.close()
    console.print(render_generation(outcome))
    written = write_candidates(outcome, task.path.with_name(task.name + ".candidates"))
    if written:
        console.print(
            f"{written} candidate kernel(s) the LLM wrote saved in {task.path.with_name(task.name + '.candidates')}/"
        )
    if no_verify:
        return
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
    require_task_file(task)
    try:
        source = code.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OptimlError(f"{code}: cannot read: {exc}") from exc
    _require_llm_now(llm_model, llm_base_url, "adapting a kernel needs an LLM")
    require_gpu("adapting verifies the adapted kernel (no LLM call was made): it", instead=NO_GPU_ONLY)
    require_nvcc()
    from optiml.cli.views.generation import render_generation
    from optiml.generate import GenerationStore, adapt_kernel, load_generation_config
    from optiml.generate.candidate_files import write_candidates
    from optiml.generate.unverified import require_gpu as require_cuda
    from optiml.session import SessionOptions, make_evaluator
    from optiml.task import load_task

    loaded = load_task(task)
    client = _llm_client_for(llm_model, llm_base_url, store)
    try:
        require_cuda(no_verify_flag=False)  # a GPU device but no working CUDA: said before any paid call
        what = f"adapting the kernel with the LLM ({llm_where(client)}) and verifying it"
        with make_evaluator(loaded, SessionOptions()) as evaluator, waiting(console, what, retries_note(client)):
            outcome = adapt_kernel(
                source, loaded, client, evaluator, load_generation_config(), store=GenerationStore(store)
            )
    finally:
        client.close()
    console.print(render_generation(outcome))
    written = write_candidates(outcome, code.with_name(code.stem + ".candidates"))
    if written:
        console.print(
            f"{written} candidate kernel(s) the LLM wrote saved in {code.with_name(code.stem + '.candidates')}/"
        )
    kernel = outcome.require_kernel()
    target = out or code.with_name(code.stem + ".optiml.cu")
    target.write_text(kernel.to_file_text(), encoding="utf-8")
    console.print(f"adapted kernel written to [bold]{target}[/bold]; next: `optiml optimize {task} --kernel {target}`")


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:6]
    return "_".join(words) or "task"
