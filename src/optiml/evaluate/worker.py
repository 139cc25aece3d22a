"""The judge: the isolated GPU worker that verifies and times candidates.

Run as ``python -m optiml.evaluate.worker``. It speaks JSON lines: one request per line on
stdin, one reply per line on the original stdout (fd 1 is redirected to stderr at start).
Requests::

    {"op": "hello"}                                        → device facts
    {"op": "prepare", "task": PATH, "config": {...}}       → reference timings, bytes, flops, round trip
    {"op": "evaluate", "task": PATH, "so": PATH, "config": {...}, "peaks": {...}, "incumbent": {...}}
                                                           → {"evaluation": EvalResult, "judge": evidence}
    {"op": "retime", "task": PATH, "so": [PATH, ...], "rounds": N, "settle": N, "references": [MODE, ...],
     "config": {...}}                                      → interleaved timings of candidates and references
    {"op": "shutdown"}

Replies follow :mod:`optiml.evaluate.wire`: ``{"ok": true, "result": {...}}`` or
``{"ok": false, "error": "one line", ...}``, either with ``"fatal": true`` when this worker exits
right after it.

This process never loads a candidate: each one runs in a candidate process of its own
(``optiml.evaluate.judge``), so a candidate's host code — static constructors included — cannot
reach the interpreter that compares, checks and times. It also makes itself non-dumpable, so a
candidate process of the same user cannot ptrace it or read its memory through /proc. A
candidate's CUDA fault poisons only its own process's context; after a fatal error of the
judge's own context (out of memory here) the worker replies and exits with code 3, and the
client starts a fresh one. Imports: standard library, NumPy and torch only.

**Its own import path** (issue 39, class 8). Candidates write only in their directories under
this process's working directory, so no entry of ``sys.path`` may lie there: ``python -m`` puts
the working directory first, and a later lazy import (``torch.compile`` loads modules on first
use) would run a ``triton.py`` a candidate left there. :func:`secure_import_path` drops the
working directory's entries at start and refuses to serve (a fatal reply) when another entry —
``PYTHONPATH``, a site folder — still lies under it; where candidates run unconfined, entries
this user can write are named in the task notes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import torch

from optiml.conv_arithmetic import describe as describe_convolutions
from optiml.errors import TaskError
from optiml.evaluate.candidate_link import candidates_confined, isolation_note, require_isolation
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.cudart import CudaError
from optiml.evaluate.harness import (
    CandidateFailure,
    CaseSeeds,
    Peaks,
    TimingBench,
    evaluate_candidate,
    timing_cases,
)
from optiml.evaluate.judge import CandidateSession, Judge, set_dumpable
from optiml.evaluate.memory import reset_peak
from optiml.evaluate.runtime import TaskRuntime
from optiml.evaluate.timing import DeviceTimer, StopRule, TimedCall, run_trials
from optiml.evaluate.wire import KIND_GPU_MEMORY, KIND_NO_GPU, KIND_TASK, encode, failure, success
from optiml.task import Task, load_task
from optiml.task_runtime import torch_default_precision
from optiml.values import EvalStatus, TimingStats

EXIT_FATAL = 3

#: Reference modes: exact eager (TF32 off, half GEMMs reduced in fp32: what candidates are verified
#: against), eager with PyTorch's default settings as this process found them at start (TF32
#: convolutions through cuDNN, reduced-precision half GEMM reductions; TF32 matmuls only where the
#: environment turns them on), and torch.compile under the same defaults, as a user's one line runs it and as
#: the user's process times it (``optiml.bench.user_clock_child``: until 2026-12-06 the judge ran it exact, and
#: read the starter conv2d's compile 4.7x slower than the user's process did).
REFERENCE_MODES = ("eager", "eager_tf32", "compile")
#: The modes timed under PyTorch's default precision settings.
DEFAULT_PRECISION_MODES = ("eager_tf32", "compile")


def request_config(request: dict[str, Any]) -> EvalConfig:
    """The request's evaluation settings, its isolation policy applied to the candidate processes started next."""
    config = EvalConfig.from_dict(request.get("config", {}))
    require_isolation(config.isolation == "required")
    return config


class NoCudaDevice(RuntimeError):
    """The worker sees no CUDA device (replied with kind :data:`~optiml.evaluate.wire.KIND_NO_GPU`)."""


class UnsafeImportPath(RuntimeError):
    """An entry of the judge's ``sys.path`` lies where candidates can write."""


def secure_import_path(path: list[str], workdir: Path, confined: bool) -> list[str]:
    """Drop from ``path`` (``sys.path``, changed in place) the working directory (``""``, ``"."`` or
    ``workdir`` itself); raise :class:`UnsafeImportPath` for an entry that still lies under ``workdir``,
    where candidates write. Returns notes: where candidates are not ``confined`` to their view, the
    entries this user (and so a candidate) can write."""
    root = workdir.resolve()
    path[:] = [entry for entry in path if entry not in ("", ".") and Path(entry).resolve() != root]
    inside = [entry for entry in path if Path(entry).resolve().is_relative_to(root)]
    if inside:
        raise UnsafeImportPath(
            f"the judge's import path has folders where candidates write: {', '.join(inside)} (under {root})"
        )
    if confined:
        return []
    writable = [entry for entry in path if os.path.isdir(entry) and os.access(entry, os.W_OK)]
    if not writable:
        return []
    return [
        f"candidates run unconfined and could write these folders of the judge's import path: {', '.join(writable)}"
    ]


class Worker:
    def __init__(self) -> None:
        if not torch.cuda.is_available():
            raise NoCudaDevice("no CUDA device is visible to the worker")
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.runtimes: dict[str, TaskRuntime] = {}
        self.case_seeds = CaseSeeds()  # the task's cases' seeds (one task at a time, as runtimes)
        self.references: dict[tuple[str, str], TimingStats] = {}
        self._bandwidth: float | None = None
        self.judge = Judge(self.device, Path.cwd())
        self.unusable = False  # the judge's own CUDA context broke: reply, then exit (EXIT_FATAL)
        self.isolation_notes: list[str] = []  # how candidates are confined, said with every task's notes

    # -- ops ---------------------------------------------------------------------------------
    def hello(self, _: dict[str, Any]) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(self.device)
        return {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "memory_bytes": props.total_memory,
            "free_bytes": torch.cuda.mem_get_info(self.device)[0],  # what the card has left beside this process
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "pid": os.getpid(),
        }

    def prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        runtime = self.runtime(request["task"])
        config = request_config(request)
        start = time.perf_counter()
        steps: dict[str, float] = {}
        lap = start

        def step(name: str) -> None:  # seconds since the previous step, for the bench's phases
            nonlocal lap
            now = time.perf_counter()
            steps[name], lap = round(now - lap, 2), now

        seeds = self.case_seeds
        for distribution in runtime.task.meta.distributions:  # their first cases settle which are usable
            runtime.case(seeds.seed(distribution), 0, distribution)
        runtime.measure_outputs(seeds.seed())  # low-information outputs (sensitivity.py)
        step("sensitivity")
        notes = list(runtime.notes)  # distributions used, tolerances adjusted (runtime.py)
        case = runtime.case(seeds.seed())
        step("case")
        convolutions = runtime.convolution_arithmetic(case.model, case.args)
        if convolutions:
            step("convolutions")
            notes.append(describe_convolutions(convolutions))
        notes += [note for note in runtime.notes if note not in notes]  # one saying it could not measure
        modes = [m for m in REFERENCE_MODES if m in (*config.reference_modes, "eager_tf32")]
        references = {}
        for mode in modes:
            references[mode] = asdict(self.reference_timing(runtime, mode, config))
            step(f"reference {mode}")
        return {
            "reference": references,
            "input_bytes": case.input_bytes(),
            "output_bytes": case.output_bytes(),
            "flops": runtime.task.flops(0),
            "convolutions": convolutions,
            "bandwidth": self.bandwidth(),
            "round_trip": asdict(self.judge.calibration()),
            "notes": [
                *notes,
                isolation_note(),
                *self.isolation_notes,
                self.judge.calibration().note(),
                *self.judge.notes,
            ],
            "seconds": time.perf_counter() - start,
            "steps": steps,
        }

    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        runtime = self.runtime(request["task"])
        config = request_config(request)
        peaks_in = request.get("peaks") or {}
        peaks = Peaks(
            bandwidth=float(peaks_in.get("bandwidth") or self.bandwidth()),
            flops=float(peaks_in.get("flops", 0.0)),
        )
        incumbent = request.get("incumbent")
        reset_peak(runtime.device)
        judged = evaluate_candidate(
            self.judge,
            runtime,
            request["so"],
            config,
            peaks,
            runtime.task.flops(0),
            self.case_seeds,
            TimingStats(**incumbent) if incumbent else None,
        )
        judged.result.memory = runtime.memory_report()  # peak since reset_peak, against the footprint (memory.py)
        self.unusable = judged.fatal
        return {"evaluation": judged.result.to_dict(), "judge": judged.judge}

    def retime(self, request: dict[str, Any]) -> dict[str, Any]:
        """Interleaved timing (A B C A B C …) of already verified candidates, each in its own process,
        and of the reference modes named in ``references`` (timed here, after the candidates, each round).

        Each turn in a round starts with ``settle`` untimed calls (at least one in the first round):
        the first window after another process's turn runs cold. The reply's ``samples`` and
        ``reference_samples`` are the per-sample times in the order taken."""
        runtime = self.runtime(request["task"])
        config = request_config(request)
        rounds = int(request.get("rounds", 5))
        settle = int(request.get("settle", 1))
        per_round = StopRule(min_trials=max(3, config.min_trials // 2), max_trials=config.min_trials, seconds=0.0)
        calibration = self.judge.calibration()
        modes = request.get("references", [])
        turns = max(1, len(request["so"]) + len(modes))  # the client's timeout counts the same turns
        deadline = time.monotonic() + max(1.0, config.timeout_s * turns * rounds / 2 - 3)
        stream = torch.cuda.Stream(device=self.device)
        timer = DeviceTimer(stream, flush_l2=config.flush_l2)
        references = {mode: self._reference_calls(runtime, mode) for mode in modes}
        sessions: list[CandidateSession] = []
        try:
            benches = []
            for path in request["so"]:
                session = CandidateSession(self.judge, self.judge.take_process(), deadline)
                sessions.append(session)
                session.load(path)
                benches.append(
                    TimingBench(session, runtime, timing_cases(runtime, self.case_seeds), window_end=config.window_end)
                )
            samples: list[list[float]] = [[] for _ in benches]
            reference_samples: dict[str, list[float]] = {mode: [] for mode in references}
            for round_ in range(rounds):
                warmup = max(settle, 1 if round_ == 0 else 0)
                for index, bench in enumerate(benches):
                    samples[index].extend(bench.series(calibration, warmup=warmup, rule=per_round).event_ms)
                for mode, calls in references.items():
                    with _reference_series(mode, stream):
                        reference_samples[mode].extend(run_trials(timer, calls, warmup=warmup, rule=per_round).event_ms)
        except CandidateFailure as failure:
            raise CandidateFailure(failure.status, f"while re-timing: {failure.message}") from failure
        finally:
            for session in sessions:
                session.close()
        return {
            "timings": [asdict(TimingStats.from_samples(s)) for s in samples],
            "samples": samples,
            "window_calls": [bench.width for bench in benches],
            "reference_timings": {m: asdict(TimingStats.from_samples(s)) for m, s in reference_samples.items()},
            "reference_samples": reference_samples,
        }

    # -- helpers -----------------------------------------------------------------------------
    def runtime(self, task_path: str) -> TaskRuntime:
        if task_path not in self.runtimes:
            task: Task = load_task(task_path)
            self.judge.forget_buffers()
            self.runtimes = {task_path: TaskRuntime(task, str(self.device))}  # one task at a time in memory
            self.case_seeds = CaseSeeds()  # drawn from OS entropy as the task's cases are built
            self.references = {k: v for k, v in self.references.items() if k[0] == task_path}
        return self.runtimes[task_path]

    def reference_timing(self, runtime: TaskRuntime, mode: str, config: EvalConfig) -> TimingStats:
        key = (str(runtime.task.path), mode)
        if key in self.references:
            return self.references[key]
        stream = torch.cuda.Stream(device=self.device)
        timer = DeviceTimer(stream, flush_l2=config.flush_l2)
        calls = self._reference_calls(runtime, mode)
        rule = StopRule(config.min_trials, config.max_trials, config.timing_seconds, config.timing_precision)
        with _reference_series(mode, stream):
            samples = run_trials(
                timer, calls, warmup=max(config.warmup_calls, 3 if mode == "compile" else 1), rule=rule
            )
        stats = TimingStats.from_samples(samples.event_ms, samples.wall_ms, stop=samples.stop)
        self.references[key] = stats
        return stats

    def _reference_calls(self, runtime: TaskRuntime, mode: str) -> list[TimedCall]:
        """The reference's calls in ``mode`` (eager, eager_tf32, compile), one per timing input, each on the
        stream current when it is made (:func:`_reference_series`)."""
        if mode not in REFERENCE_MODES:
            raise ValueError(f"unknown reference mode {mode!r} ({', '.join(REFERENCE_MODES)})")
        first, second = timing_cases(runtime, self.case_seeds)  # one model (compiled once), two input sets
        forward: Callable[..., Any] = torch.compile(first.model) if mode == "compile" else first.model
        inputs = (first.args, second.args)
        return [(functools.partial(_run_reference, forward, args), None, None) for args in inputs]

    def bandwidth(self) -> float:
        """Device-to-device copy bandwidth in bytes/s (read + write), measured once per worker."""
        if self._bandwidth is None:
            n = 256 * 1024 * 1024
            src = torch.empty(n, dtype=torch.uint8, device=self.device)
            dst = torch.empty_like(src)
            dst.copy_(src)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                dst.copy_(src)
            end.record()
            torch.cuda.synchronize()
            self._bandwidth = 2 * n * 10 / (start.elapsed_time(end) / 1e3)
            del src, dst
        return self._bandwidth


def _precision(mode: str) -> contextlib.AbstractContextManager[Any]:
    """PyTorch's default matmul/conv precision for ``eager_tf32`` and ``compile``; the exact fp32 set-up otherwise."""
    return torch_default_precision() if mode in DEFAULT_PRECISION_MODES else contextlib.nullcontext()


@contextlib.contextmanager
def _reference_series(mode: str, stream: torch.cuda.Stream) -> Iterator[None]:
    """A reference's timed series in ``mode``'s precision with ``stream`` current throughout: entering a
    stream per call costs ~20 us of host time inside the timed window, which a compiled reference's launch
    does not hide behind the flush (``torch.compile`` calls of ~0.2 ms read 5-10 % slower that way, H100,
    ``benchmarks/results/compile_clock_suspects_h100_2026-12-06.json``), and a user's call enters none."""
    with _precision(mode), torch.cuda.stream(stream):
        yield


def _run_reference(forward: Callable[..., Any], args: list[Any]) -> None:
    with torch.no_grad():
        forward(*args)


def serve(requests: IO[str], replies: IO[str]) -> int:
    try:
        path_notes = secure_import_path(sys.path, Path.cwd(), candidates_confined())
        worker = Worker()
        worker.isolation_notes = path_notes
    except NoCudaDevice as exc:
        _reply(replies, failure(f"worker could not start: {exc}", kind=KIND_NO_GPU, fatal=True))
        return EXIT_FATAL
    except UnsafeImportPath as exc:
        _reply(replies, failure(f"worker refused to start: {exc}", fatal=True))
        return EXIT_FATAL
    except Exception as exc:
        _reply(replies, failure(f"worker could not start: {exc}", fatal=True))
        return EXIT_FATAL
    try:
        return _serve(worker, requests, replies)
    finally:
        worker.judge.close()  # the spare candidate process dies with the judge


#: What PyTorch, the runtime and the driver say when an allocation finds the card full (in the text of an error that
#: wraps one, such as a task's failing ``get_inputs``).
_OUT_OF_MEMORY = ("out of memory", "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY")


def out_of_gpu_memory(exc: BaseException) -> bool:
    """Whether ``exc``, raised in the judge's own code, is the GPU's memory running out (PyTorch's
    ``OutOfMemoryError``, a CUDA error 2 from the runtime or the driver) rather than a harness bug."""
    if isinstance(exc, CudaError):
        return exc.out_of_memory
    return type(exc).__name__ == "OutOfMemoryError" or any(marker in str(exc) for marker in _OUT_OF_MEMORY)


def _out_of_gpu_memory_reply(cause: str) -> dict[str, Any]:
    """The fatal reply for the judge's own allocation failing: the orchestrator asks once more on a fresh worker, and
    a second such reply stands as the candidate's out-of-memory verdict (its process may be what holds the card)."""
    return failure(
        f"the judge ran out of GPU memory: {cause}",
        status=EvalStatus.OUT_OF_MEMORY.value,
        kind=KIND_GPU_MEMORY,
        fatal=True,
    )


def _serve(worker: Worker, requests: IO[str], replies: IO[str]) -> int:
    handlers = {
        "hello": worker.hello,
        "prepare": worker.prepare,
        "evaluate": worker.evaluate,
        "retime": worker.retime,
    }
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
        except json.JSONDecodeError as exc:
            _reply(replies, failure(f"malformed request: {exc}"))
            continue
        if op == "shutdown":
            _reply(replies, success({}))
            return 0
        handler = handlers.get(op)
        if handler is None:
            _reply(replies, failure(f"unknown op {op!r}"))
            continue
        try:
            result = handler(request)
        except TaskError as exc:
            if out_of_gpu_memory(exc):  # the task's inputs or reference did not fit beside what holds the card
                _reply(replies, _out_of_gpu_memory_reply(str(exc)))
                return EXIT_FATAL
            _reply(replies, failure(str(exc), kind=KIND_TASK))
            continue
        except CandidateFailure as fault:
            _reply(replies, failure(fault.message, status=fault.status.value, fatal=fault.fatal))
            if fault.fatal:
                return EXIT_FATAL
            worker.judge.keep_spare()
            continue
        except Exception as exc:  # a harness bug must not take the orchestrator down with it
            traceback.print_exc(file=sys.stderr)
            if out_of_gpu_memory(exc):  # the judge's own allocation: not the candidate's verdict
                _reply(replies, _out_of_gpu_memory_reply(f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
            else:
                _reply(replies, failure(f"worker error: {type(exc).__name__}: {exc}", fatal=True))
            return EXIT_FATAL
        _reply(replies, success(result, fatal=worker.unusable))
        if worker.unusable:
            return EXIT_FATAL
        worker.judge.keep_spare()  # the next candidate's process starts while the orchestrator compiles
    return 0


def _reply(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(encode(message))
    stream.flush()


def main() -> int:
    with contextlib.suppress(OSError, AttributeError):
        set_dumpable(False)  # candidate processes (same user) cannot ptrace the judge or read its memory
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # nothing printed here can corrupt the protocol
    replies = os.fdopen(protocol_fd, "w", buffering=1)
    sys.stdout = sys.stderr
    return serve(sys.stdin, replies)


if __name__ == "__main__":
    sys.exit(main())
