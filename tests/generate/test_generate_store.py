"""Generation's tables share the run store's file with the search's and the LLM layer's."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.errors import StoreError
from optiml.generate import GenerationStore
from optiml.generate.outcome import Attempt, GenerationOutcome, ThoughtRecord
from optiml.generate.store import TaskDraft
from optiml.kernel.source import KernelSource
from optiml.llm import LLMCallStore
from optiml.store import RunStore
from optiml.values import EvalResult, EvalStatus, TimingStats, TrialCheck, VerifyReport


def _outcome(generation_id: str) -> GenerationOutcome:
    kernel = KernelSource("// fast\nOPTIML_EXPORT int optiml_forward();", ("-O3",))
    verified = EvalResult(
        EvalStatus.OK,
        kernel_digest=kernel.digest,
        verify=VerifyReport(True, (TrialCheck(1000, 0, "native", True, 1e-7, 1e-6, 0, 64),)),
        timing=TimingStats.from_samples([1.0, 1.1, 0.9]),
    )
    failed = Attempt("direct", 0, 0, "wrong_answer", "wrong_answer: 3 differ", "wrong_answer: 3 differ")
    won = Attempt("direct", 0, 1, "ok", "verified, 1.0000 ms", kernel=kernel, result=verified)
    no_code = Attempt("fusion_first", 0, 0, "no_code", "no_code: prose only", "prose only")
    thoughts = (
        ThoughtRecord("direct", "Simple.", (failed, won), 2.5, chosen=True, verdict="chosen: the only one"),
        ThoughtRecord("fusion_first", "Fuse.", (no_code,), 1.5, verdict="no verified kernel in 1 attempt"),
    )
    return GenerationOutcome(
        generation_id, "root", "silu", thoughts, "direct", kernel, verified, "direct: chosen", 4.0, 0.01,
        ("aggregation skipped",),
    )  # fmt: skip


def test_an_outcome_round_trips_and_shares_the_file(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with RunStore(db) as runs, LLMCallStore(db) as calls, GenerationStore(db) as store:
        generation_id = store.start(kind="root", task_name="silu", config_json="{}", prompt_version="v1")
        outcome = _outcome(generation_id)
        for record in outcome.thoughts:
            for attempt in record.attempts:
                store.add_attempt(generation_id, attempt)
        store.finish(outcome)
        assert store.load(generation_id) == outcome
        (row,) = store.generations()
        assert outcome.best_kernel is not None
        assert (row.status, row.winner, row.root_digest) == ("finished", "direct", outcome.best_kernel.digest)
        assert runs.runs() == [] and calls.calls() == []  # the other components' tables are untouched

    with GenerationStore(db) as reopened:  # IF NOT EXISTS: opening again keeps what is there
        assert reopened.load(generation_id).thoughts == outcome.thoughts


def test_task_drafts_and_missing_generations(tmp_path: Path) -> None:
    with GenerationStore(tmp_path / "runs.db") as store:
        generation_id = store.start(
            kind="task", task_name="softmax", config_json="{}", prompt_version="v1", request="r"
        )
        store.add_draft(generation_id, TaskDraft(0, "invalid_task", "softmax.py: boom", "import torch\n"))
        store.add_draft(generation_id, TaskDraft(1, "ok", "passed", "import torch\n# fixed\n"))
        store.close_generation(generation_id, "finished", "wrote softmax.py", 3.0, 0.002)
        assert [d.status for d in store.drafts(generation_id)] == ["invalid_task", "ok"]
        assert store.get(generation_id).reason == "wrote softmax.py"
        with pytest.raises(StoreError, match="wrote a task; read it with drafts"):
            store.load(generation_id)
        with pytest.raises(StoreError, match="no generation 'gen-nope'"):
            store.get("gen-nope")
