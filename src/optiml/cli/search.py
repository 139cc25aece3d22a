"""Search commands: propose, optimize, resume, runs, show."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from optiml.cli.app import (
    DEFAULT_STORE,
    AllowUnpricedOpt,
    BudgetUsdOpt,
    KernelArg,
    LlmModelOpt,
    LlmUrlOpt,
    MaxLlmCallsOpt,
    MaxLlmTokensOpt,
    ProposerOpt,
    StoreOpt,
    TaskArg,
    app,
    check_output,
    console,
    err_console,
    llm_overrides,
    reports_errors,
    require_arch,
    require_at_least,
    require_number,
    write_output,
)
from optiml.cli.core import COMPILE_ONLY_HINT
from optiml.cli.gpus import parse_gpus
from optiml.cli.preflight import (
    PROPOSE_KINDS,
    SEARCH_PROPOSERS,
    STRATEGIES,
    require_choice,
    require_gpu,
    require_nvcc,
    require_store_file,
    require_task_and_kernel,
    require_task_file,
)
from optiml.cli.views.waiting import llm_where, retries_note, waiting
from optiml.errors import OptimlError, StoreError

if TYPE_CHECKING:
    from optiml.llm import LLMClient
    from optiml.propose.base import ProposalContext


@app.command("propose")
@reports_errors
def propose_cmd(
    task: TaskArg,
    kernel: KernelArg,
    proposer: Annotated[str, typer.Option("--proposer", help="heuristic | structural | offline | llm")] = "heuristic",
    count: Annotated[int, typer.Option("-n", help="How many proposals.")] = 4,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the proposed kernels.")] = Path("proposals"),
    seed: Annotated[int, typer.Option(help="Seed of the offline proposers.")] = 0,
    store: StoreOpt = DEFAULT_STORE,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
    budget_usd: BudgetUsdOpt = None,
    max_llm_calls: MaxLlmCallsOpt = None,
    max_llm_tokens: MaxLlmTokensOpt = None,
    allow_unpriced: AllowUnpricedOpt = False,
) -> None:
    """Propose edits to KERNEL without running a search; writes each proposal and its rationale.
    Exit status 1 when no proposal is usable."""
    require_choice("--proposer", proposer, PROPOSE_KINDS)
    require_at_least("-n", count, what="how many proposals")
    if out.exists() and not out.is_dir():
        raise OptimlError(f"{out}: is a file; -o takes the folder to write the proposals into")
    require_task_and_kernel(task, kernel)
    with waiting(console, "loading PyTorch and the proposers"):  # PyTorch comes with them: seconds
        from optiml.kernel.source import KernelSource
        from optiml.propose.base import ProposalContext
        from optiml.propose.factory import make_proposer
        from optiml.propose.output import write_proposals
        from optiml.session import SessionOptions, llm_config, make_llm_client
        from optiml.task import load_task
        from optiml.values import EvalStatus

    loaded = load_task(task)
    source = KernelSource.from_file(kernel)
    client = None
    context = ProposalContext(task=loaded, kernel=source)
    if proposer == "llm":
        overrides = llm_overrides(
            llm_model,
            llm_base_url,
            budget_usd,
            max_calls=max_llm_calls,
            max_tokens=max_llm_tokens,
            allow_unpriced=allow_unpriced,
        )
        config = llm_config(SessionOptions(llm_overrides=overrides))
        config.require_configured()
        client = make_llm_client(config, store)  # refuses a budget it cannot enforce, before any work
        context = _with_evidence(context)  # what the LLM is told about the current kernel and the GPU
    elif proposer in ("heuristic", "offline"):
        context = _with_compile_check(context)  # an edit of a kernel that does not build is of no use
    try:
        chosen = make_proposer(proposer, seed=seed, client=client)
        if client is not None:
            what = f"waiting for the LLM ({llm_where(client)}) to propose {count} edits"
            with waiting(console, what, retries_note(client)):
                proposals = chosen.propose(context, count)
        else:
            proposals = chosen.propose(context, count)
    finally:
        if client is not None:
            client.close()
    written = write_proposals(proposals, out, parent=source)
    usable = sum(1 for p in proposals if p.usable)
    console.print(f"{usable} of {len(proposals)} proposals usable; {len(written)} files written to {out}/")
    from optiml.search.protocols import PaidProposer

    paid = chosen if isinstance(chosen, PaidProposer) else None  # an LLM's: it knows which answers were cached
    for index, proposal in enumerate(proposals, start=1):
        mark = "[green]ok[/green]" if proposal.usable else f"[red]failed[/red] ({escape(proposal.error or '')})"
        if paid is not None and paid.from_cache(proposal):
            mark += " [dim](cached answer)[/dim]"
        console.print(f"  {index}. {mark} {escape(proposal.edit.summary(100))}", highlight=False)
    if client is not None:
        console.print(_usage_line(client), highlight=False)
    if usable == 0:
        why = ""
        if context.result is not None and context.result.status in (EvalStatus.COMPILE_ERROR, EvalStatus.REJECTED):
            why = f": {kernel} does not build; `optiml eval {task} {kernel} --compile-only` shows why"
        if not proposals and proposer == "structural":
            from optiml.propose.structural import read_marker

            why = (
                f": {kernel} is not a template kernel (no OptiML plan marker), which is all the structural "
                "proposer edits; try --proposer heuristic"
                if read_marker(source.code) is None
                else f": the structural proposer found no move from {kernel}'s plan for this task"
            )
        err_console.print(f"[red]error:[/red] no usable proposal{escape(why)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _with_compile_check(context: ProposalContext) -> ProposalContext:
    """The context with the current kernel compiled (no GPU needed), so the heuristic proposer knows whether it
    builds; unchanged, with a note, where there is no nvcc."""
    from dataclasses import replace

    from optiml.session import check_compiles

    try:
        with waiting(console, "compiling the current kernel (edits of a kernel that does not build are of no use)"):
            result = check_compiles(context.task, context.kernel)
    except OptimlError as exc:  # no nvcc: the proposals stand, unchecked
        err_console.print(f"[yellow]the current kernel was not compiled[/yellow]: {escape(str(exc))}", highlight=False)
        return context
    if not result.ok:
        err_console.print(f"[red]the current kernel does not build[/red]: {escape(result.feedback())}", highlight=False)
    return replace(context, result=result)


def _usage_line(client: LLMClient) -> str:
    """What the LLM calls of one command cost: answers, the cached ones, tokens, dollars."""
    usage = client.usage
    cached = f" ({usage.cached_calls} from the cache, free)" if usage.cached_calls else ""
    price = client.config.price
    cost = f"${usage.cost_usd:.4f}" if price is not None else f"$0 (no price known for {client.config.model})"
    answers = f"{usage.calls} answer{'' if usage.calls == 1 else 's'}"
    calls = f"{usage.api_calls} API call{'' if usage.api_calls == 1 else 's'}"
    return f"LLM: {answers}{cached}, {calls}, {usage.input_tokens:,} tokens in, {usage.output_tokens:,} out, {cost}"


def _with_evidence(context: ProposalContext) -> ProposalContext:
    """The context with the current kernel's evidence and the target GPU: compiled (compile result and
    ptxas resources per kernel) and, where a GPU is visible, verified and timed too."""
    from dataclasses import replace

    from optiml.evaluate.evaluator import compile_check
    from optiml.kernel.compiler import DEFAULT_ARCH
    from optiml.propose.target import probe_target
    from optiml.session import SessionOptions, make_compiler, make_evaluator

    try:
        compiler = make_compiler(context.task)
    except OptimlError as exc:  # no nvcc: the LLM still gets the kernel, without compile evidence
        err_console.print(f"[yellow]no compile evidence for the LLM[/yellow]: {exc}", highlight=False)
        return replace(context, target=probe_target(DEFAULT_ARCH))
    with waiting(console, "compiling the current kernel (its ptxas resources go to the LLM)"):
        result = compile_check(context.task, context.kernel, compiler)
    target = probe_target(compiler.arch)
    if result.ok and target.sm_count is not None:  # a GPU is visible: verify and time it as well
        try:
            status = waiting(console, "verifying and timing the current kernel on the GPU")
            with status, make_evaluator(context.task, SessionOptions(), compiler=compiler) as evaluator:
                result = evaluator.evaluate(context.kernel)
                if evaluator.facts is not None:
                    target = probe_target(compiler.arch, evaluator.facts.bandwidth)
        except OptimlError as exc:
            err_console.print(f"[yellow]the kernel was not run[/yellow]: {exc}", highlight=False)
    console.print(f"current kernel: {result.feedback().splitlines()[0]}", highlight=False)
    return replace(context, result=result, target=target)


@app.command("optimize")
@reports_errors
def optimize_cmd(
    task: TaskArg,
    kernel: Annotated[
        Path | None,
        typer.Option(
            "--kernel", "-k", help="Starting kernel (default: the fastest of the template kernels and the shipped one)."
        ),
    ] = None,
    strategy: Annotated[str, typer.Option(help="greedy | mcts | best-of-n")] = "greedy",
    evaluations: Annotated[int, typer.Option("--evals", help="Evaluation budget.")] = 60,
    minutes: Annotated[float, typer.Option(help="Wall-time budget in minutes.")] = 30.0,
    budget_usd: BudgetUsdOpt = None,
    max_llm_calls: MaxLlmCallsOpt = None,
    max_llm_tokens: MaxLlmTokensOpt = None,
    allow_unpriced: AllowUnpricedOpt = False,
    proposer: ProposerOpt = "auto",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Where to write the best kernel (default: <task>.best.cu).")
    ] = None,
    torch_compile: Annotated[bool, typer.Option("--compile", help="Also compare with torch.compile.")] = False,
    no_profile: Annotated[bool, typer.Option("--no-profile", help="Skip Nsight Compute profiling.")] = False,
    profile_margin: Annotated[
        float,
        typer.Option(help="Profile verified candidates within this fraction of the best time (0.1 = 10 %)."),
    ] = 0.10,
    store: StoreOpt = DEFAULT_STORE,
    seed: Annotated[int, typer.Option(help="Seed for proposers and tie-breaks.")] = 0,
    arch: Annotated[str | None, typer.Option(help="nvcc -arch (default: detect).")] = None,
    gpus: Annotated[
        str | None,
        typer.Option(help="Evaluate on these GPUs ('all', or indices like 0,1); times in the first's units."),
    ] = None,
    llm_model: LlmModelOpt = None,
    llm_base_url: LlmUrlOpt = None,
    user_clock: Annotated[
        bool,
        typer.Option(
            "--user-clock/--no-user-clock",
            help="Then run the best kernel as an exported ModelNew in a fresh process, as KernelBench does: its "
            "correctness check and its speedups there (the user's clock), beside eager and torch.compile "
            "(with --compile) in that process.",
        ),
    ] = True,
) -> None:
    """Optimize TASK's kernel by search under verification; writes the best verified kernel."""
    _check_search_flags(evaluations, minutes, proposer, strategy=strategy)
    require_arch(arch)
    require_number("--budget-usd", budget_usd, positive=False, unit="USD")
    require_number("--profile-margin", profile_margin, positive=False)
    if kernel is not None:
        require_task_and_kernel(task, kernel)
    else:
        require_task_file(task)
    if out is not None:
        check_output(out)
    require_store_file(store)
    require_gpu("a search", instead=COMPILE_ONLY_HINT)
    require_nvcc()
    with waiting(console, f"loading PyTorch and {task}"):
        from optiml.cli.views.search import render_summary
        from optiml.cli.views.workflow import ConsoleView
        from optiml.kernel.source import KernelSource
        from optiml.report.llm_spend import load_run_spend
        from optiml.search import Budgets, SearchConfig
        from optiml.session import SessionOptions, open_session
        from optiml.store import new_run_id
        from optiml.task import load_task
        from optiml.workflow import Workflow

        loaded = load_task(task)
    target = check_output(out or Path(f"{loaded.name}.best.cu"))  # now, not after a long search
    run_id = new_run_id()  # known up front: the run's LLM calls (generation included) carry it
    devices = parse_gpus(gpus) if gpus is not None else ()
    options = SessionOptions(
        arch=arch,
        torch_compile=torch_compile,
        profile=not no_profile,
        proposer=proposer,
        seed=seed,
        store_path=store,
        gpus=devices,
        llm_overrides=llm_overrides(
            llm_model,
            llm_base_url,
            budget_usd,
            max_calls=max_llm_calls,
            max_tokens=max_llm_tokens,
            allow_unpriced=allow_unpriced,
        ),
    )
    config = SearchConfig(
        strategy=strategy,
        profile_margin=profile_margin,
        # one evaluation compiling while each GPU times one: every GPU of the pool stays busy
        parallel_evaluations=max(SearchConfig.parallel_evaluations, len(devices) + 1),
        budgets=Budgets(
            max_evaluations=evaluations,
            max_seconds=minutes * 60,
            max_cost_usd=budget_usd,
            max_llm_calls=max_llm_calls,
            max_llm_tokens=max_llm_tokens,
        ),
    )
    root = KernelSource.from_file(kernel) if kernel is not None else None  # else generated (templates, LLM)
    view = ConsoleView(console, err=err_console, store=store)
    with open_session(loaded, options, run_label=run_id) as session:  # prepare → root → search
        outcome = Workflow(session, view).optimize(root, store, config, run_id=run_id)
    console.print(render_summary(outcome, load_run_spend(store, outcome.run_id)))
    write_output(target, outcome.best_kernel.to_file_text())
    console.print(
        f"best kernel written to [bold]{target}[/bold] (run {outcome.run_id}; `optiml show {outcome.run_id}`)"
    )
    if user_clock:  # after the session: the judge's worker and its GPU memory are gone
        from optiml.bench.user_clock import UserClockOptions, eval_block
        from optiml.cli.views.evaluation import user_clock_line

        with waiting(err_console, "exporting the best kernel and running it in a fresh process, as KernelBench does"):
            measured = eval_block(
                loaded,
                outcome.best_kernel,
                judge_ms=outcome.best_timing.median_ms,
                options=UserClockOptions(torch_compile=torch_compile),
                store=store,
            )
        console.print(user_clock_line(measured), highlight=False)


@app.command("resume")
@reports_errors
def resume_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id (see `optiml runs`).")],
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
    _check_search_flags(evaluations, minutes, proposer)
    if out is not None:
        check_output(out)
    _require_store(store)  # opening a missing store would create an empty one
    require_gpu("a search", instead=COMPILE_ONLY_HINT)
    require_nvcc()
    with waiting(console, "loading PyTorch and the search"):  # PyTorch comes with them: seconds
        from optiml.cli.views.search import render_summary
        from optiml.cli.views.workflow import ConsoleView
        from optiml.report.llm_spend import load_run_spend
        from optiml.search import Budgets, SearchConfig
        from optiml.session import SessionOptions, open_session
        from optiml.store import RunStore
        from optiml.task import load_task
        from optiml.workflow import Workflow

    with RunStore(store) as run_store:
        run = run_store.get_run(run_id)
        loaded = load_task(run.task_path)
        target = check_output(out or Path(f"{loaded.name}.best.cu"))
        budgets = None
        if evaluations is not None or minutes is not None:
            base = SearchConfig.from_json(run.config_json).budgets
            budgets = Budgets(
                max_evaluations=evaluations if evaluations is not None else base.max_evaluations,
                max_seconds=minutes * 60 if minutes is not None else base.max_seconds,
                max_cost_usd=base.max_cost_usd,
                max_llm_calls=base.max_llm_calls,
                max_llm_tokens=base.max_llm_tokens,
            )
        options = SessionOptions(
            profile=not no_profile,
            proposer=proposer,
            store_path=store,
            llm_overrides=llm_overrides(llm_model, llm_base_url),
        )
        view = ConsoleView(console, err=err_console, store=store, notes=False)
        with open_session(loaded, options, run_label=run_id) as session:  # prepare → the stored run, continued
            outcome = Workflow(session, view).resume(run_store, run_id, budgets)
    console.print(render_summary(outcome, load_run_spend(store, outcome.run_id)))
    write_output(target, outcome.best_kernel.to_file_text())
    console.print(f"best kernel written to [bold]{target}[/bold]")


@app.command("runs")
@reports_errors
def runs_cmd(store: StoreOpt = DEFAULT_STORE) -> None:
    """List the runs in the store."""
    _require_store(store)
    with waiting(console, "loading the run store's reader"):  # PyTorch comes with them: seconds
        from optiml.cli.views.runs import render_runs
        from optiml.search import list_runs
        from optiml.store import RunStore

    with RunStore(store) as run_store:
        runs = list_runs(run_store)
    if not runs:
        console.print(
            f"no runs yet in {store}: `optiml optimize TASK` starts one (tasks/ holds starter tasks), "
            "or pass --store to read another store",
            highlight=False,
        )
        return
    console.print(render_runs(runs))


@app.command("show")
@reports_errors
def show_cmd(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id (see `optiml runs`).")],
    store: StoreOpt = DEFAULT_STORE,
    kernel_out: Annotated[Path | None, typer.Option("--kernel-out", help="Also write the best kernel here.")] = None,
) -> None:
    """Show a run's best kernel path: each edit, why, and what it gained; and its LLM calls, tokens and
    cost, per verified candidate too."""
    if kernel_out is not None:
        check_output(kernel_out)
    _require_store(store)
    with waiting(console, "loading the run store's reader"):  # PyTorch comes with them: seconds
        from optiml.cli.views.runs import render_run_path
        from optiml.report.llm_spend import load_run_spend
        from optiml.search import best_path
        from optiml.store import RunStore

    with RunStore(store) as run_store:
        path = best_path(run_store, run_id)
    console.print(render_run_path(path, load_run_spend(store, path.run.id)))
    if kernel_out is not None:
        write_output(kernel_out, path.best_kernel.to_file_text())
        console.print(f"best kernel written to {kernel_out}", highlight=False)


def _check_search_flags(evaluations: int | None, minutes: float | None, proposer: str, strategy: str = "") -> None:
    """The budgets and choices of optimize and resume, named by their flags, before anything is loaded."""
    require_at_least("--evals", evaluations, what="the evaluation budget, the root included")
    require_number("--minutes", minutes, unit="minutes")
    if strategy:
        require_choice("--strategy", strategy, STRATEGIES)
    require_choice("--proposer", proposer, SEARCH_PROPOSERS)


def _require_store(store: Path) -> None:
    require_store_file(store)
    if not store.exists():
        raise StoreError(f"{store}: no run store yet (run `optiml optimize` first, or pass --store)")
