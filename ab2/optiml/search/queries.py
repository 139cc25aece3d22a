"""Read-only views of stored runs: the list of runs, and a run's best path (finished or not)."""

from __future__ import annotations

from dataclasses import dataclass

from optiml.kernel.source import KernelSource
from optiml.search.outcome import PathStep, path_steps
from optiml.store import RunRecord, RunStore


@dataclass(frozen=True)
class RunSummary:
    """One line of ``optiml runs``; times are re-timed figures when the run got that far."""

    run: RunRecord
    evaluations: int
    status_counts: dict[str, int]
    root_ms: float | None
    best_ms: float | None

    @property
    def speedup(self) -> float | None:
        return _ratio(self.root_ms, self.best_ms)


@dataclass(frozen=True)
class RunPath:
    """The best kernel of a run and the edits that led to it from the root.

    For a finished run the best is the one its final re-timing accepted (``root_ms`` and
    ``best_ms`` are then re-timed figures); for an unfinished run it is the fastest verified
    kernel so far, by search-time timings, and ``confirmed`` is False.
    """

    run: RunRecord
    best_digest: str
    best_kernel: KernelSource
    root_ms: float | None
    best_ms: float | None
    confirmed: bool
    steps: tuple[PathStep, ...]

    @property
    def speedup(self) -> float | None:
        return _ratio(self.root_ms, self.best_ms)


def list_runs(store: RunStore) -> list[RunSummary]:
    """Every run in the store, newest first."""
    summaries = []
    for run in store.runs():
        times = _times(store, run)
        counts = store.status_counts(run.id)
        summaries.append(
            RunSummary(
                run=run,
                evaluations=sum(counts.values()),
                status_counts=counts,
                root_ms=times.get(run.root_digest),
                best_ms=times.get(_best_digest(run, times)),
            )
        )
    return summaries


def best_path(store: RunStore, run_id: str) -> RunPath:
    """The run's best kernel and its edit path; StoreError for an unknown run."""
    run = store.get_run(run_id)
    times = _times(store, run)
    best = _best_digest(run, times)
    nodes = {n.digest: n for n in store.nodes(run.id)}
    edits = {e.id: e.edit for e in store.edits(run.id)}
    chain = []
    digest: str | None = best
    while digest is not None and digest in nodes:
        chain.append(nodes[digest])
        digest = nodes[digest].parent_digest
    search_times = store.verified_times(run.id)
    triples = [
        (edits.get(n.edit_id) if n.edit_id is not None else None, n.digest, search_times.get(n.digest))
        for n in reversed(chain)
    ]
    return RunPath(
        run=run,
        best_digest=best,
        best_kernel=store.kernel(best),
        root_ms=times.get(run.root_digest),
        best_ms=times.get(best),
        confirmed=run.confirmed,
        steps=path_steps(triples) if triples else (),
    )


def _times(store: RunStore, run: RunRecord) -> dict[str, float]:
    """Verified times of the run, the final re-timing's figures replacing the search's."""
    times = store.verified_times(run.id)
    times.update({digest: t.median_ms for digest, t in store.retimes(run.id).items()})
    return times


def _best_digest(run: RunRecord, times: dict[str, float]) -> str:
    if run.best_digest is not None:
        return run.best_digest
    return min(times, key=lambda d: times[d]) if times else run.root_digest


def _ratio(root_ms: float | None, best_ms: float | None) -> float | None:
    return root_ms / best_ms if root_ms is not None and best_ms else None
