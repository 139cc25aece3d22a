"""The SQLite run store: schema, sharing the file with the LLM layer, round trips, clear errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from optiml.errors import StoreError
from optiml.kernel.source import KernelSource
from optiml.store import EDIT_DUPLICATE, EDIT_NOT_APPLIED, EDIT_UNTRIED, SCHEMA_VERSION, NodeRecord, RunStore
from optiml.values import (
    CompileDiagnostic,
    CompileResult,
    Edit,
    EvalResult,
    EvalStatus,
    TimingStats,
    TrialCheck,
    VerifyReport,
)

EDIT = Edit("search_replace", "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE", "tiling", "tile by 32", "llm:test")
ROOT = KernelSource("__global__ void k() {}", flags=("-O3",))
CHILD = KernelSource("__global__ void k() { /* tiled */ }")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.db") as run_store:
        yield run_store


def new_run(store: RunStore, name: str = "softmax") -> str:
    return store.create_run(
        task_name=name, task_path=f"/tasks/{name}.py", task_digest="abc", strategy="mcts", config_json="{}", root=ROOT
    ).id


def ok_result(ms: float) -> EvalResult:
    return EvalResult(
        EvalStatus.OK,
        kernel_digest="x",
        verify=VerifyReport(True, (TrialCheck(1, 0, "native", True, 1e-6, 1e-5, 0, 100),)),
        timing=TimingStats(ms, ms * 0.99, ms * 1.01, ms * 0.98, ms * 1.1, 50, ms * 1.2),
        reference={"eager": TimingStats(2 * ms, 2 * ms, 2 * ms, 2 * ms, 2 * ms, 50)},
        phase_seconds={"compile": 0.4},
    )


def node(digest: str, seq: int, parent: str | None = None, edit_id: int | None = None) -> NodeRecord:
    return NodeRecord(digest, parent, edit_id, 0 if parent is None else 1, 1.0, seq, None, "")


def test_wal_mode_and_the_path_are_exposed(tmp_path: Path) -> None:
    with RunStore(tmp_path / "sub" / "runs.db") as store:
        assert store.path == tmp_path / "sub" / "runs.db"
        mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_the_file_is_shared_with_another_component(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    store = RunStore(db)
    run_id = new_run(store)
    other = sqlite3.connect(db, timeout=5)  # what the LLM layer does with the same file
    other.execute("CREATE TABLE IF NOT EXISTS llm_calls (id INTEGER PRIMARY KEY, run_id TEXT, cost REAL)")
    other.execute("INSERT INTO llm_calls (run_id, cost) VALUES (?, 0.25)", (run_id,))
    other.commit()
    store.put_kernel(ROOT)  # the search keeps writing while the other connection is open
    store.close()
    with RunStore(db) as again:  # reopening keeps both components' data
        assert again.get_run(run_id).task_name == "softmax"
        assert again.kernel(ROOT.digest) == ROOT
    assert other.execute("SELECT cost FROM llm_calls").fetchall() == [(0.25,)]
    other.close()


def test_runs_are_listed_newest_first_and_found_by_unique_prefix(store: RunStore) -> None:
    first = new_run(store, "a")
    second = new_run(store, "b")
    assert [r.id for r in store.runs()] == [second, first]
    assert store.get_run(first[:-1]).id == first  # a unique prefix is enough
    assert store.get_run(second).task_name == "b"
    with pytest.raises(StoreError, match="no run 'zzz'"):
        store.get_run("zzz")
    with pytest.raises(StoreError, match="no run '%'"):
        store.get_run("%")  # LIKE wildcards are literal
    with pytest.raises(StoreError, match="run id '20' is ambiguous"):
        store.get_run("20")  # both ids start with the year


def test_update_run_changes_only_what_is_given(store: RunStore) -> None:
    run_id = new_run(store)
    store.update_run(run_id, status="finished", stop_reason="done", cost_usd=1.5, confirmed=True)
    store.update_run(run_id, elapsed_s=12.0)
    run = store.get_run(run_id)
    assert (run.status, run.stop_reason, run.cost_usd, run.elapsed_s, run.confirmed) == (
        "finished",
        "done",
        1.5,
        12.0,
        True,
    )


def test_evaluations_round_trip_and_are_never_stored_twice(store: RunStore) -> None:
    run_id = new_run(store)
    store.record_evaluation(
        run_id, node=node(ROOT.digest, 1), kernel=ROOT, result=ok_result(1.0), elapsed_s=3, cost_usd=0
    )
    edit_id = store.add_edit(run_id, parent_digest=ROOT.digest, edit=EDIT, outcome=EDIT_UNTRIED, seq=2, kernel=CHILD)
    failed = EvalResult(
        EvalStatus.COMPILE_ERROR,
        "nvcc failed",
        compile=CompileResult(False, None, CHILD.digest, "sm_90", 0.3, False, (CompileDiagnostic("error", "x", 3, 1),)),
    )
    store.record_evaluation(
        run_id, node=node(CHILD.digest, 3, ROOT.digest, edit_id), kernel=CHILD, result=failed, elapsed_s=4, cost_usd=0.1
    )
    results = store.evaluations(run_id)
    assert list(results) == [ROOT.digest, CHILD.digest]
    assert results[ROOT.digest] == ok_result(1.0)
    assert results[CHILD.digest].feedback() == "compile error:\nerror: line 3: x"
    assert store.status_counts(run_id) == {"compile_error": 1, "ok": 1}
    assert store.edits(run_id)[0].outcome == "evaluated"
    assert store.kernel(CHILD.digest) == CHILD
    run = store.get_run(run_id)
    assert (run.elapsed_s, run.cost_usd) == (4, 0.1)
    with pytest.raises(StoreError, match="write failed: UNIQUE constraint failed"):
        store.record_evaluation(
            run_id, node=node(CHILD.digest, 4), kernel=CHILD, result=failed, elapsed_s=5, cost_usd=0.1
        )
    assert store.evaluation_count(run_id) == 2


def test_edits_profiles_rewards_and_retimes(store: RunStore) -> None:
    run_id = new_run(store)
    store.record_evaluation(
        run_id, node=node(ROOT.digest, 1), kernel=ROOT, result=ok_result(1.0), elapsed_s=0, cost_usd=0
    )
    store.add_edit(run_id, parent_digest=ROOT.digest, edit=EDIT, outcome=EDIT_NOT_APPLIED, seq=2, message="no match")
    store.add_edit(run_id, parent_digest=ROOT.digest, edit=EDIT, outcome=EDIT_DUPLICATE, seq=3, kernel=ROOT)
    edits = store.edits(run_id)
    assert [(e.outcome, e.message, e.edit) for e in edits] == [
        ("not_applied", "no match", EDIT),
        ("duplicate", "", EDIT),
    ]
    assert store.edit_outcome_counts(run_id) == {"not_applied": 1, "duplicate": 1}
    store.set_reward(run_id, ROOT.digest, 0.25)
    store.set_closed(run_id, ROOT.digest, "its last 4 children failed")
    assert (store.nodes(run_id)[0].reward, store.nodes(run_id)[0].closed_reason) == (0.25, "its last 4 children failed")
    store.record_profile(run_id, ROOT.digest, proxy_score=0.4, roofline_fraction=None, text="memory-bound")
    assert store.profiles(run_id)[ROOT.digest].text == "memory-bound"
    timing = TimingStats(1.0, 0.9, 1.1, 0.8, 1.2, 30)
    store.record_retimes(run_id, 6, [(ROOT.digest, timing)])
    assert store.retimes(run_id) == {ROOT.digest: timing}


def test_a_run_moves_to_another_store_whole(store: RunStore, tmp_path: Path) -> None:
    """export_run / import_run (a Ray actor's store -> the driver's): every table, edit ids renumbered."""
    run_id = new_run(store)
    store.record_evaluation(run_id, node=node(ROOT.digest, 1), kernel=ROOT, result=ok_result(1.0), elapsed_s=1,
                            cost_usd=0)  # fmt: skip
    edit_id = store.add_edit(run_id, parent_digest=ROOT.digest, edit=EDIT, outcome=EDIT_UNTRIED, seq=2, kernel=CHILD)
    store.record_evaluation(run_id, node=node(CHILD.digest, 3, ROOT.digest, edit_id), kernel=CHILD,
                            result=ok_result(0.5), elapsed_s=2, cost_usd=0)  # fmt: skip
    store.record_profile(run_id, CHILD.digest, proxy_score=0.7, roofline_fraction=0.5, text="bandwidth-bound")
    store.record_retimes(run_id, 3, [(CHILD.digest, TimingStats(0.5, 0.5, 0.5, 0.5, 0.5, 9))])
    with RunStore(tmp_path / "driver.db") as driver:
        other = new_run(driver, "layernorm")  # the driver's own edits take the low ids
        driver.add_edit(other, parent_digest=ROOT.digest, edit=EDIT, outcome=EDIT_NOT_APPLIED, seq=1)
        assert driver.import_run(store.export_run(run_id)) == run_id
        assert driver.get_run(run_id) == store.get_run(run_id)
        assert driver.evaluations(run_id) == store.evaluations(run_id)
        assert driver.profiles(run_id) == store.profiles(run_id) and driver.retimes(run_id) == store.retimes(run_id)
        assert driver.kernel(CHILD.digest) == CHILD and driver.kernel(ROOT.digest) == ROOT
        (moved,) = driver.edits(run_id)
        child = next(n for n in driver.nodes(run_id) if n.digest == CHILD.digest)
        assert child.edit_id == moved.id != edit_id  # renumbered, and the node follows its edit
        assert [e.edit for e in driver.edits(other)] == [EDIT]
        with pytest.raises(StoreError, match="already in this store"):
            driver.import_run(store.export_run(run_id))
        bad = store.export_run(run_id)
        bad["nodes"] = [{**bad["nodes"][0], "no_such_column": 1}]
        bad["runs"] = [{**bad["runs"][0], "id": "other-run"}]
        with pytest.raises(StoreError, match="no column"):
            driver.import_run(bad)
        assert [r.id for r in driver.runs()].count("other-run") == 0  # nothing half-imported


def test_a_file_that_is_not_a_store_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(StoreError, match=r"notes\.db: cannot open the run store: file is not a database"):
        RunStore(bad)


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    RunStore(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE schema_versions SET version = 99 WHERE component = 'runs'")
    with pytest.raises(StoreError, match="schema v99 was written by a newer OptiML"):
        RunStore(db)


def test_a_stamp_another_process_writes_meanwhile_does_not_fail_the_open(tmp_path: Path) -> None:
    """A search and a reader of its progress may both find a new store unstamped; the one that stamps second
    must not fail on the other's stamp (seen once in CI: "UNIQUE constraint failed: schema_versions.component").
    Here the other process's stamp lands right before this store's own."""
    path = tmp_path / "runs.db"
    raced: list[str] = []

    def the_other_process_stamps_first(statement: str) -> None:
        if statement.startswith("INSERT") and "schema_versions" in statement and not raced:
            raced.append(statement)
            other = sqlite3.connect(path, timeout=30)
            with other:
                other.execute("INSERT INTO schema_versions VALUES ('runs', ?)", (SCHEMA_VERSION,))
            other.close()

    class RacedStore(RunStore):
        def _check_version(self) -> None:
            self._conn.set_trace_callback(the_other_process_stamps_first)
            try:
                super()._check_version()
            finally:
                self._conn.set_trace_callback(None)

    with RacedStore(path) as store:
        assert store.runs() == []
    assert raced
    with RunStore(path) as store:
        stamps = [tuple(row) for row in store._conn.execute("SELECT * FROM schema_versions")]
    assert stamps == [("runs", SCHEMA_VERSION)]
