"""The Evaluator: candidate source → screened → compiled → verified and timed → EvalResult.

Compiles run in parallel on CPU threads; GPU work is serialised through one isolated
worker per GPU. Every failure is a typed :class:`EvalResult`, never an exception, and
the per-phase wall times are recorded (compile, load, verify, time, recheck, close, total).

Every result leaves through :func:`optiml.redact.redact_value`: its messages, warnings and compiler
output came from a candidate (its crash, its stderr, what nvcc said about its source) and must
not carry a secret into what is printed, stored, reported or prompted (issue 39, class 6).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from optiml.errors import NoGPUError, TaskError, WorkerError
from optiml.evaluate.client import WorkerClient, WorkerCrashed, WorkerReplyError, WorkerTimeout
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.wire import KIND_GPU_MEMORY, KIND_NO_GPU, KIND_TASK
from optiml.integrity.screen import is_fp32_strict, screen_kernel
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource
from optiml.redact import redact_value
from optiml.task import Task
from optiml.values import EvalResult, EvalStatus, TimingStats


@dataclass(frozen=True)
class TaskFacts:
    """What the worker measured when preparing the task."""

    input_bytes: int
    output_bytes: int
    flops: float | None
    bandwidth: float
    prepare_seconds: float
    round_trip_ms: float = 0.0  # the judge's calibrated window around an empty candidate call (host clock)
    #: where the judge's timed windows end: "device" (the GPU's finishing the call) or "host" (the reply)
    window_end: str = "host"
    round_trip_event_ms: float = 0.0  # the same calibration on the judge's events, at that end
    peak_flops: float = 0.0  # the floor's compute roof (flop/s; 0 = the task declares no flops)
    notes: tuple[str, ...] = ()  # how the task is judged: distributions, tolerances, the floor's roofs
    #: seconds of each preparation step (the worker's cases, sensitivity and reference timings; the compute roof)
    prepare_steps: dict[str, float] = field(default_factory=dict)
    #: each convolution's arithmetic in the default-settings reference, by call signature (the worker measured it:
    #: :mod:`optiml.conv_arithmetic`); empty for an exact-fp32 task or one without convolutions
    convolutions: dict[str, str] = field(default_factory=dict)

    @property
    def floor_ms(self) -> float | None:
        """No correct kernel is faster: bytes over the measured bandwidth, flops over the compute roof."""
        times = [(self.input_bytes + self.output_bytes) / self.bandwidth * 1e3] if self.bandwidth > 0 else []
        if self.flops and self.peak_flops > 0:
            times.append(self.flops / self.peak_flops * 1e3)
        return max(times) if times else None


@dataclass(frozen=True)
class Retiming:
    """An interleaved re-timing: each kernel's and each reference mode's timing over the same rounds,
    and the samples behind them in the order taken."""

    kernels: list[TimingStats]
    references: dict[str, TimingStats]
    samples: list[list[float]]
    reference_samples: dict[str, list[float]]
    window_calls: list[int]  # each kernel's calls per timed window


def compile_check(task: Task, kernel: KernelSource, compiler: Compiler, *, screen: bool = True) -> EvalResult:
    """Screen and compile ``kernel``, nothing more (no GPU, no worker): ``ok`` means it compiled, with
    its ptxas resources in ``compile``; it is neither verified nor timed (``verify`` and ``timing`` stay
    None). ``optiml eval --compile-only`` and the evidence ``optiml propose`` gives an LLM."""
    start = time.perf_counter()
    warnings: list[str] = []
    if screen:
        report = screen_kernel(kernel, fp32_strict=is_fp32_strict(task.meta))
        if report.rejected:
            return redact_value(
                EvalResult(status=EvalStatus.REJECTED, message=report.message(), kernel_digest=kernel.digest)
            )
        warnings = report.warnings()
    compiled = compiler.compile(kernel)
    result = EvalResult(status=EvalStatus.OK, kernel_digest=kernel.digest, compile=compiled, warnings=warnings)
    if not compiled.ok:
        result.status = EvalStatus.COMPILE_ERROR
        result.message = compiled.error_summary(limit=1) or "compilation failed"
    result.phase_seconds["compile"] = round(compiled.seconds, 4)
    result.phase_seconds["total"] = round(time.perf_counter() - start, 4)
    return redact_value(result)


#: Said after a judge's out-of-memory error that a fresh worker met again.
GPU_MEMORY_RETRIED = (
    "twice, the second time on a fresh worker: the card's memory is held by another process, or by this candidate's"
)


class Evaluator:
    """Evaluates candidates of one task. Thread-safe; use as a context manager."""

    def __init__(
        self,
        task: Task,
        config: EvalConfig | None = None,
        compiler: Compiler | None = None,
        worker: WorkerClient | None = None,
        peak_flops: float | None = None,
    ) -> None:
        """``peak_flops``: the physics floor's compute roof in flop/s; None (the default) finds the GPU's
        (measured, cached, never below the datasheet: :mod:`optiml.evaluate.roofs`) when the task
        declares its flops; 0 leaves the floor to bandwidth alone."""
        self.task = task
        self.config = config or EvalConfig()
        self.compiler = compiler or Compiler(CompilerConfig(libraries=task.meta.libraries))
        self.worker = worker or WorkerClient()
        self.peak_flops = peak_flops
        self.reference: dict[str, TimingStats] = {}
        self.facts: TaskFacts | None = None
        self.incumbent: TimingStats | None = None  # fastest verified so far: slower candidates stop timing early
        self._gpu = threading.Lock()
        self._screen_warnings: dict[str, list[str]] = {}
        self._by_binary: dict[str, EvalResult] = {}  # binary digest → its evaluation (optiml.kernel.identity)

    @property
    def gpu_lock(self) -> threading.Lock:
        """Held while this evaluator uses the GPU; a profiler takes it too, so timings stay clean."""
        return self._gpu

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        with self._gpu:
            self.worker.stop()

    # -- public ------------------------------------------------------------------------------
    def prepare(self) -> TaskFacts:
        """Start the worker, build inputs and references, time the reference(s). Idempotent."""
        with self._gpu:
            return self._prepare_locked()

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        start = time.perf_counter()
        result = self._screen(kernel)
        if result is None:
            compiled = self.compiler.compile(kernel)
            result = self._run_compiled(kernel, compiled)
        result.phase_seconds["total"] = round(time.perf_counter() - start, 4)
        return redact_value(result)

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        """Compile all on the compile pool; verify and time each on the GPU as soon as it is built.
        Each result's ``total`` is the wall time from this call to that result."""
        start = time.perf_counter()
        screened = [self._screen(k) for k in kernels]
        to_build = [k for k, s in zip(kernels, screened, strict=True) if s is None]
        built = iter(self.compiler.prefetch(to_build))
        results = []
        for kernel, early in zip(kernels, screened, strict=True):
            result = early if early is not None else self._run_compiled(kernel, next(built).result())
            result.phase_seconds["total"] = round(time.perf_counter() - start, 4)
            results.append(redact_value(result))
        return results

    def prefetch(self, kernels: Sequence[KernelSource]) -> None:
        """Start compiling ``kernels`` that pass screening on the compile pool (see CostFunction.prefetch);
        a later evaluation of one joins its build instead of starting another."""
        self.compiler.prefetch([k for k in kernels if self.passes_screening(k)])

    def passes_screening(self, kernel: KernelSource) -> bool:
        """Whether static screening lets ``kernel`` be compiled (always, with screening off)."""
        return self._screen(kernel) is None

    def retime(self, kernels: Sequence[KernelSource], rounds: int = 5) -> list[TimingStats]:
        """Interleaved re-timing (A B A B …) of verified kernels, in the given order."""
        return self.retime_interleaved(kernels, rounds).kernels

    def retime_with_references(
        self, kernels: Sequence[KernelSource], rounds: int = 5
    ) -> tuple[list[TimingStats], dict[str, TimingStats]]:
        """:meth:`retime`, with every reference mode the task was prepared with timed in the same rounds."""
        self.prepare()  # the reference modes are known once prepared
        retimed = self.retime_interleaved(kernels, rounds, references=tuple(self.reference))
        return retimed.kernels, retimed.references

    def retime_interleaved(
        self, kernels: Sequence[KernelSource], rounds: int = 5, references: Sequence[str] = (), settle: int = 1
    ) -> Retiming:
        """Interleaved re-timing of verified kernels and of the reference ``references`` modes (eager,
        eager_tf32, compile) in the same rounds, so a speedup over a reference is read in one state of
        the GPU; ``settle`` untimed calls start every turn (see the worker's ``retime``)."""
        compiled = self.compiler.compile_many(list(kernels))
        paths = [c.so_path for c in compiled]
        if not all(paths):
            raise WorkerError("retime needs kernels that compile")
        with self._gpu:
            self._prepare_locked()
            reply = self.worker.request(
                {
                    "op": "retime",
                    "task": str(self.task.path),
                    "so": paths,
                    "rounds": rounds,
                    "settle": settle,
                    "references": list(references),
                    "config": self.config.to_dict(),
                },
                timeout_s=self.config.timeout_s * max(1, len(paths) + len(references)) * rounds / 2,
            )
        return Retiming(
            kernels=[TimingStats(**t) for t in reply["timings"]],
            references={mode: TimingStats(**t) for mode, t in reply["reference_timings"].items()},
            samples=reply["samples"],
            reference_samples=reply["reference_samples"],
            window_calls=reply["window_calls"],
        )

    # -- internals ---------------------------------------------------------------------------
    def _screen(self, kernel: KernelSource) -> EvalResult | None:
        if not self.config.screen:
            return None
        report = screen_kernel(kernel, fp32_strict=is_fp32_strict(self.task.meta))
        if report.rejected:
            return EvalResult(status=EvalStatus.REJECTED, message=report.message(), kernel_digest=kernel.digest)
        self._screen_warnings[kernel.digest] = report.warnings()
        return None

    def _prepare_locked(self) -> TaskFacts:
        # A worker that timed out, crashed or replied fatal is gone (the client reaped it): prepare afresh.
        if self.facts is not None and self.worker.alive:
            return self.facts
        try:
            reply = self.worker.request(
                {"op": "prepare", "task": str(self.task.path), "config": self.config.to_dict()},
                timeout_s=self.config.prepare_timeout_s,
            )
        except WorkerReplyError as exc:
            message = str(exc)
            if exc.reply.kind == KIND_TASK:  # the worker loaded the resolved path: show the user's
                raise TaskError(message.replace(str(self.task.path), self.task.shown)) from exc
            if exc.reply.kind == KIND_NO_GPU:
                raise NoGPUError("no CUDA GPU is visible: evaluation needs one (run `optiml doctor`)") from exc
            raise WorkerError(f"preparing the task failed: {message}") from exc
        except (WorkerCrashed, WorkerTimeout) as exc:
            raise WorkerError(f"preparing the task failed: {exc}") from exc
        self.reference = {mode: TimingStats(**stats) for mode, stats in reply["reference"].items()}
        flops = reply.get("flops")
        roof_start = time.perf_counter()
        roof = self._compute_roof(flops)
        steps = {**reply.get("steps", {}), "compute roof": round(time.perf_counter() - roof_start, 2)}
        self.facts = TaskFacts(
            input_bytes=reply["input_bytes"],
            output_bytes=reply["output_bytes"],
            flops=flops,
            bandwidth=reply["bandwidth"],
            prepare_seconds=reply["seconds"],
            round_trip_ms=float(reply.get("round_trip", {}).get("host_ms", 0.0)),
            window_end=str(reply.get("round_trip", {}).get("window_end", "host")),
            round_trip_event_ms=float(reply.get("round_trip", {}).get("event_ms", 0.0)),
            peak_flops=self.peak_flops or 0.0,
            notes=(*reply.get("notes", ()), roof),
            prepare_steps=steps,
            convolutions=dict(reply.get("convolutions", {})),
        )
        return self.facts

    def _compute_roof(self, flops: float | None) -> str:
        """Settle :attr:`peak_flops` (see ``__init__``); the floor's description for the task notes."""
        source = "none"
        if self.peak_flops is None:
            self.peak_flops = 0.0
            if flops:
                from optiml.evaluate.roofs import compute_roof

                try:
                    found = compute_roof(self.task, self.compiler)
                    self.peak_flops, source = found.flops_per_s, found.source
                except (OSError, ValueError, RuntimeError) as exc:  # no peaks: the floor keeps its bandwidth term
                    source = f"unknown ({type(exc).__name__}: {exc})"
        else:
            source = f"{self.peak_flops / 1e12:.1f} TFLOP/s (given)" if self.peak_flops else "none"
        if not flops:
            return "physics floor: bytes / measured copy bandwidth (the task declares no flops: no compute term)"
        return f"physics floor: bytes / measured copy bandwidth, and flops / compute roof {source}"

    def _run_compiled(self, kernel: KernelSource, compiled: Any) -> EvalResult:
        result = EvalResult(status=EvalStatus.OK, kernel_digest=kernel.digest, compile=compiled)
        result.warnings.extend(self._screen_warnings.pop(kernel.digest, []))
        result.phase_seconds["compile"] = round(compiled.seconds, 4)
        if not compiled.ok:
            result.status = EvalStatus.COMPILE_ERROR
            result.message = compiled.error_summary(limit=1) or "compilation failed"
            return result
        earlier = self._by_binary.get(compiled.binary_digest) if compiled.binary_digest else None
        if earlier is not None:  # the same device and host code was judged already: its verdict stands
            note = f"same binary as {earlier.kernel_digest}: its evaluation is reused, not repeated"
            return replace(
                earlier,
                kernel_digest=kernel.digest,
                compile=compiled,
                warnings=[*result.warnings, note],
                phase_seconds={"compile": result.phase_seconds["compile"]},
            )
        waiting = time.perf_counter()
        with self._gpu:
            result.phase_seconds["gpu_wait"] = round(time.perf_counter() - waiting, 4)
            self._prepare_locked()
            result.reference = dict(self.reference)
            result.task_notes = list(self.facts.notes) if self.facts else []
            if self.worker.requests_served >= self.config.worker_recycle:
                self.worker.start()
                self.facts = None
                self._prepare_locked()
            try:
                reply = self._judge(compiled.so_path)
            except WorkerTimeout as exc:  # the client killed the worker: the next request prepares afresh
                result.status, result.message = EvalStatus.TIMEOUT, str(exc)
                return result
            except WorkerCrashed as exc:
                result.status, result.message = EvalStatus.CRASH, str(exc)
                return result
            except WorkerReplyError as exc:
                result.status = EvalStatus(exc.reply.status) if exc.reply.status else EvalStatus.RUNTIME_ERROR
                result.message = str(exc)
                if exc.reply.kind == KIND_GPU_MEMORY:
                    result.message += f" ({GPU_MEMORY_RETRIED})"
                return result
        self._take_judged(result, EvalResult.from_dict(reply["evaluation"]))
        faster = result.timing is not None and (
            self.incumbent is None or result.timing.median_ms < self.incumbent.median_ms
        )
        if result.ok and faster:
            self.incumbent = result.timing
        if compiled.binary_digest:
            self._by_binary[compiled.binary_digest] = result
        return result

    def _judge(self, so_path: str) -> dict[str, Any]:
        """The judge's reply on the shared object at ``so_path`` (the GPU lock held, the task prepared). A judge
        that ran out of GPU memory is asked once more: after such a reply its worker is gone, and with it the
        candidate process that may have held the memory, so the retry prepares on a fresh worker."""
        try:
            return self._request_evaluation(so_path)
        except WorkerReplyError as exc:
            if exc.reply.kind != KIND_GPU_MEMORY:
                raise
        self._prepare_locked()
        return self._request_evaluation(so_path)

    def _request_evaluation(self, so_path: str) -> dict[str, Any]:
        return self.worker.request(
            {
                "op": "evaluate",
                "task": str(self.task.path),
                "so": so_path,
                "config": self.config.to_dict(),
                "peaks": {
                    "bandwidth": self.facts.bandwidth if self.facts else 0.0,
                    "flops": self.peak_flops or 0.0,
                },
                "incumbent": asdict(self.incumbent) if self.incumbent is not None else None,
            },
            timeout_s=self.config.timeout_s,
        )

    @staticmethod
    def _take_judged(result: EvalResult, judged: EvalResult) -> None:
        """The judge's verdict into ``result``, which holds what the orchestrator knows (compile, references)."""
        result.status, result.message = judged.status, judged.message
        result.verify, result.timing, result.floor_ms = judged.verify, judged.timing, judged.floor_ms
        result.warnings.extend(judged.warnings)
        result.phase_seconds.update(judged.phase_seconds)
        result.memory = dict(judged.memory)
        result.clock = dict(judged.clock)
