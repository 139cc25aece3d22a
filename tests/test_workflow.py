"""The one optimize workflow (optiml.workflow) on a CPU: its steps in order, shown through a view, over a
session's parts; and optiml bench's job running it over the session's assembly (issue 42)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import optiml.session
from optiml.bench.runner import BenchConfig, optimize_job
from optiml.errors import ConfigError
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.cost import CostFunction, EvaluationCache
from optiml.evaluate.evaluator import TaskFacts
from optiml.graph.capture import capture_all
from optiml.kernel.source import KernelSource
from optiml.search import Budgets, SearchConfig
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.session import Session
from optiml.store import RunStore
from optiml.task import Task, load_task
from optiml.values import EvalResult, EvalStatus, TimingStats, VerifyReport
from optiml.workflow import Workflow, WorkflowView

ROOT = Path(__file__).resolve().parents[1]
FACTS = TaskFacts(
    input_bytes=1 << 20,
    output_bytes=1 << 20,
    flops=None,
    bandwidth=2e12,
    prepare_seconds=0.1,
    prepare_steps={"sensitivity": 0.02, "reference eager": 0.07},
)


class Recorder(WorkflowView):
    """Every hook the workflow calls, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.events = 0

    @contextlib.contextmanager
    def _around(self, step: str) -> Iterator[None]:
        self.seen.append(f"{step} begins")
        yield
        self.seen.append(f"{step} ends")

    def preparing(self) -> contextlib.AbstractContextManager[object]:
        return self._around("prepare")

    def prepared(self, facts: TaskFacts) -> None:
        self.seen.append("prepared")

    def making_offline_root(self) -> contextlib.AbstractContextManager[object]:
        return self._around("templates")

    def offline_root(self, outcome: Any) -> None:
        self.seen.append(f"offline root: {len(outcome.candidates)} candidates")

    def root_chosen(self, root: Any) -> None:
        self.seen.append(f"root: {root.label}")

    @contextlib.contextmanager
    def searching(self, session: Session, config: SearchConfig | None) -> Iterator[Any]:
        self.seen.append("search begins" if config is not None else "resume begins")

        def sink(event: Any) -> None:
            self.events += 1

        yield sink
        self.seen.append("search ends")


class PreparedLandscape(LandscapeEvaluator):
    """The search's synthetic landscape as the session's evaluator: it prepares like the judge."""

    def __init__(self, task: Task, log: list[str]) -> None:
        super().__init__(Landscape(seed=3))
        self.task, self.log = task, log

    def prepare(self) -> TaskFacts:
        self.log.append("evaluator prepared")
        return FACTS


class Profiled:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def prepare(self) -> None:
        self.log.append("profiler prepared")

    def diagnose_many(self, items: Sequence[Any]) -> list[None]:
        return [None for _ in items]


def landscape_session(log: list[str]) -> Session:
    task = load_task(ROOT / "tasks" / "silu.py")
    evaluator = PreparedLandscape(task, log)
    return Session(task, evaluator, EvaluationCache(evaluator), Profiled(log), [KnobProposer(seed=1)], None)  # type: ignore[arg-type]


def test_optimize_prepares_then_searches_from_the_given_root_and_stores_the_run(tmp_path: Path) -> None:
    log: list[str] = []
    session, view, store = landscape_session(log), Recorder(), tmp_path / "runs.db"
    config = SearchConfig(budgets=Budgets(max_evaluations=8, max_seconds=60))
    outcome = Workflow(session, view).optimize(landscape_kernel(), store, config, run_id="run-1")
    assert log == ["evaluator prepared", "profiler prepared"]  # the profiler's case after the judge's
    assert view.seen == ["prepare begins", "prepare ends", "prepared", "search begins", "search ends"]
    assert view.events > 0  # the view's sink received the search's events
    assert outcome.run_id == "run-1" and outcome.evaluations <= 8 and outcome.best_timing.median_ms > 0
    with RunStore(store) as runs:
        assert runs.get_run("run-1").task_name == "silu"

    resumed = Recorder()  # the same run continued with a larger budget: prepared again, no new run
    more = Budgets(max_evaluations=12, max_seconds=60)
    with RunStore(store) as runs:
        again = Workflow(landscape_session(log), resumed).resume(runs, "run-1", more)
    assert again.run_id == "run-1" and again.evaluations > outcome.evaluations
    assert resumed.seen == ["prepare begins", "prepare ends", "prepared", "resume begins", "search ends"]


class Judged(CostFunction):
    """Verifies every kernel; the shipped one at 2 ms, each template at 1 ms plus its order."""

    def __init__(self, task: Task, shipped: KernelSource) -> None:
        self.task, self.shipped = task, shipped
        self.batches: list[int] = []
        self.prepared = 0
        self._reference = {"eager": TimingStats.from_samples([3.0, 3.0, 3.0])}

    @property
    def reference(self) -> dict[str, TimingStats]:
        return self._reference

    def prepare(self) -> TaskFacts:
        self.prepared += 1
        return FACTS

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        return self.evaluate_many([kernel])[0]

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        self.batches.append(len(kernels))
        return [self._result(k) for k in kernels]

    def _result(self, kernel: KernelSource) -> EvalResult:
        ms = 2.0 if kernel.digest == self.shipped.digest else 1.0 + int(kernel.digest[:2], 16) / 1000
        timing = TimingStats.from_samples([ms, ms, ms])
        return EvalResult(EvalStatus.OK, "", kernel.digest, verify=VerifyReport(passed=True), timing=timing)

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        return [self._result(k).timing for k in kernels]  # type: ignore[misc]


def test_the_root_is_the_fastest_of_the_templates_and_the_shipped_kernel_judged_in_one_batch() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    assert task.naive_kernel_path is not None
    shipped = KernelSource.from_file(task.naive_kernel_path)
    judged, view = Judged(task, shipped), Recorder()
    flow = Workflow(optiml.session.offline_session(judged), view)  # type: ignore[arg-type]
    candidates = flow.root_candidates(seeds=2)
    assert judged.batches == [len(candidates.offline.candidates)]  # every candidate in one parallel batch
    assert candidates.generated is None  # no LLM in the session: none asked
    assert candidates.offline.candidates[-1].label == "shipped kernel"
    root = flow.root(seeds=2)  # again: the session's cache judges nothing twice
    assert judged.batches == [len(candidates.offline.candidates)]
    assert root.label.startswith("template ") and root.kernel == candidates.offline.best.kernel  # type: ignore[union-attr]
    assert view.seen[-1] == f"root: {root.label}" and view.seen[0] == "templates begins"


def test_a_session_with_an_llm_needs_the_store_its_generation_is_recorded_in() -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    judged = Judged(task, KernelSource("// none"))
    session = optiml.session.offline_session(judged)  # type: ignore[arg-type]
    session.llm = object()  # type: ignore[assignment]
    with pytest.raises(ValueError, match="generation store"):
        Workflow(session).root_candidates(seeds=1)


class Worker:
    def __init__(self) -> None:
        self.stopped = 0

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert message == {"op": "hello"}
        return {"name": "Fake GPU"}

    def stop(self) -> None:
        self.stopped += 1


def test_the_bench_job_runs_the_workflow_over_the_sessions_assembly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """optiml bench builds nothing itself: one shared compiler and each task's evaluator come from the
    session (here stand-ins, no nvcc or GPU); prepare → templates and the shipped kernel → offline search."""
    built: list[tuple[str, Any]] = []
    task = load_task(ROOT / "tasks" / "silu.py")
    assert task.naive_kernel_path is not None
    judged = Judged(task, KernelSource.from_file(task.naive_kernel_path))

    def make_compiler(for_task: Task | None, arch: str | None = None) -> str:
        built.append(("compiler", for_task))
        return "the shared compiler"

    def make_evaluator(
        for_task: Task, options: Any, config: Any = None, compiler: Any = None, worker: Any = None
    ) -> Judged:
        built.append(("evaluator", (for_task.name, options.torch_compile, compiler, worker)))
        return judged

    monkeypatch.setattr(optiml.session, "make_compiler", make_compiler)
    monkeypatch.setattr(optiml.session, "make_evaluator", make_evaluator)
    job = optimize_job(BenchConfig(evaluations=10, seeds=2, torch_compile=False, user_clock=False), tmp_path)
    worker = Worker()
    row = job(task.path, worker, None)
    assert built == [("compiler", None), ("evaluator", ("silu", False, "the shared compiler", worker))]
    assert judged.prepared == 1 and worker.stopped == 0  # the bench thread keeps its worker for the next task
    assert row.status == "verified" and row.device == "Fake GPU" and row.root.startswith("template ")
    assert row.baselines_ms == {"eager": 3.0} and row.evaluations <= 10 and row.run_id
    assert list(row.phases_s) == ["prepare", "roots", "search"]  # no user clock asked for
    assert row.prepare_steps_s == {"sensitivity": 0.02, "reference eager": 0.07}  # the worker's, as it said them
    assert all(seconds >= 0.0 for seconds in row.phases_s.values())
    assert sum(row.phases_s.values()) == pytest.approx(row.wall_s, abs=0.3)
    with RunStore(tmp_path / "runs.db") as runs:
        assert runs.get_run(row.run_id).task_name == "silu"


class _Compiler:
    arch = "sm_90a"

    def compile(self, kernel: KernelSource) -> Any:
        return type("Built", (), {"so_path": None})()


def test_the_bench_job_starts_the_user_s_process_with_the_task_and_ends_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's process is started before the judge prepares (its `import torch` overlaps the judge's work),
    is alive and waiting when the best kernel is measured in it, and is gone once the row is made."""
    import optiml.bench.user_clock as user_clock

    task = load_task(ROOT / "tasks" / "silu.py")
    assert task.naive_kernel_path is not None
    judged = Judged(task, KernelSource.from_file(task.naive_kernel_path))
    monkeypatch.setattr(optiml.session, "make_compiler", lambda for_task, arch=None: _Compiler())
    monkeypatch.setattr(optiml.session, "make_evaluator", lambda *args, **kwargs: judged)
    seen: list[Any] = []

    def measure(task: Task, kernel: KernelSource, *args: Any, crowded: bool = False) -> dict[str, Any]:
        ready = args[-1]
        assert not crowded  # the test's judge reports no figures
        seen.append((ready, ready.process.poll(), ready.spec.exists()))
        return {"error": "not measured here"}

    monkeypatch.setattr(user_clock, "measure_for_bench", measure)
    job = optimize_job(BenchConfig(evaluations=4, seeds=2, torch_compile=False), tmp_path)
    row = job(task.path, Worker(), None)
    [(ready, running, spec)] = seen
    assert running is None and not spec  # alive, still waiting for its spec, when the kernel was ready
    assert ready.process.poll() is not None and not ready.work.exists()  # ended with the task
    assert row.status == "verified" and row.user_clock == {"error": "not measured here"}
    assert list(row.phases_s) == ["prepare", "roots", "search", "user_clock"]


@pytest.mark.parametrize(("value", "expected"), [(None, "best_effort"), ("required", "required"), (" ", "best_effort")])
def test_the_isolation_policy_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: str
) -> None:
    if value is None:
        monkeypatch.delenv("OPTIML_ISOLATION", raising=False)
    else:
        monkeypatch.setenv("OPTIML_ISOLATION", value)
    config = optiml.session.eval_config(optiml.session.SessionOptions())
    assert config.isolation == expected
    assert EvalConfig.from_dict(config.to_dict()).isolation == expected  # as the worker receives it


def test_an_unknown_isolation_policy_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIML_ISOLATION", "strict")
    with pytest.raises(ConfigError, match="OPTIML_ISOLATION must be one of best_effort, required, not 'strict'"):
        optiml.session.eval_config(optiml.session.SessionOptions())


CONV_TASK = """import torch
import torch.nn as nn

OPTIML = {"dtype": "float32", "precision": "tf32"}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 24, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 16, 10, 12)]


def get_init_inputs():
    return []
"""


class MeasuredConvolutions(Judged):
    """A judge that measured the task's one convolution exact at PyTorch's defaults, and keeps what it judged."""

    def __init__(self, task: Task, arithmetic: str) -> None:
        super().__init__(task, KernelSource("// none"))
        (conv,) = [n for n in capture_all(task)[0].nodes if n.op == "conv"]
        self.facts = replace(FACTS, convolutions={str(conv.attr("signature")): arithmetic})
        self.judged: list[KernelSource] = []

    def prepare(self) -> TaskFacts:
        return self.facts

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        self.judged += kernels
        return super().evaluate_many(kernels)


@pytest.mark.parametrize("arithmetic", ["exact", "tf32"])
def test_the_kernels_planned_after_preparing_round_as_the_judge_measured(tmp_path: Path, arithmetic: str) -> None:
    path = tmp_path / "conv.py"
    path.write_text(CONV_TASK, encoding="utf-8")
    judged = MeasuredConvolutions(load_task(path), arithmetic)
    flow = Workflow(optiml.session.offline_session(judged))  # type: ignore[arg-type]
    flow.prepare()
    assert flow.task.convolution_arithmetic == tuple(judged.facts.convolutions.items())
    flow.root_candidates(seeds=2)
    rounded = ["optiml_round_tf32(" in kernel.code for kernel in judged.judged]
    assert judged.judged and rounded == [arithmetic == "tf32"] * len(rounded)
