"""Advisory profiling: diagnoses arrive later, several candidates share one ncu launch, nobody waits.

A search node is final once it is timed; its diagnosis only feeds later proposals. So the engine
hands each timed candidate to a :class:`DiagnosisQueue` and carries on::

    profiler = Profiler(task, compiler, gpu_lock=evaluator.gpu_lock)   # holds it for its GPU work only
    queue = DiagnosisQueue(profiler, batch=3)
    future = queue.submit(kernel, result)          # returns at once
    future.add_done_callback(lambda f: inbox.put((node, f)))   # runs on the queue's thread

One background thread takes up to ``batch`` waiting candidates — as soon as ``batch`` wait, or
``max_wait_s`` after the first of them arrived — and runs :meth:`Profiler.diagnose_many` on them
(one ncu launch). A profiler built with the evaluator's lock holds it for its GPU work only, so a
profile never overlaps a timing; ``gpu_lock`` is for one built without (the queue then holds it over
the whole diagnosis) and must never be the lock the profiler holds itself. A failure of
the whole batch becomes each future's exception; a candidate ncu could not profile still gets a
diagnosis from static facts and timing, as :meth:`Profiler.diagnose` gives.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

from optiml.kernel.source import KernelSource
from optiml.profile.diagnosis import Diagnosis
from optiml.profile.profiler import Profiler
from optiml.values import EvalResult


@dataclass
class _Waiting:
    kernel: KernelSource
    result: EvalResult
    future: Future[Diagnosis]
    since: float


class DiagnosisQueue:
    """Diagnoses submitted candidates on one background thread, ``batch`` per ncu launch."""

    def __init__(
        self,
        profiler: Profiler,
        *,
        batch: int = 3,
        max_wait_s: float = 2.0,
        gpu_lock: threading.Lock | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.profiler = profiler
        self.batch = batch
        self.max_wait_s = max_wait_s
        self._gpu_lock = gpu_lock
        self._waiting: list[_Waiting] = []
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="optiml-diagnose", daemon=True)
        self._thread.start()

    def submit(self, kernel: KernelSource, result: EvalResult) -> Future[Diagnosis]:
        """Queue ``kernel`` (evaluated as ``result``) for diagnosis; never blocks."""
        future: Future[Diagnosis] = Future()
        with self._changed:
            if self._closed:
                raise RuntimeError("the diagnosis queue is closed")
            self._waiting.append(_Waiting(kernel, result, future, time.monotonic()))
            self._changed.notify()
        return future

    @property
    def waiting(self) -> int:
        with self._changed:
            return len(self._waiting)

    def flush(self) -> None:
        """Start the waiting candidates now instead of after ``max_wait_s``."""
        with self._changed:
            for item in self._waiting:
                item.since = float("-inf")
            self._changed.notify()

    def close(self, wait: bool = True) -> None:
        """Diagnose what waits, then stop (``wait=False``: cancel what has not started)."""
        with self._changed:
            self._closed = True
            if not wait:
                for item in self._waiting:
                    item.future.cancel()
                self._waiting.clear()
            self._changed.notify()
        if wait:
            self._thread.join()

    def _next_batch(self) -> list[_Waiting]:
        with self._changed:
            while True:
                if self._waiting:
                    due = self._waiting[0].since + self.max_wait_s
                    if len(self._waiting) >= self.batch or self._closed or time.monotonic() >= due:
                        taken, self._waiting = self._waiting[: self.batch], self._waiting[self.batch :]
                        return taken
                    self._changed.wait(max(0.0, due - time.monotonic()))
                elif self._closed:
                    return []
                else:
                    self._changed.wait()

    def _serve(self) -> None:
        while batch := self._next_batch():
            batch = [item for item in batch if item.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            try:
                with self._gpu_lock if self._gpu_lock is not None else contextlib.nullcontext():
                    diagnoses = self.profiler.diagnose_many([(item.kernel, item.result) for item in batch])
            except Exception as exc:  # the batch's failure is each candidate's, never the thread's end
                for item in batch:
                    item.future.set_exception(exc)
                continue
            for item, diagnosis in zip(batch, diagnoses, strict=True):
                item.future.set_result(diagnosis)
