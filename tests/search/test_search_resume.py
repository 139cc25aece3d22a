"""Runs survive SIGKILL and Ctrl-C: resume continues where they stopped and re-evaluates nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from resume_child import BUDGET, SEED
from search_helpers import TASK_SOURCE, write_task

import optiml
from optiml.errors import StoreError, TaskError, WorkerError
from optiml.kernel.source import KernelSource
from optiml.search import Budgets, SearchConfig, SearchEvent, resume_search, run_search
from optiml.search.events import EventKind
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.store import RunStore
from optiml.task import Task
from optiml.values import EvalResult

HERE = Path(__file__).resolve().parent
SRC = Path(optiml.__file__).resolve().parent.parent


def wait_for_evaluations(db: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the search ended before it was killed: {err.decode()[-2000:]}")
        if db.exists():
            with RunStore(db) as store:
                runs = store.runs()
                if runs and store.evaluation_count(runs[0].id) >= count:
                    return
        time.sleep(0.02)
    pytest.fail(f"no {count} evaluations within 60 s")


def assert_consistent(store: RunStore, run_id: str) -> None:
    """Every node but the root came from exactly one edit, recorded as evaluated."""
    edits = {e.id: e for e in store.edits(run_id)}
    for node in store.nodes(run_id)[1:]:
        assert node.edit_id is not None
        assert edits[node.edit_id].outcome == "evaluated" and edits[node.edit_id].child_digest == node.digest
    evaluated = [e for e in edits.values() if e.outcome == "evaluated"]
    assert len(evaluated) == len(store.nodes(run_id)) - 1


def test_a_run_killed_with_sigkill_resumes_without_reevaluating(tmp_path: Path, task: Task) -> None:
    db = tmp_path / "runs.db"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), str(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "resume_child.py"), str(db), str(task.path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_evaluations(db, 10, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with RunStore(db) as store:
        run = store.runs()[0]
        assert run.status == "running"  # nobody got to mark it: it was killed
        before = set(store.evaluations(run.id))
        assert 10 <= len(before) < BUDGET
        assert_consistent(store, run.id)

        evaluator = LandscapeEvaluator(Landscape(seed=SEED))
        outcome = resume_search(store, run.id, evaluator, [KnobProposer(SEED)])

        assert not set(evaluator.calls) & before
        assert max(evaluator.calls.values()) == 1
        assert len(evaluator.calls) == BUDGET - len(before)
        assert outcome.evaluations == BUDGET == store.evaluation_count(run.id)
        assert outcome.run_id == run.id and outcome.confirmed
        assert store.get_run(run.id).status == "finished"
        assert_consistent(store, run.id)


def test_ctrl_c_marks_the_run_interrupted_and_resume_uses_its_queued_proposals(task: Task, store: RunStore) -> None:
    # breadth-first MCTS (deepen_first off) is sure to come back to the proposals queued before the stop
    config = SearchConfig(
        strategy="mcts",
        parallel_evaluations=1,
        parallel_proposals=1,
        reproducible=True,
        budgets=Budgets(30),
        deepen_first=False,
    )

    def interrupt_after_eight(event: SearchEvent) -> None:
        if event.kind is EventKind.EVALUATED and event.progress.evaluations == 8:
            raise KeyboardInterrupt

    first = LandscapeEvaluator(Landscape(seed=1))
    with pytest.raises(KeyboardInterrupt):
        run_search(task, landscape_kernel(), first, [KnobProposer(1)], None, store, config, interrupt_after_eight)
    run = store.runs()[0]
    assert run.status == "interrupted" and run.stop_reason == "interrupted"
    before = set(store.evaluations(run.id))
    assert len(before) == 8 == len(first.calls)
    queued = {e.id: e for e in store.edits(run.id) if e.outcome == "untried"}
    assert queued

    second = LandscapeEvaluator(Landscape(seed=1))
    proposer = KnobProposer(1)
    outcome = resume_search(store, run.id, second, [proposer])
    assert not set(second.calls) & before
    assert outcome.evaluations == 30 and sum(second.calls.values()) == 22
    after = {e.id: e for e in store.edits(run.id)}
    assert any(after[i].outcome == "evaluated" and after[i].child_digest in second.calls for i in queued)
    assert_consistent(store, run.id)


def test_a_finished_run_continues_only_with_larger_budgets(task: Task, store: RunStore) -> None:
    config = SearchConfig(parallel_evaluations=1, parallel_proposals=1, reproducible=True, budgets=Budgets(10))
    first = LandscapeEvaluator(Landscape(seed=2))
    outcome = run_search(task, landscape_kernel(), first, [KnobProposer(2)], None, store, config)
    with pytest.raises(StoreError, match=r"already finished \(evaluation budget spent \(10 evaluations\)\)"):
        resume_search(store, outcome.run_id, first, [KnobProposer(2)])
    second = LandscapeEvaluator(Landscape(seed=2))
    more = resume_search(store, outcome.run_id, second, [KnobProposer(2)], budgets=Budgets(max_evaluations=25))
    assert more.evaluations == 25 and sum(second.calls.values()) == 15
    assert not set(second.calls) & set(first.calls)
    assert SearchConfig.from_json(store.get_run(outcome.run_id).config_json).budgets.max_evaluations == 10


def test_resume_refuses_a_changed_task_and_an_unknown_run(tmp_path: Path, store: RunStore) -> None:
    task = write_task(tmp_path)
    config = SearchConfig(budgets=Budgets(3))
    outcome = run_search(
        task, landscape_kernel(), LandscapeEvaluator(Landscape()), [KnobProposer()], None, store, config
    )
    store.update_run(outcome.run_id, status="interrupted")
    task.path.write_text(TASK_SOURCE.replace("2.0", "3.0"))
    with pytest.raises(TaskError, match="the task changed since run"):
        resume_search(store, outcome.run_id, LandscapeEvaluator(Landscape()), [KnobProposer()])
    with pytest.raises(StoreError, match=r"no run 'nope' in .*runs\.db \(`optiml runs` lists them\)"):
        resume_search(store, "nope", LandscapeEvaluator(Landscape()), [KnobProposer()])


def test_a_broken_evaluator_interrupts_the_run_which_resumes_later(task: Task, store: RunStore) -> None:
    class DiesAfterFive(LandscapeEvaluator):
        granted = 0

        def evaluate(self, kernel: KernelSource) -> EvalResult:
            with self._lock:
                allowed = self.granted < 5
                self.granted += allowed
            if not allowed:
                raise WorkerError("the GPU worker could not be restarted")
            return super().evaluate(kernel)

    config = SearchConfig(parallel_evaluations=2, budgets=Budgets(20))
    with pytest.raises(WorkerError):
        run_search(task, landscape_kernel(), DiesAfterFive(Landscape(seed=3)), [KnobProposer(3)], None, store, config)
    run = store.runs()[0]
    assert run.status == "interrupted"
    assert run.stop_reason == "stopped by WorkerError: the GPU worker could not be restarted"
    before = set(store.evaluations(run.id))
    assert len(before) == 5
    evaluator = LandscapeEvaluator(Landscape(seed=3))
    outcome = resume_search(store, run.id, evaluator, [KnobProposer(3)])
    assert outcome.evaluations == 20 and not set(evaluator.calls) & before
