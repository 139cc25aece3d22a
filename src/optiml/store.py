"""The run store: one embedded SQLite file holding every run, candidate, evaluation and profile.

Tables (all ``CREATE TABLE IF NOT EXISTS``, so other components may keep their own tables in
the same file: the LLM layer adds ``llm_calls``)::

    runs         one row per search run: task, strategy, config, status, budgets spent, best
    kernels      content-addressed candidate sources (digest → code, flags)
    edits        every proposal a proposer returned: untried, evaluated, not applied, duplicate
    nodes        every evaluated candidate of a run: parent, edit, depth, reward, closed reason
    evaluations  the full EvalResult of each node, as JSON (the crash-safety point)
    profiles     the profiler diagnosis of the nodes worth profiling
    retimes      the final interleaved re-timing of the top candidates, and of the PyTorch references
                 timed in the same rounds (rows keyed ``reference:<mode>`` instead of a digest)

The file is opened in WAL mode with a busy timeout, so a second connection (the LLM layer's,
or ``optiml runs`` in another terminal) can read and write while a search runs. Every write is
its own transaction: a run killed at any moment keeps every evaluation it committed.

Text that a candidate shaped — an evaluation's messages, warnings and compiler output, a profile's
text — is redacted (:mod:`optiml.redact`) before it is written: the store is read back into
reports and prompts.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from optiml.errors import StoreError
from optiml.kernel.source import KernelSource
from optiml.redact import redact, redact_value
from optiml.sqlite_db import SqliteDatabase
from optiml.values import Edit, EvalResult, TimingStats

DEFAULT_DB_PATH = Path(".optiml") / "runs.db"
SCHEMA_VERSION = 1

#: Values of ``runs.status``.
RUN_RUNNING = "running"
RUN_FINISHED = "finished"
RUN_INTERRUPTED = "interrupted"
RUN_FAILED = "failed"

#: Values of ``edits.outcome``.
EDIT_UNTRIED = "untried"  # proposed and applied, waiting for an evaluation slot
EDIT_EVALUATED = "evaluated"  # its kernel became a node
EDIT_NOT_APPLIED = "not_applied"  # the proposer could not produce a kernel (Proposal.error)
EDIT_DUPLICATE = "duplicate"  # its kernel was already evaluated or queued (transposition)

_REFERENCE_KEY = "reference:"  # a retimes row of a PyTorch reference, not a kernel: "reference:eager"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_versions (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    task_name TEXT NOT NULL,
    task_path TEXT NOT NULL,
    task_digest TEXT NOT NULL,
    strategy TEXT NOT NULL,
    config_json TEXT NOT NULL,
    status TEXT NOT NULL,
    stop_reason TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    elapsed_s REAL NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    root_digest TEXT NOT NULL,
    best_digest TEXT,
    confirmed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS kernels (
    digest TEXT PRIMARY KEY,
    code TEXT NOT NULL,
    flags_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS edits (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    parent_digest TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    category TEXT NOT NULL,
    rationale TEXT NOT NULL,
    proposer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    child_digest TEXT,
    prior REAL NOT NULL DEFAULT 1.0,
    seq INTEGER NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS edits_by_run ON edits(run_id, seq);
CREATE TABLE IF NOT EXISTS nodes (
    run_id TEXT NOT NULL REFERENCES runs(id),
    digest TEXT NOT NULL,
    parent_digest TEXT,
    edit_id INTEGER REFERENCES edits(id),
    depth INTEGER NOT NULL,
    prior REAL NOT NULL DEFAULT 1.0,
    seq INTEGER NOT NULL,
    reward REAL,
    closed_reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, digest)
);
CREATE TABLE IF NOT EXISTS evaluations (
    run_id TEXT NOT NULL REFERENCES runs(id),
    digest TEXT NOT NULL,
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    time_ms REAL,
    message TEXT NOT NULL,
    result_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, digest)
);
CREATE TABLE IF NOT EXISTS profiles (
    run_id TEXT NOT NULL REFERENCES runs(id),
    digest TEXT NOT NULL,
    proxy_score REAL NOT NULL,
    roofline_fraction REAL,
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, digest)
);
CREATE TABLE IF NOT EXISTS retimes (
    run_id TEXT NOT NULL REFERENCES runs(id),
    digest TEXT NOT NULL,
    rounds INTEGER NOT NULL,
    timing_json TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, digest)
);
"""


@dataclass(frozen=True)
class RunRecord:
    """One row of ``runs``."""

    id: str
    task_name: str
    task_path: str
    task_digest: str
    strategy: str
    config_json: str
    status: str
    stop_reason: str
    created_at: float
    updated_at: float
    elapsed_s: float
    cost_usd: float
    root_digest: str
    best_digest: str | None
    confirmed: bool


@dataclass(frozen=True)
class EditRecord:
    """One row of ``edits``: a proposal and what became of it."""

    id: int
    parent_digest: str
    edit: Edit
    outcome: str
    child_digest: str | None
    prior: float
    seq: int
    message: str


@dataclass(frozen=True)
class NodeRecord:
    """One row of ``nodes``: an evaluated candidate and its place in the tree."""

    digest: str
    parent_digest: str | None
    edit_id: int | None
    depth: int
    prior: float
    seq: int
    reward: float | None
    closed_reason: str


@dataclass(frozen=True)
class VerifiedEvaluation:
    """A stored evaluation that verified a kernel: the run it belongs to, its result, and when."""

    run: RunRecord
    result: EvalResult
    created_at: float


@dataclass(frozen=True)
class ProfileRecord:
    digest: str
    proxy_score: float
    roofline_fraction: float | None
    text: str


def new_run_id() -> str:
    """``YYYYMMDD-HHMMSS-<hex>``: sorts by start time, unique in practice. Known before the run is
    stored, so the LLM calls made while preparing it can carry it."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


class RunStore(SqliteDatabase):
    """SQLite run store. Thread-safe (one connection behind a lock); use as a context manager."""

    def __init__(self, path: str | Path = DEFAULT_DB_PATH) -> None:
        super().__init__(path, _SCHEMA)
        try:
            self._check_version()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the run store: {exc}") from exc

    def _check_version(self) -> None:
        """Stamp a new store with this schema version, or refuse one a newer OptiML wrote. Processes that open
        a new store at once (a search and a reader of its progress) may both find it unstamped: the stamp is
        an insert that yields to one already there, and the version is read again after it. A stamped store
        is only read (it may be on a read-only filesystem)."""
        query = "SELECT version FROM schema_versions WHERE component = 'runs'"
        row = self._conn.execute(query).fetchone()
        if row is None:
            with self._conn:
                self._conn.execute("INSERT OR IGNORE INTO schema_versions VALUES ('runs', ?)", (SCHEMA_VERSION,))
            row = self._conn.execute(query).fetchone()
        if row[0] > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: run store schema v{row[0]} was written by a newer OptiML"
                f" (this one reads v{SCHEMA_VERSION})"
            )

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # runs ---------------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        task_name: str,
        task_path: str,
        task_digest: str,
        strategy: str,
        config_json: str,
        root: KernelSource,
        run_id: str | None = None,
    ) -> RunRecord:
        """A new run (status ``running``) starting from ``root``, with ``run_id`` or a fresh one."""
        now = time.time()
        run_id = run_id or new_run_id()
        with self._write() as conn:
            _insert_kernel(conn, root)
            conn.execute(
                "INSERT INTO runs (id, task_name, task_path, task_digest, strategy, config_json, status,"
                " created_at, updated_at, root_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, task_name, task_path, task_digest, strategy, config_json, RUN_RUNNING, now, now, root.digest),
            )
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this id, or the only run whose id starts with it."""
        rows = self._read("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows and run_id:
            rows = self._read("SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\'", (_like_prefix(run_id),))
        if not rows:
            raise StoreError(f"no run {run_id!r} in {self.path} (`optiml runs` lists them)")
        if len(rows) > 1:
            ids = ", ".join(sorted(r["id"] for r in rows)[:5])
            raise StoreError(f"run id {run_id!r} is ambiguous in {self.path}: {ids}")
        return _run_record(rows[0])

    def runs(self) -> list[RunRecord]:
        """Every run, newest first."""
        return [_run_record(r) for r in self._read("SELECT * FROM runs ORDER BY created_at DESC, id DESC")]

    def update_run(
        self,
        run_id: str,
        *,
        status: str | None = None,
        stop_reason: str | None = None,
        elapsed_s: float | None = None,
        cost_usd: float | None = None,
        best_digest: str | None = None,
        confirmed: bool | None = None,
    ) -> None:
        """Set the given fields (None leaves a field as it is) and bump ``updated_at``."""
        values: dict[str, object] = {
            "status": status,
            "stop_reason": stop_reason,
            "elapsed_s": elapsed_s,
            "cost_usd": cost_usd,
            "best_digest": best_digest,
            "confirmed": None if confirmed is None else int(confirmed),
        }
        sets = {k: v for k, v in values.items() if v is not None}
        sets["updated_at"] = time.time()
        assignments = ", ".join(f"{k} = ?" for k in sets)
        with self._write() as conn:
            conn.execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*sets.values(), run_id))

    # kernels and edits --------------------------------------------------------------------------

    def put_kernel(self, kernel: KernelSource) -> str:
        with self._write() as conn:
            _insert_kernel(conn, kernel)
        return kernel.digest

    def kernel(self, digest: str) -> KernelSource:
        rows = self._read("SELECT code, flags_json FROM kernels WHERE digest = ?", (digest,))
        if not rows:
            raise StoreError(f"{self.path}: no kernel with digest {digest}")
        return KernelSource(code=rows[0]["code"], flags=tuple(json.loads(rows[0]["flags_json"])))

    def add_edit(
        self,
        run_id: str,
        *,
        parent_digest: str,
        edit: Edit,
        outcome: str,
        seq: int,
        kernel: KernelSource | None = None,
        prior: float = 1.0,
        message: str = "",
    ) -> int:
        """Record a proposal (and the kernel it yields, if any); returns the edit's id."""
        with self._write() as conn:
            if kernel is not None:
                _insert_kernel(conn, kernel)
            cursor = conn.execute(
                "INSERT INTO edits (run_id, parent_digest, kind, payload, category, rationale, proposer,"
                " outcome, child_digest, prior, seq, message, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    parent_digest,
                    edit.kind,
                    edit.payload,
                    edit.category,
                    edit.rationale,
                    edit.proposer,
                    outcome,
                    kernel.digest if kernel is not None else None,
                    prior,
                    seq,
                    message,
                    time.time(),
                ),
            )
            if cursor.lastrowid is None:
                raise StoreError(f"{self.path}: inserting an edit returned no id")
            return cursor.lastrowid

    def edit_outcome_counts(self, run_id: str) -> dict[str, int]:
        rows = self._read("SELECT outcome, COUNT(*) AS n FROM edits WHERE run_id = ? GROUP BY outcome", (run_id,))
        return {r["outcome"]: int(r["n"]) for r in rows}

    def set_edit_outcome(self, edit_id: int, outcome: str) -> None:
        with self._write() as conn:
            conn.execute("UPDATE edits SET outcome = ? WHERE id = ?", (outcome, edit_id))

    def edits(self, run_id: str) -> list[EditRecord]:
        rows = self._read("SELECT * FROM edits WHERE run_id = ? ORDER BY seq, id", (run_id,))
        return [
            EditRecord(
                id=r["id"],
                parent_digest=r["parent_digest"],
                edit=Edit(
                    kind=r["kind"],
                    payload=r["payload"],
                    category=r["category"],
                    rationale=r["rationale"],
                    proposer=r["proposer"],
                ),
                outcome=r["outcome"],
                child_digest=r["child_digest"],
                prior=r["prior"],
                seq=r["seq"],
                message=r["message"],
            )
            for r in rows
        ]

    # nodes and evaluations ----------------------------------------------------------------------

    def record_evaluation(
        self,
        run_id: str,
        *,
        node: NodeRecord,
        kernel: KernelSource,
        result: EvalResult,
        elapsed_s: float,
        cost_usd: float,
    ) -> None:
        """Commit one evaluated candidate: its kernel, node, result (redacted) and the run's counters, atomically."""
        now = time.time()
        result = redact_value(result)
        with self._write() as conn:
            _insert_kernel(conn, kernel)
            conn.execute(
                "INSERT INTO nodes (run_id, digest, parent_digest, edit_id, depth, prior, seq, reward,"
                " closed_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    node.digest,
                    node.parent_digest,
                    node.edit_id,
                    node.depth,
                    node.prior,
                    node.seq,
                    node.reward,
                    node.closed_reason,
                ),
            )
            conn.execute(
                "INSERT INTO evaluations (run_id, digest, seq, status, time_ms, message, result_json,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    node.digest,
                    node.seq,
                    result.status.value,
                    result.time_ms,
                    result.message,
                    json.dumps(result.to_dict()),
                    now,
                ),
            )
            if node.edit_id is not None:
                conn.execute("UPDATE edits SET outcome = ? WHERE id = ?", (EDIT_EVALUATED, node.edit_id))
            conn.execute(
                "UPDATE runs SET elapsed_s = ?, cost_usd = ?, updated_at = ? WHERE id = ?",
                (elapsed_s, cost_usd, now, run_id),
            )

    def set_reward(self, run_id: str, digest: str, reward: float) -> None:
        with self._write() as conn:
            conn.execute("UPDATE nodes SET reward = ? WHERE run_id = ? AND digest = ?", (reward, run_id, digest))

    def set_closed(self, run_id: str, digest: str, reason: str) -> None:
        with self._write() as conn:
            conn.execute("UPDATE nodes SET closed_reason = ? WHERE run_id = ? AND digest = ?", (reason, run_id, digest))

    def nodes(self, run_id: str) -> list[NodeRecord]:
        """The run's nodes in evaluation order."""
        rows = self._read("SELECT * FROM nodes WHERE run_id = ? ORDER BY seq", (run_id,))
        return [
            NodeRecord(
                digest=r["digest"],
                parent_digest=r["parent_digest"],
                edit_id=r["edit_id"],
                depth=r["depth"],
                prior=r["prior"],
                seq=r["seq"],
                reward=r["reward"],
                closed_reason=r["closed_reason"],
            )
            for r in rows
        ]

    def evaluations(self, run_id: str) -> dict[str, EvalResult]:
        """Every evaluation of the run, by kernel digest, in evaluation order."""
        rows = self._read("SELECT digest, result_json FROM evaluations WHERE run_id = ? ORDER BY seq", (run_id,))
        try:
            return {r["digest"]: EvalResult.from_dict(json.loads(r["result_json"])) for r in rows}
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{self.path}: run {run_id} has an unreadable evaluation: {exc}") from exc

    def verified_times(self, run_id: str) -> dict[str, float]:
        """Median times of the run's verified kernels, by digest (no JSON decoding: cheap for listings)."""
        rows = self._read(
            "SELECT digest, time_ms FROM evaluations WHERE run_id = ? AND status = 'ok' AND time_ms IS NOT NULL"
            " ORDER BY seq",
            (run_id,),
        )
        return {r["digest"]: float(r["time_ms"]) for r in rows}

    def verified_evaluation(self, digest: str, task_digest: str) -> VerifiedEvaluation | None:
        """The newest evaluation, in any run of the task with ``task_digest``, that verified the kernel
        ``digest``; None when no run verified it (for that exact task source)."""
        rows = self._read(
            "SELECT e.run_id, e.result_json, e.created_at FROM evaluations e JOIN runs r ON r.id = e.run_id"
            " WHERE e.digest = ? AND e.status = 'ok' AND r.task_digest = ? ORDER BY e.created_at DESC LIMIT 1",
            (digest, task_digest),
        )
        if not rows:
            return None
        try:
            result = EvalResult.from_dict(json.loads(rows[0]["result_json"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{self.path}: run {rows[0]['run_id']} has an unreadable evaluation: {exc}") from exc
        return VerifiedEvaluation(self.get_run(rows[0]["run_id"]), result, float(rows[0]["created_at"]))

    def evaluation_count(self, run_id: str) -> int:
        return int(self._read("SELECT COUNT(*) AS n FROM evaluations WHERE run_id = ?", (run_id,))[0]["n"])

    def status_counts(self, run_id: str) -> dict[str, int]:
        """Evaluations of the run by EvalStatus value."""
        rows = self._read(
            "SELECT status, COUNT(*) AS n FROM evaluations WHERE run_id = ? GROUP BY status ORDER BY status",
            (run_id,),
        )
        return {r["status"]: int(r["n"]) for r in rows}

    # profiles and retimes -----------------------------------------------------------------------

    def record_profile(
        self, run_id: str, digest: str, *, proxy_score: float, roofline_fraction: float | None, text: str
    ) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO profiles VALUES (?, ?, ?, ?, ?, ?)",
                (run_id, digest, proxy_score, roofline_fraction, redact(text), time.time()),
            )

    def profiles(self, run_id: str) -> dict[str, ProfileRecord]:
        rows = self._read("SELECT * FROM profiles WHERE run_id = ?", (run_id,))
        return {
            r["digest"]: ProfileRecord(
                digest=r["digest"],
                proxy_score=r["proxy_score"],
                roofline_fraction=r["roofline_fraction"],
                text=r["text"],
            )
            for r in rows
        }

    def record_retimes(
        self,
        run_id: str,
        rounds: int,
        timings: Sequence[tuple[str, TimingStats]],
        references: dict[str, TimingStats] | None = None,
    ) -> None:
        """The final re-timing: (digest, timing) per kernel, and the references timed in the same rounds."""
        now = time.time()
        keyed = [*timings, *((_REFERENCE_KEY + mode, t) for mode, t in (references or {}).items())]
        with self._write() as conn:
            conn.execute("DELETE FROM retimes WHERE run_id = ?", (run_id,))
            conn.executemany(
                "INSERT INTO retimes VALUES (?, ?, ?, ?, ?)",
                [(run_id, key, rounds, json.dumps(_timing_dict(t)), now) for key, t in keyed],
            )

    def retimes(self, run_id: str) -> dict[str, TimingStats]:
        """The final re-timing's kernels: digest → timing."""
        return {k: t for k, t in self._retime_rows(run_id).items() if not k.startswith(_REFERENCE_KEY)}

    def retimed_references(self, run_id: str) -> dict[str, TimingStats]:
        """The references timed in the final re-timing's rounds: mode → timing ({} where none was)."""
        rows = self._retime_rows(run_id).items()
        return {k.removeprefix(_REFERENCE_KEY): t for k, t in rows if k.startswith(_REFERENCE_KEY)}

    def _retime_rows(self, run_id: str) -> dict[str, TimingStats]:
        rows = self._read("SELECT digest, timing_json FROM retimes WHERE run_id = ?", (run_id,))
        return {r["digest"]: TimingStats(**json.loads(r["timing_json"])) for r in rows}

    # -- moving a run between stores (a Ray actor's store → the driver's) ---------------------------------
    def export_run(self, run_id: str) -> dict[str, list[dict[str, object]]]:
        """Every row of one run, table by table (JSON-serialisable), for :meth:`import_run` elsewhere."""
        run = self.get_run(run_id)
        data: dict[str, list[dict[str, object]]] = {}
        for table in _RUN_TABLES:
            data[table] = [dict(r) for r in self._read(f"SELECT * FROM {table} WHERE {_RUN_KEY[table]} = ?", (run.id,))]
        digests = {run.root_digest, *(n["digest"] for n in data["nodes"]), *(e["child_digest"] for e in data["edits"])}
        digests.discard(None)
        data["kernels"] = [
            dict(r)
            for d in sorted(map(str, digests))
            for r in self._read("SELECT * FROM kernels WHERE digest = ?", (d,))
        ]
        return data

    def import_run(self, data: dict[str, list[dict[str, object]]]) -> str:
        """Add a run exported by :meth:`export_run` (edit ids renumbered); returns its id. A run id already
        here is an error: runs are never merged."""
        (run,) = data["runs"]
        run_id = str(run["id"])
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise StoreError(f"{self.path}: run {run_id} is already in this store")
            for row in data.get("kernels", []):
                conn.execute("INSERT OR IGNORE INTO kernels (digest, code, flags_json) VALUES (?, ?, ?)",
                             (row["digest"], row["code"], row["flags_json"]))  # fmt: skip
            _insert_rows(conn, "runs", [run])
            edit_ids: dict[object, int | None] = {None: None}
            edit_columns = {r[1] for r in conn.execute("PRAGMA table_info(edits)")}
            for row in data.get("edits", []):
                fields = {k: v for k, v in row.items() if k != "id"}
                if not set(fields) <= edit_columns:
                    raise sqlite3.OperationalError(f"edits has no column(s) {sorted(set(fields) - edit_columns)}")
                cursor = conn.execute(
                    f"INSERT INTO edits ({', '.join(fields)}) VALUES ({', '.join('?' * len(fields))})",
                    tuple(fields.values()),
                )
                edit_ids[row["id"]] = cursor.lastrowid
            nodes = [{**row, "edit_id": edit_ids.get(row["edit_id"])} for row in data.get("nodes", [])]
            _insert_rows(conn, "nodes", nodes)
            for table in ("evaluations", "profiles", "retimes"):
                _insert_rows(conn, table, data.get(table, []))
        return run_id


#: The tables holding one run's rows (besides ``kernels``, shared by content), and their run column.
_RUN_TABLES = ("runs", "edits", "nodes", "evaluations", "profiles", "retimes")
_RUN_KEY = {t: ("id" if t == "runs" else "run_id") for t in _RUN_TABLES}


def _insert_rows(conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, object]]) -> None:
    """Insert exported rows; a column the table does not have (a different schema) is an error."""
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
    for row in rows:
        if not set(row) <= columns:
            raise sqlite3.OperationalError(f"{table} has no column(s) {sorted(set(row) - columns)}")
        conn.execute(
            f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
        )


def _insert_kernel(conn: sqlite3.Connection, kernel: KernelSource) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO kernels VALUES (?, ?, ?)", (kernel.digest, kernel.code, json.dumps(list(kernel.flags)))
    )


def _run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        task_name=row["task_name"],
        task_path=row["task_path"],
        task_digest=row["task_digest"],
        strategy=row["strategy"],
        config_json=row["config_json"],
        status=row["status"],
        stop_reason=row["stop_reason"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        elapsed_s=row["elapsed_s"],
        cost_usd=row["cost_usd"],
        root_digest=row["root_digest"],
        best_digest=row["best_digest"],
        confirmed=bool(row["confirmed"]),
    )


def _timing_dict(timing: TimingStats) -> dict[str, float | int]:
    return {
        "median_ms": timing.median_ms,
        "q1_ms": timing.q1_ms,
        "q3_ms": timing.q3_ms,
        "min_ms": timing.min_ms,
        "max_ms": timing.max_ms,
        "trials": timing.trials,
        "wall_median_ms": timing.wall_median_ms,
    }


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
