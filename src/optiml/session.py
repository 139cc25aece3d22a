"""The one assembler: compiler, evaluator, profiler, proposers and LLM client of a command.

The CLI stays thin: it parses options into :class:`SessionOptions`, asks this module for the
parts (or a ready :class:`Session`), runs them through :mod:`optiml.workflow` (prepare → root →
search) and presents what comes back. No command, and no other part, builds a `Compiler`,
`Evaluator`, `EvaluationCache`, worker or `Profiler` itself (``tests/test_architecture.py``).
Nothing here reads the environment except through :func:`optiml.llm.load_llm_config`, which
documents its precedence (flags > env > optiml.toml).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from optiml.errors import ConfigError
from optiml.evaluate.client import WorkerClient
from optiml.evaluate.config import ISOLATIONS, EvalConfig, isolation_policy
from optiml.evaluate.cost import EvaluationCache
from optiml.evaluate.evaluator import Evaluator, compile_check
from optiml.evaluate.gpu_pool import GPUPool
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.llm import LLMCallStore, LLMClient, LLMConfig, load_llm_config
from optiml.propose.base import Proposer
from optiml.propose.factory import make_proposer
from optiml.store import DEFAULT_DB_PATH
from optiml.task import Task
from optiml.values import EvalResult

if TYPE_CHECKING:  # the profiler loads on first use
    from optiml.profile import Diagnosis, ProfileConfig, Profiler, ProfileReport

PROPOSER_CHOICES = ("auto", "heuristic", "llm", "mix")


@dataclass(frozen=True)
class SessionOptions:
    arch: str | None = None
    torch_compile: bool = False
    profile: bool = True
    proposer: str = "auto"  # auto: offline + LLM when one is configured, else offline alone
    seed: int = 0
    store_path: Path = DEFAULT_DB_PATH
    llm_overrides: dict[str, object] = field(default_factory=dict)
    llm_toml: Path | None = None
    #: CUDA devices one search evaluates on (empty: the default GPU); several: a GPUPool, in the first's units
    gpus: tuple[int, ...] = ()


class LockedProfiler:
    """The profiler, built on first use (once the evaluator knows the task's bytes) and sharing the
    evaluator's GPU lock: it holds it for its GPU work only (each ncu launch from when its target is
    ready), so ncu never runs during a timing while ncu's own start overlaps them."""

    def __init__(self, task: Task, evaluator: Evaluator, config: ProfileConfig | None = None) -> None:
        self._task = task
        self._evaluator = evaluator
        self._config = config
        self._profiler: Profiler | None = None

    def prepare(self) -> None:
        """Start what the first diagnosis needs (the light target's case) in the background; call it
        once the evaluator is prepared, as the search starts."""
        self.profiler().write_case_in_background()

    def close(self) -> None:
        """Delete the profiler's case files (they are as large as the task's inputs)."""
        if self._profiler is not None:
            self._profiler.close()

    def diagnose(self, kernel: KernelSource, result: EvalResult) -> Diagnosis:
        return self.profiler().diagnose(kernel, result)

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[Diagnosis]:
        """Several candidates in one ncu launch (the search batches those that wait)."""
        return list(self.profiler().diagnose_many(items))

    def report(self, kernel: KernelSource, result: EvalResult) -> ProfileReport:
        """The evaluated ``kernel``'s profile report (``optiml profile``)."""
        from optiml.profile import build_report

        return build_report(self.profiler(), kernel, result)

    def profiler(self) -> Profiler:
        if self._profiler is None:
            from optiml.profile import ProfileConfig, Profiler

            facts = self._evaluator.facts
            io_bytes = facts.input_bytes + facts.output_bytes if facts is not None else None
            config = self._config or ProfileConfig()
            self._profiler = Profiler(
                self._task, self._evaluator.compiler, config, io_bytes=io_bytes, gpu_lock=self._evaluator.gpu_lock
            )
        return self._profiler


def llm_config(options: SessionOptions) -> LLMConfig:
    return load_llm_config(options.llm_toml, overrides=options.llm_overrides or None)


def make_llm_client(config: LLMConfig, store_path: Path, run_id: str | None = None) -> LLMClient:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    return LLMClient(config, store=LLMCallStore(store_path), run_id=run_id, close_store=True)


def choose_proposers(kind: str, client: LLMClient | None, seed: int) -> list[Proposer]:
    """The proposer mixture for ``--proposer``; ``llm``/``mix`` without a configured LLM is an error."""
    if kind not in PROPOSER_CHOICES:
        raise ConfigError(f"unknown proposer {kind!r}; choose one of {', '.join(PROPOSER_CHOICES)}")
    if kind == "heuristic" or (kind == "auto" and client is None):
        return [make_proposer("offline", seed=seed)]
    llm = make_proposer("llm", client=client)
    return [llm] if kind == "llm" else [llm, make_proposer("offline", seed=seed)]


def make_compiler(task: Task | None, arch: str | None = None) -> Compiler:
    """nvcc for ``arch`` (None: the detected GPU's, else the default), linking the libraries ``task``
    allows; ``task`` None: no library, one compiler (and its cache) shared by the tasks of a bench."""
    return Compiler(CompilerConfig(arch=arch, libraries=task.meta.libraries if task is not None else ()))


def eval_config(options: SessionOptions, seeds: int = EvalConfig.seeds, screen: bool = True) -> EvalConfig:
    """How candidates are verified and timed: the references are eager, and torch.compile with --compile;
    candidates confined as ``OPTIML_ISOLATION`` says (``best_effort``, the default, or ``required``)."""
    modes = ("eager", "compile") if options.torch_compile else ("eager",)
    isolation = isolation_policy()
    if isolation not in ISOLATIONS:
        raise ConfigError(f"OPTIML_ISOLATION must be one of {', '.join(ISOLATIONS)}, not {isolation!r}")
    return EvalConfig(seeds=seeds, reference_modes=modes, screen=screen, isolation=isolation)


def make_worker(gpu: int | None = None) -> WorkerClient:
    """The judge's worker for CUDA device ``gpu`` (None: the default GPU), started on its first request."""
    return WorkerClient(gpu=gpu)


def make_evaluator(
    task: Task,
    options: SessionOptions,
    config: EvalConfig | None = None,
    compiler: Compiler | None = None,
    worker: WorkerClient | None = None,
) -> Evaluator:
    """An evaluator for ``task`` (a context manager: it owns a GPU worker until closed); ``worker``: one
    the caller keeps across tasks (a bench thread's), else a fresh one on the default GPU."""
    compiler = compiler or make_compiler(task, options.arch)
    return Evaluator(task, config or eval_config(options), compiler=compiler, worker=worker)


def make_gpu_evaluators(task: Task, options: SessionOptions) -> list[Evaluator]:
    """One evaluator per GPU of ``options.gpus`` (one for the default GPU when none is given), all
    sharing one compiler and its cache; the first is the primary (see :mod:`optiml.evaluate.gpu_pool`)."""
    compiler = make_compiler(task, options.arch)
    if not options.gpus:
        return [make_evaluator(task, options, compiler=compiler)]
    config = eval_config(options)
    return [Evaluator(task, config, compiler=compiler, worker=make_worker(gpu)) for gpu in options.gpus]


def check_compiles(task: Task, kernel: KernelSource, arch: str | None = None, screen: bool = True) -> EvalResult:
    """Screen and compile only (no GPU): ``optiml eval --compile-only``."""
    return compile_check(task, kernel, make_compiler(task, arch), screen=screen)


def make_profiler(task: Task, evaluator: Evaluator, config: ProfileConfig | None = None) -> LockedProfiler:
    """A profiler sharing ``evaluator``'s GPU lock. Without ncu it still gives static evidence."""
    return LockedProfiler(task, evaluator, config)


@contextlib.contextmanager
def open_session(task: Task, options: SessionOptions, run_label: str | None = None) -> Iterator[Session]:
    """Evaluator, profiler, LLM client and proposers for one run; closes them all on exit."""
    config = llm_config(options)
    client = make_llm_client(config, options.store_path, run_label) if config.is_configured else None
    if options.proposer in ("llm", "mix") and client is None:
        config.require_configured()
    members = make_gpu_evaluators(task, options)
    evaluator = members[0]
    costs = EvaluationCache(GPUPool(members, [f"GPU {g}" for g in options.gpus]) if len(members) > 1 else evaluator)
    profile = None
    if options.gpus:  # ncu profiles on the primary GPU, where the search's references were timed
        from optiml.profile import ProfileConfig

        profile = ProfileConfig(gpu=options.gpus[0])
    profiler = make_profiler(task, evaluator, profile) if options.profile else None
    try:
        session = Session(
            task=task,
            evaluator=evaluator,
            costs=costs,
            profiler=profiler,
            proposers=choose_proposers(options.proposer, client, options.seed),
            llm=client,
        )
        yield session
    finally:
        if profiler is not None:
            profiler.close()
        for member in members:
            member.close()
        if client is not None:
            client.close()


def offline_session(evaluator: Evaluator, seed: int = 0) -> Session:
    """A session over an evaluator built already — a bench task's on its thread's worker, the templates'
    root of ``optiml generate`` — with its cache, the offline proposer, no profiler and no LLM. The caller
    keeps closing the evaluator (a bench keeps its worker for the next task)."""
    return Session(
        task=evaluator.task,
        evaluator=evaluator,
        costs=EvaluationCache(evaluator),
        profiler=None,
        proposers=[make_proposer("offline", seed=seed)],
        llm=None,
    )


@dataclass
class Session:
    task: Task
    evaluator: Evaluator  # prepare, the GPU lock, closing: the evaluator itself
    costs: EvaluationCache  # what generation and the search ask: a source is judged once per command
    profiler: LockedProfiler | None
    proposers: Sequence[Proposer]
    llm: LLMClient | None

    @property
    def proposer_names(self) -> list[str]:
        return [p.name for p in self.proposers]
