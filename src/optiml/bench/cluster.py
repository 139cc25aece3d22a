"""`optiml bench --ray ADDRESS`: the same bench, its tasks run by Ray actors that each own a GPU worker.

Ray (an existing, widely used engine) does the scheduling; this module only adapts it to
:func:`optiml.bench.runner.run_bench`: one actor per GPU of the cluster (``num_gpus=1``, so Ray
sets the actor's ``CUDA_VISIBLE_DEVICES``), each with its own isolated worker; the driver's threads
hand tasks to the actors and gather their rows, and the driver writes ``bench.json`` /
``bench.md`` exactly as a local bench does. Task files travel with the request (the ``.py`` and a
shipped ``.naive.cu``), so the nodes need no shared file system; each actor keeps its runs in its
own store. Ray is an optional dependency (``pip install "optiml-cuda[ray]"``).
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from optiml.bench.metrics import BenchRow
from optiml.bench.runner import BenchConfig, BenchWorker, TaskJob, _worker_for, optimize_job
from optiml.errors import ConfigError

#: Builds, inside an actor, the job and the worker factory it runs tasks with (picklable).
JobFactory = Callable[[Path], tuple[TaskJob, Callable[[int | None], BenchWorker]]]


def default_factory(config: BenchConfig) -> JobFactory:
    def build(workdir: Path) -> tuple[TaskJob, Callable[[int | None], BenchWorker]]:
        return optimize_job(config, workdir), _worker_for

    return build


def _check_reachable(address: str) -> None:
    """Fail in seconds, not after Ray's minutes of retries, when nothing listens at ``host:port``."""
    target = address.removeprefix("ray://")
    if target == "auto" or ":" not in target:
        return
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--ray {address}: cannot connect to a Ray cluster: {exc}") from exc


def _ship(path: Path) -> dict[str, str]:
    files = {path.name: path.read_text(encoding="utf-8")}
    naive = path.with_name(path.stem + ".naive.cu")
    if naive.is_file():
        files[naive.name] = naive.read_text(encoding="utf-8")
    return files


class _Slot:
    """The driver's handle on one actor (what run_bench calls a worker). With ``store_path``, each
    task's search run comes back with its row and is added to the driver's run store."""

    def __init__(self, ray: Any, actor: Any, store_path: Path | None) -> None:
        self.ray = ray
        self.actor = actor
        self.store_path = store_path

    def run(self, path: Path) -> BenchRow:
        reply = self.ray.get(self.actor.run.remote(path.name, _ship(path)))
        row = BenchRow.from_dict(reply["row"])
        if reply.get("run") and self.store_path is not None:
            from optiml.store import RunStore

            with RunStore(self.store_path) as store:
                store.import_run(reply["run"])
        return row

    def stop(self) -> None:
        try:
            self.ray.get(self.actor.stop.remote(), timeout=30)
        finally:
            self.ray.kill(self.actor)


def ray_workers(
    address: str | None, config: BenchConfig, factory: JobFactory | None = None, store_path: Path | None = None
) -> tuple[BenchConfig, Callable[[int | None], BenchWorker], TaskJob]:
    """Connect to (or, with ``address`` None, start) a Ray cluster; returns the bench configuration with
    one slot per cluster GPU (or per ``config.gpus`` entry on a cluster without GPUs, for CPU-only jobs),
    the slot factory and the job that runs a task on a slot. With ``store_path`` (the bench's
    ``runs.db``), every task's search run is gathered there from the actor that ran it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError('--ray needs Ray: pip install "optiml-cuda[ray]" (or pip install ray)') from exc
    if address is not None:
        _check_reachable(address)
    try:
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError for a bad address
        raise ConfigError(f"--ray {address}: cannot connect to a Ray cluster: {exc}") from exc
    gpus = int(ray.cluster_resources().get("GPU", 0))
    factory = factory or default_factory(config)

    @ray.remote(num_gpus=1 if gpus else 0)
    class BenchActor:
        def __init__(self, build: JobFactory) -> None:
            self.dir = tempfile.TemporaryDirectory(prefix="optiml-bench-actor-")
            self.job, make = build(Path(self.dir.name))
            self.worker = make(None)  # Ray already confined this actor to its GPU

        def run(self, name: str, files: dict[str, str]) -> dict[str, Any]:
            task_dir = Path(self.dir.name) / "tasks"
            task_dir.mkdir(exist_ok=True)
            for file_name, text in files.items():
                (task_dir / file_name).write_text(text, encoding="utf-8")
            try:
                row = self.job(task_dir / name, self.worker, None)
            except Exception as exc:  # reported like a local failure
                first = (str(exc).strip().splitlines() or [""])[0]
                row = BenchRow(
                    task=Path(name).stem, file=name, status="failed", reason=f"{type(exc).__name__}: {first}"
                )
            return {"row": row.to_dict(), "run": self._export(row.run_id)}

        def _export(self, run_id: str | None) -> dict[str, Any] | None:
            """The task's search run from this actor's store (the job's ``WORKDIR/runs.db``), if any."""
            store_file = Path(self.dir.name) / "runs.db"
            if not run_id or not store_file.is_file():
                return None
            from optiml.store import RunStore

            with RunStore(store_file) as store:
                return store.export_run(run_id)

        def stop(self) -> None:
            self.worker.stop()

    slots = tuple(range(gpus)) if gpus else tuple(range(len(config.gpus)))
    sized = replace(config, gpus=slots)

    def make_slot(_: int | None) -> _Slot:
        return _Slot(ray, BenchActor.remote(factory), store_path)  # type: ignore[attr-defined]

    def job(path: Path, slot: Any, index: int | None) -> BenchRow:
        return slot.run(path)

    return sized, make_slot, job
