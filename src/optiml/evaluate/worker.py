"""The isolated GPU worker: a child process that verifies and times candidates.

Run as ``python -m optiml.evaluate.worker``. It speaks JSON lines: one request per line on
stdin, one reply per line on the original stdout (fd 1 is redirected to stderr at start, so a
candidate's printf cannot corrupt the protocol). Requests::

    {"op": "hello"}                                        → device facts
    {"op": "prepare", "task": PATH, "config": {...}}       → reference timings, bytes, flops
    {"op": "evaluate", "task": PATH, "so": PATH, "config": {...}, "peaks": {...}}
    {"op": "retime", "task": PATH, "so": [PATH, ...], "rounds": N, "config": {...}}
    {"op": "shutdown"}

Replies are ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": "one line"}``.
After a fatal CUDA error (the context is poisoned) the worker replies and exits with code 3;
the client starts a fresh one. Imports: standard library, NumPy and torch only.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import IO, Any

import torch

from optiml.errors import TaskError
from optiml.evaluate.abi import KernelLibrary
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.harness import (
    CandidateFailure,
    CandidateRunner,
    Peaks,
    evaluate_candidate,
    synchronize_or_fail,
)
from optiml.evaluate.results import EvalStatus, TimingStats
from optiml.evaluate.runtime import TaskRuntime
from optiml.evaluate.timing import DeviceTimer, TimedCall, run_trials
from optiml.task import Task, load_task

EXIT_FATAL = 3


class Worker:
    def __init__(self) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device is visible to the worker")
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.runtimes: dict[str, TaskRuntime] = {}
        self.references: dict[tuple[str, str], TimingStats] = {}
        self._bandwidth: float | None = None

    # -- ops ---------------------------------------------------------------------------------
    def hello(self, _: dict[str, Any]) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(self.device)
        return {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "sms": props.multi_processor_count,
            "memory_bytes": props.total_memory,
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "pid": os.getpid(),
        }

    def prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        runtime = self.runtime(request["task"])
        config = EvalConfig.from_dict(request.get("config", {}))
        start = time.perf_counter()
        case = runtime.case(config.base_seed)
        references = {mode: asdict(self.reference_timing(runtime, mode, config)) for mode in config.reference_modes}
        return {
            "reference": references,
            "input_bytes": case.input_bytes(),
            "output_bytes": case.output_bytes(),
            "flops": runtime.task.flops(0),
            "bandwidth": self.bandwidth(),
            "seconds": time.perf_counter() - start,
        }

    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        runtime = self.runtime(request["task"])
        config = EvalConfig.from_dict(request.get("config", {}))
        peaks_in = request.get("peaks") or {}
        peaks = Peaks(
            bandwidth=float(peaks_in.get("bandwidth") or self.bandwidth()),
            flops=float(peaks_in.get("flops", 0.0)),
        )
        report = evaluate_candidate(runtime, request["so"], config, peaks, runtime.task.flops(0))
        result = asdict(report)
        result["status"] = report.status.value
        return result

    def retime(self, request: dict[str, Any]) -> dict[str, Any]:
        """Interleaved timing (A B C A B C …) of already verified candidates on the same inputs."""
        runtime = self.runtime(request["task"])
        config = EvalConfig.from_dict(request.get("config", {}))
        rounds = int(request.get("rounds", 5))
        stream = torch.cuda.Stream(device=self.device)
        timer = DeviceTimer(stream, flush_l2=config.flush_l2)
        cases = [runtime.case(config.base_seed + i) for i in range(max(1, config.timing_inputs))]
        groups = [CandidateRunner(runtime, KernelLibrary(path), stream).timed_calls(cases) for path in request["so"]]
        samples: list[list[float]] = [[] for _ in groups]
        for _ in range(rounds):
            for index, calls in enumerate(groups):
                got, failed_at = run_trials(
                    timer,
                    calls,
                    warmup=1,
                    min_trials=max(3, config.min_trials // 2),
                    max_trials=config.min_trials,
                    seconds=0.0,
                )
                if failed_at is not None:
                    raise CandidateFailure(
                        EvalStatus.WRONG_ANSWER, f"candidate {index} produced a wrong output while re-timing"
                    )
                samples[index].extend(got.event_ms)
        synchronize_or_fail()
        return {"timings": [asdict(TimingStats.from_samples(s)) for s in samples]}

    # -- helpers -----------------------------------------------------------------------------
    def runtime(self, task_path: str) -> TaskRuntime:
        if task_path not in self.runtimes:
            task: Task = load_task(task_path)
            self.runtimes = {task_path: TaskRuntime(task, str(self.device))}  # one task at a time in memory
            self.references = {k: v for k, v in self.references.items() if k[0] == task_path}
        return self.runtimes[task_path]

    def reference_timing(self, runtime: TaskRuntime, mode: str, config: EvalConfig) -> TimingStats:
        key = (str(runtime.task.path), mode)
        if key in self.references:
            return self.references[key]
        stream = torch.cuda.Stream(device=self.device)
        timer = DeviceTimer(stream, flush_l2=config.flush_l2)
        if mode not in ("eager", "compile"):
            raise ValueError(f"unknown reference mode {mode!r} (eager or compile)")
        calls: list[TimedCall] = []
        for i in range(max(1, config.timing_inputs)):
            case = runtime.case(config.base_seed + i)
            forward: Callable[..., Any] = torch.compile(case.model) if mode == "compile" else case.model
            calls.append((functools.partial(_run_reference, forward, case.args, stream), None, None))
        samples, _ = run_trials(
            timer,
            calls,
            warmup=max(config.warmup_calls, 3 if mode == "compile" else 1),
            min_trials=config.min_trials,
            max_trials=config.max_trials,
            seconds=config.timing_seconds,
        )
        stats = TimingStats.from_samples(samples.event_ms, samples.wall_ms)
        self.references[key] = stats
        return stats

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


def _run_reference(forward: Callable[..., Any], args: list[Any], stream: torch.cuda.Stream) -> None:
    with torch.no_grad(), torch.cuda.stream(stream):
        forward(*args)


def serve(requests: IO[str], replies: IO[str]) -> int:
    try:
        worker = Worker()
    except Exception as exc:
        _reply(replies, {"ok": False, "error": f"worker could not start: {exc}", "fatal": True})
        return EXIT_FATAL
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
            _reply(replies, {"ok": False, "error": f"malformed request: {exc}"})
            continue
        if op == "shutdown":
            _reply(replies, {"ok": True, "result": {}})
            return 0
        handler = handlers.get(op)
        if handler is None:
            _reply(replies, {"ok": False, "error": f"unknown op {op!r}"})
            continue
        try:
            result = handler(request)
        except TaskError as exc:
            _reply(replies, {"ok": False, "error": str(exc), "kind": "task"})
            continue
        except CandidateFailure as failure:
            _reply(
                replies,
                {
                    "ok": False,
                    "error": failure.message,
                    "status": failure.status.value,
                    "fatal": failure.fatal,
                },
            )
            if failure.fatal:
                return EXIT_FATAL
            continue
        except Exception as exc:  # a harness bug must not take the orchestrator down with it
            traceback.print_exc(file=sys.stderr)
            _reply(replies, {"ok": False, "error": f"worker error: {type(exc).__name__}: {exc}", "fatal": True})
            return EXIT_FATAL
        _reply(replies, {"ok": True, "result": result})
        if result.get("fatal"):
            return EXIT_FATAL
    return 0


def _reply(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def main() -> int:
    protocol_fd = os.dup(1)
    os.dup2(2, 1)  # anything the candidate prints goes to stderr, never into the protocol
    replies = os.fdopen(protocol_fd, "w", buffering=1)
    sys.stdout = sys.stderr
    return serve(sys.stdin, replies)


if __name__ == "__main__":
    sys.exit(main())
