"""What an export says about verification, from the run store.

A :class:`Verification` is the newest stored evaluation that verified this kernel (same digest)
for this task (same source digest); every export names its run, date, shape sets, trials and
tolerances. Without one an export is labelled UNVERIFIED and warns when loaded (``optiml export``
refuses to write it unless ``--unverified``: an export is the file people ship, so its label must
not be a default).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from optiml.kernel.source import KernelSource
from optiml.task import Task


@dataclass(frozen=True)
class Verification:
    """What OptiML verified about an exported kernel, from the run store."""

    run_id: str
    verified_at: str  # UTC, "YYYY-MM-DD HH:MM UTC"
    kernel_digest: str
    task_digest: str
    shape_sets: tuple[int, ...]  # the task's shape sets the trials covered (0 = the file as written)
    total_shape_sets: int
    trials: int
    seeds: tuple[int, ...]
    distributions: tuple[str, ...]
    dtype: str
    atol: float
    rtol: float
    max_abs_err: float | None
    max_rel_err: float | None
    arch: str
    time_ms: float | None

    def summary(self) -> str:
        sets = ", ".join(map(str, self.shape_sets)) or "not recorded"
        return (
            f"run {self.run_id} ({self.verified_at}), kernel {self.kernel_digest}, task {self.task_digest}, "
            f"shape sets {sets} of {self.total_shape_sets}, {self.trials} trials, atol {self.atol:g} rtol {self.rtol:g}"
        )

    def lines(self) -> list[str]:
        """The docstring's account, one fact a line."""
        sets = ", ".join(map(str, self.shape_sets)) if self.shape_sets else "not recorded"
        errors = (
            f"; max abs error {self.max_abs_err:.3g}, max rel error {self.max_rel_err:.3g}"
            if self.max_abs_err is not None and self.max_rel_err is not None
            else ""
        )
        timed = f", median {self.time_ms:.4f} ms" if self.time_ms is not None else ""
        return [
            f"run {self.run_id}, evaluated {self.verified_at}, compiled for {self.arch}{timed};",
            f"kernel digest {self.kernel_digest}; task digest {self.task_digest} (the reference below, verbatim);",
            f"shape sets {sets} of the task's {self.total_shape_sets} (0 is the file as written);",
            f"{self.trials} trials (seeds {', '.join(map(str, self.seeds)) or '-'}; input distributions "
            f"{', '.join(self.distributions) or '-'}){errors};",
            f"tolerance |out - ref| <= {self.atol:g} + {self.rtol:g} * |ref| per element, dtype {self.dtype}.",
        ]


def find_verification(store_path: str | Path, task: Task, kernel: KernelSource) -> Verification | None:
    """The run store's newest verified evaluation of ``kernel`` for ``task``, or None (also when the
    store does not exist: it is never created here)."""
    from optiml.store import RunStore

    path = Path(store_path)
    if not path.is_file():
        return None
    with RunStore(path) as store:
        found = store.verified_evaluation(kernel.digest, task.digest)
    if found is None:
        return None
    result = found.result
    trials = result.verify.trials if result.verify is not None else ()
    return Verification(
        run_id=found.run.id,
        verified_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(found.created_at)),
        kernel_digest=kernel.digest,
        task_digest=task.digest,
        shape_sets=tuple(sorted({t.shape_set for t in trials})),
        total_shape_sets=task.num_shape_sets,
        trials=len(trials),
        seeds=tuple(sorted({t.seed for t in trials})),
        distributions=tuple(sorted({t.distribution for t in trials})),
        dtype=task.meta.dtype,
        atol=task.meta.atol,
        rtol=task.meta.rtol,
        max_abs_err=result.verify.max_abs_err if result.verify is not None else None,
        max_rel_err=result.verify.max_rel_err if result.verify is not None else None,
        arch=result.compile.arch if result.compile is not None else "unknown",
        time_ms=result.time_ms,
    )


def statement(task: Task, kernel: KernelSource, verification: Verification | None, store: str = "") -> dict[str, Any]:
    """What every export template says about verification: ``verification`` (the account, one fact a
    line, or None), ``verification_record`` (the Python literal of :class:`Verification`, or ``"None"``),
    and the digests and store the UNVERIFIED label names."""
    return {
        "verification": verification.lines() if verification is not None else None,
        "verification_record": repr(asdict(verification)) if verification is not None else "None",
        "digest": kernel.digest,
        "task_digest": task.digest,
        "store": store or "the run store",
    }
