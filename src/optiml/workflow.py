"""The one optimize workflow: prepare → root → search, over the parts of one :class:`~optiml.session.Session`.

``optiml optimize`` runs all of it, ``optiml resume`` prepares and continues a stored run, ``optiml
bench`` runs it once per task (each on its GPU thread's worker, with the offline proposer), and
``optiml generate`` (from a reference, no LLM) runs its first two steps: the steps and their order are
written here once. :mod:`optiml.session` assembles the parts (compiler, evaluator and its cache,
profiler, proposers, LLM client); a command only chooses the options and shows the steps through a
:class:`WorkflowView`, whose default shows nothing (a bench, a test).

1. **Prepare** (:meth:`Workflow.prepare`): the judge builds the task's inputs and reference outputs and
   times the references — no GPU or a broken reference fails here, before a run is stored; the
   profiler starts writing its case in the background. At PyTorch's default precision the judge also
   measures which convolutions cuDNN rounds to TF32 (:mod:`optiml.conv_arithmetic`): the task the later
   steps plan carries that, so its kernels round as the reference did.
2. **Root** (:meth:`Workflow.root`, or :meth:`Workflow.root_candidates` and :meth:`RootCandidates.choose`):
   the template kernels and the kernel the task ships (:mod:`optiml.generate.offline`) and, with an
   LLM, the Mixture-of-Thoughts generation (:mod:`optiml.generate.root`); the fastest verified one.
3. **Search** (:meth:`Workflow.search`, :meth:`Workflow.resume`): from the root under the budgets,
   each candidate judged through the session's cost function, the run recorded in the run store.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

from optiml.evaluate.evaluator import TaskFacts
from optiml.generate.offline import OfflineRoot, generate_offline_root
from optiml.generate.root import LLMRoot, Root, choose_root, llm_root
from optiml.generate.store import GenerationStore
from optiml.kernel.source import KernelSource
from optiml.search import Budgets, SearchConfig, SearchOutcome, resume_search, run_search
from optiml.search.events import EventSink
from optiml.session import Session
from optiml.store import RunStore
from optiml.task import Task

#: Template configurations tried for the root (the planner's rule first).
ROOT_SEEDS = 4


class WorkflowView:
    """What a command shows while the workflow runs. Every hook does nothing here; the CLI's view
    (``optiml.cli.views.workflow``) shows spinners, the root candidates and the live search."""

    def preparing(self) -> AbstractContextManager[object]:
        """Around step 1 (inputs, reference outputs, reference timing)."""
        return contextlib.nullcontext()

    def prepared(self, facts: TaskFacts) -> None:
        """Step 1 is done: what the judge measured, and how it judges the task (``facts.notes``)."""

    def making_offline_root(self) -> AbstractContextManager[object]:
        """Around the template kernels' (and the shipped kernel's) evaluation."""
        return contextlib.nullcontext()

    def offline_root(self, outcome: OfflineRoot) -> None:
        """The template and shipped candidates, each with its verdict."""

    def generated_root(self, generated: LLMRoot) -> None:
        """The LLM's generation (only when the session has an LLM client)."""

    def root_chosen(self, root: Root) -> None:
        """The root the search starts from."""

    def searching(self, session: Session, config: SearchConfig | None) -> AbstractContextManager[EventSink | None]:
        """Around step 3 (``config`` None: a resumed run's own); what it yields receives the search's events."""
        return contextlib.nullcontext()


@dataclass(frozen=True)
class RootCandidates:
    """Step 2's outcome: the offline candidates and, when an LLM was asked, its generation."""

    task: Task
    offline: OfflineRoot
    generated: LLMRoot | None = None

    def choose(self) -> Root:
        """The fastest verified of them; :class:`~optiml.errors.OptimlError` saying how to get one, else."""
        return choose_root(self.task, self.offline, self.generated)


class Workflow:
    """The steps of optimizing ``session.task`` (see the module docstring), in order, once each."""

    def __init__(self, session: Session, view: WorkflowView | None = None) -> None:
        self.session = session
        self.task = session.task
        self.view = view or WorkflowView()

    def prepare(self) -> TaskFacts:
        """Step 1. Raises what the judge raises (no GPU, a broken reference)."""
        with self.view.preparing():
            facts = self.session.evaluator.prepare()
        if facts.convolutions:  # the kernels planned from here on round as cuDNN did, convolution by convolution
            self.task = replace(self.task, convolution_arithmetic=tuple(sorted(facts.convolutions.items())))
        if self.session.profiler is not None:
            self.session.profiler.prepare()  # the profiled case is written while the root is made and judged
        self.view.prepared(facts)
        return facts

    def root_candidates(self, generation_store: Path | None = None, seeds: int = ROOT_SEEDS) -> RootCandidates:
        """Step 2 without the choice: ``seeds`` template configurations and the shipped kernel, judged
        together; with an LLM client, its generation too (recorded in ``generation_store``, the run
        store's file)."""
        path = self.task.naive_kernel_path
        naive = KernelSource.from_file(path) if path is not None else None
        with self.view.making_offline_root():
            offline = generate_offline_root(self.task, self.session.costs, seeds=seeds, naive=naive)
        self.view.offline_root(offline)
        generated = None
        if self.session.llm is not None:
            if generation_store is None:
                raise ValueError("an LLM generation is recorded: pass the generation store")
            store = GenerationStore(generation_store)
            generated = llm_root(self.task, self.session.llm, self.session.costs, store)
            self.view.generated_root(generated)
        return RootCandidates(self.task, offline, generated)

    def root(self, generation_store: Path | None = None, seeds: int = ROOT_SEEDS) -> Root:
        """Step 2: the fastest verified root candidate (raises, saying how to get one, when none verified)."""
        chosen = self.root_candidates(generation_store, seeds).choose()
        self.view.root_chosen(chosen)
        return chosen

    def search(
        self, root: KernelSource, store_path: Path, config: SearchConfig, run_id: str | None = None
    ) -> SearchOutcome:
        """Step 3: a new run from ``root`` in the run store at ``store_path`` (``run_id``: a fresh one when None)."""
        session = self.session
        with RunStore(store_path) as run_store, self.view.searching(session, config) as on_event:
            return run_search(
                self.task,
                root,
                session.costs,
                session.proposers,
                session.profiler,
                run_store,
                config,
                on_event=on_event,
                run_id=run_id,
            )

    def optimize(
        self, root: KernelSource | None, store_path: Path, config: SearchConfig, run_id: str | None = None
    ) -> SearchOutcome:
        """All three steps (``optiml optimize``): ``root`` None is made in step 2, the LLM's generation
        recorded in the run store at ``store_path``."""
        self.prepare()
        if root is None:
            root = self.root(store_path).kernel
        return self.search(root, store_path, config, run_id)

    def resume(self, run_store: RunStore, run_id: str, budgets: Budgets | None = None) -> SearchOutcome:
        """Prepare, then continue the stored run ``run_id`` (``optiml resume``); nothing evaluated before
        is evaluated again. ``budgets`` replaces the run's own."""
        self.prepare()
        session = self.session
        with self.view.searching(session, None) as on_event:
            return resume_search(
                run_store,
                run_id,
                session.costs,
                session.proposers,
                session.profiler,
                on_event,
                task=self.task,
                budgets=budgets,
            )
