"""Assembling the parts of a run for the CLI: evaluator, profiler, proposers, LLM.

The CLI stays thin: it parses options into :class:`SessionOptions` and asks this module for a
ready :class:`Session`. Nothing here reads the environment except through
:func:`optiml.llm.load_llm_config`, which documents its precedence (flags > env > optiml.toml).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optiml.errors import ConfigError
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.results import EvalResult
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.llm import LLMCallStore, LLMClient, LLMConfig, load_llm_config
from optiml.propose.base import Proposer
from optiml.propose.factory import make_proposer
from optiml.store import DEFAULT_DB_PATH
from optiml.task import Task

PROPOSER_CHOICES = ("auto", "heuristic", "llm", "mix")


@dataclass(frozen=True)
class SessionOptions:
    arch: str | None = None
    torch_compile: bool = False
    profile: bool = True
    proposer: str = "auto"  # auto: offline + LLM when one is configured, else offline alone
    seed: int = 0
    store_path: Path = DEFAULT_DB_PATH
    llm_overrides: dict[str, Any] = field(default_factory=dict)
    llm_toml: Path | None = None


class LockedProfiler:
    """The profiler, built on first use (once the evaluator knows the task's bytes) and holding the
    evaluator's GPU lock, so ncu never runs during a timing."""

    def __init__(self, task: Task, evaluator: Evaluator) -> None:
        self._task = task
        self._evaluator = evaluator
        self._profiler: Any = None

    def diagnose(self, kernel: KernelSource, result: EvalResult) -> Any:
        with self._evaluator.gpu_lock:
            return self.profiler().diagnose(kernel, result)

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[Any]:
        """Several candidates in one ncu launch (the search batches those that wait)."""
        with self._evaluator.gpu_lock:
            return list(self.profiler().diagnose_many(items))

    def profiler(self) -> Any:
        if self._profiler is None:
            from optiml.profile import ProfileConfig, Profiler

            facts = self._evaluator.facts
            io_bytes = facts.input_bytes + facts.output_bytes if facts is not None else None
            self._profiler = Profiler(self._task, self._evaluator.compiler, ProfileConfig(), io_bytes=io_bytes)
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


def make_evaluator(task: Task, options: SessionOptions, config: EvalConfig | None = None) -> Evaluator:
    modes = ("eager", "compile") if options.torch_compile else ("eager",)
    eval_config = config or EvalConfig(reference_modes=modes)
    compiler = Compiler(CompilerConfig(arch=options.arch, libraries=task.meta.libraries))
    return Evaluator(task, eval_config, compiler=compiler)


def make_profiler(task: Task, evaluator: Evaluator, enabled: bool) -> LockedProfiler | None:
    """A GPU-lock-sharing profiler; None when disabled. Without ncu it still gives static evidence."""
    return LockedProfiler(task, evaluator) if enabled else None


@contextlib.contextmanager
def open_session(task: Task, options: SessionOptions, run_label: str | None = None) -> Iterator[Session]:
    """Evaluator, profiler, LLM client and proposers for one run; closes them all on exit."""
    config = llm_config(options)
    client = make_llm_client(config, options.store_path, run_label) if config.is_configured else None
    if options.proposer in ("llm", "mix") and client is None:
        config.require_configured()
    evaluator = make_evaluator(task, options)
    try:
        session = Session(
            task=task,
            evaluator=evaluator,
            profiler=make_profiler(task, evaluator, options.profile),
            proposers=choose_proposers(options.proposer, client, options.seed),
            llm=client,
        )
        yield session
    finally:
        evaluator.close()
        if client is not None:
            client.close()


@dataclass
class Session:
    task: Task
    evaluator: Evaluator
    profiler: LockedProfiler | None
    proposers: Sequence[Proposer]
    llm: LLMClient | None

    @property
    def proposer_names(self) -> list[str]:
        return [p.name for p in self.proposers]
