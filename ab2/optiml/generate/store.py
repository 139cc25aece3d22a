"""Generation's own tables in the run store's SQLite file.

::

    generations          one row per generation: kind (root / adapt / task), task, request,
                         config, prompt version, LLM run id, status, winner, reason, time, cost
    generation_attempts  every candidate in order: thought, sample, round, status, message,
                         feedback sent back, source, flags, full EvalResult as JSON
    generation_thoughts  one row per thought: strategy, chosen, verdict, time

Tables are created with IF NOT EXISTS, so they live beside the search's tables and the LLM
layer's ``llm_calls`` in one file. Attempts are committed as they happen, so an interrupted
generation keeps what it evaluated. The LLM exchanges themselves are in ``llm_calls`` under the
run id kept in ``generations.llm_run_id``; replaying them (LLM mode ``replay``) re-runs a
generation without the network.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from optiml.errors import StoreError
from optiml.generate.outcome import Attempt, GenerationOutcome, ThoughtRecord
from optiml.kernel.source import KernelSource
from optiml.sqlite_db import SqliteDatabase
from optiml.values import EvalResult

STATUS_RUNNING = "running"
STATUS_FINISHED = "finished"  # a kernel (or task) was produced
STATUS_FAILED = "failed"  # it ran to the end without one
STATUS_INTERRUPTED = "interrupted"  # an error or Ctrl-C stopped it

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    task_name TEXT NOT NULL,
    task_digest TEXT NOT NULL DEFAULT '',
    request TEXT NOT NULL DEFAULT '',
    llm_run_id TEXT,
    config_json TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    status TEXT NOT NULL,
    winner TEXT,
    root_digest TEXT,
    reason TEXT NOT NULL DEFAULT '',
    notes_json TEXT NOT NULL DEFAULT '[]',
    seconds REAL NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS generation_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    generation_id TEXT NOT NULL REFERENCES generations(id),
    thought TEXT NOT NULL,
    sample INTEGER NOT NULL,
    round INTEGER NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    feedback TEXT NOT NULL,
    code TEXT,
    flags_json TEXT NOT NULL DEFAULT '[]',
    kernel_digest TEXT,
    result_json TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS generation_attempts_by_generation ON generation_attempts(generation_id, id);
CREATE TABLE IF NOT EXISTS generation_thoughts (
    generation_id TEXT NOT NULL REFERENCES generations(id),
    position INTEGER NOT NULL,
    thought TEXT NOT NULL,
    strategy TEXT NOT NULL,
    chosen INTEGER NOT NULL,
    verdict TEXT NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (generation_id, thought)
);
"""
_ROW_COLUMNS = (
    "id, kind, task_name, task_digest, request, llm_run_id, config_json, prompt_version, status, winner,"
    " root_digest, reason, seconds, cost_usd, created_at"
)


@dataclass(frozen=True)
class GenerationRow:
    """One row of ``generations`` (a summary; :meth:`GenerationStore.load` gives the whole record)."""

    id: str
    kind: str
    task_name: str
    task_digest: str
    request: str
    llm_run_id: str | None
    config_json: str
    prompt_version: str
    status: str
    winner: str | None
    root_digest: str | None
    reason: str
    seconds: float
    cost_usd: float
    created_at: float


@dataclass(frozen=True)
class TaskDraft:
    """One task file the model wrote for a natural-language request, and whether it passed."""

    round: int
    status: str  # "ok", "invalid_task", NO_CODE or LLM_ERROR
    message: str
    source: str  # "" when the answer held no file


class GenerationStore(SqliteDatabase):
    """The generation tables in a SQLite file. Thread-safe; use as a context manager."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, _SCHEMA)

    def __enter__(self) -> GenerationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writing ------------------------------------------------------------------------------------

    def start(
        self,
        *,
        kind: str,
        task_name: str,
        config_json: str,
        prompt_version: str,
        task_digest: str = "",
        request: str = "",
        llm_run_id: str | None = None,
    ) -> str:
        """Open a generation; returns its id (``gen-<date>-<time>-<random>``)."""
        now = time.time()
        generation_id = "gen-" + time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + "-" + secrets.token_hex(3)
        with self._write() as conn:
            conn.execute(
                "INSERT INTO generations (id, kind, task_name, task_digest, request, llm_run_id, config_json,"
                " prompt_version, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (generation_id, kind, task_name, task_digest, request, llm_run_id, config_json, prompt_version,
                 STATUS_RUNNING, now),
            )  # fmt: skip
        return generation_id

    def add_attempt(self, generation_id: str, attempt: Attempt) -> None:
        kernel = attempt.kernel
        result_json = json.dumps(attempt.result.to_dict()) if attempt.result is not None else None
        with self._write() as conn:
            conn.execute(
                "INSERT INTO generation_attempts (generation_id, thought, sample, round, status, message,"
                " feedback, code, flags_json, kernel_digest, result_json, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (generation_id, attempt.thought, attempt.sample, attempt.round, attempt.status, attempt.message,
                 attempt.feedback, kernel.code if kernel else None, json.dumps(list(kernel.flags) if kernel else []),
                 kernel.digest if kernel else None, result_json, time.time()),
            )  # fmt: skip

    def add_draft(self, generation_id: str, draft: TaskDraft) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO generation_attempts (generation_id, thought, sample, round, status, message,"
                " feedback, code, created_at) VALUES (?, 'task', 0, ?, ?, ?, '', ?, ?)",
                (generation_id, draft.round, draft.status, draft.message, draft.source, time.time()),
            )

    def finish(self, outcome: GenerationOutcome) -> None:
        """Close a kernel generation with its thoughts' verdicts and the winner."""
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO generation_thoughts VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(outcome.id, i, t.name, t.strategy, int(t.chosen), t.verdict, t.seconds)
                 for i, t in enumerate(outcome.thoughts)],
            )  # fmt: skip
            root_digest = outcome.best_kernel.digest if outcome.best_kernel else None
            conn.execute(
                "UPDATE generations SET status = ?, winner = ?, root_digest = ?, reason = ?, notes_json = ?,"
                " seconds = ?, cost_usd = ? WHERE id = ?",
                (STATUS_FINISHED if outcome.ok else STATUS_FAILED, outcome.winner, root_digest, outcome.reason,
                 json.dumps(list(outcome.notes)), outcome.seconds, outcome.cost_usd, outcome.id),
            )  # fmt: skip

    def close_generation(
        self, generation_id: str, status: str, reason: str, seconds: float = 0.0, cost_usd: float = 0.0
    ) -> None:
        """Set a generation's final status without thoughts (task generation, interruption)."""
        with self._write() as conn:
            conn.execute(
                "UPDATE generations SET status = ?, reason = ?, seconds = ?, cost_usd = ? WHERE id = ?",
                (status, reason, seconds, cost_usd, generation_id),
            )

    # reading ------------------------------------------------------------------------------------

    def generations(self) -> list[GenerationRow]:
        """Every generation, oldest first."""
        rows = self._read(f"SELECT {_ROW_COLUMNS} FROM generations ORDER BY created_at, id")
        return [GenerationRow(**dict(row)) for row in rows]

    def get(self, generation_id: str) -> GenerationRow:
        rows = self._read(f"SELECT {_ROW_COLUMNS} FROM generations WHERE id = ?", (generation_id,))
        if not rows:
            raise StoreError(f"{self.path}: no generation {generation_id!r}")
        return GenerationRow(**dict(rows[0]))

    def load(self, generation_id: str) -> GenerationOutcome:
        """A finished kernel generation as it was returned (thoughts, attempts, winner, reason)."""
        row = self.get(generation_id)
        if row.kind == "task":
            raise StoreError(f"{self.path}: generation {generation_id} wrote a task; read it with drafts()")
        by_thought: dict[str, list[Attempt]] = {}
        for a in self._read("SELECT * FROM generation_attempts WHERE generation_id = ? ORDER BY id", (generation_id,)):
            by_thought.setdefault(a["thought"], []).append(_attempt(a))
        thoughts = tuple(
            ThoughtRecord(
                name=t["thought"],
                strategy=t["strategy"],
                attempts=tuple(by_thought.get(t["thought"], ())),
                seconds=t["seconds"],
                chosen=bool(t["chosen"]),
                verdict=t["verdict"],
            )
            for t in self._read(
                "SELECT * FROM generation_thoughts WHERE generation_id = ? ORDER BY position", (generation_id,)
            )
        )
        winner = next((t for t in thoughts if t.chosen), None)
        best = winner.best if winner is not None else None
        notes = self._read("SELECT notes_json FROM generations WHERE id = ?", (generation_id,))[0][0]
        return GenerationOutcome(
            id=row.id,
            kind=row.kind,
            task_name=row.task_name,
            thoughts=thoughts,
            winner=row.winner,
            best_kernel=best.kernel if best is not None else None,
            best_result=best.result if best is not None else None,
            reason=row.reason,
            seconds=row.seconds,
            cost_usd=row.cost_usd,
            notes=tuple(json.loads(notes)),
        )

    def drafts(self, generation_id: str) -> list[TaskDraft]:
        """The task files a natural-language generation went through, in order."""
        return [
            TaskDraft(round=r["round"], status=r["status"], message=r["message"], source=r["code"] or "")
            for r in self._read(
                "SELECT round, status, message, code FROM generation_attempts WHERE generation_id = ? ORDER BY id",
                (generation_id,),
            )
        ]


def _attempt(row: sqlite3.Row) -> Attempt:
    kernel = KernelSource(row["code"], tuple(json.loads(row["flags_json"]))) if row["code"] is not None else None
    result = EvalResult.from_dict(json.loads(row["result_json"])) if row["result_json"] else None
    return Attempt(
        thought=row["thought"],
        sample=row["sample"],
        round=row["round"],
        status=row["status"],
        message=row["message"],
        feedback=row["feedback"],
        kernel=kernel,
        result=result,
    )
