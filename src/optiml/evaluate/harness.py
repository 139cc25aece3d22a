"""Verify and time one candidate inside the GPU worker, following docs/evaluation.md's protocol.

Order: load → verification trials (seeds × distributions on the default shape set, then
every extra shape set) → timing (every timed call's output checked) → stream/thread/L2
integrity checks → physics check → a fresh-seed trial after timing. The first failure
ends the evaluation with its status and message.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from optiml.evaluate import cudart
from optiml.evaluate.abi import AbiError, KernelLibrary, TensorArray
from optiml.evaluate.checks import (
    TrialBuffers,
    clone_args,
    compare,
    fresh_outputs,
    modified_inputs,
    poison_,
    quick_match,
)
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.results import EvalStatus, TimingStats, TrialCheck
from optiml.evaluate.runtime import Case, TaskRuntime
from optiml.evaluate.timing import DeviceTimer, TimedCall, run_trials


class CandidateFailure(Exception):
    """Ends a candidate's evaluation with a status (not a harness bug)."""

    def __init__(self, status: EvalStatus, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fatal = fatal  # the CUDA context is unusable: the worker must be replaced


@dataclass
class CandidateReport:
    status: EvalStatus
    message: str = ""
    trials: list[TrialCheck] = field(default_factory=list)
    timing: TimingStats | None = None
    warnings: list[str] = field(default_factory=list)
    floor_ms: float | None = None
    phase_seconds: dict[str, float] = field(default_factory=dict)
    fatal: bool = False


@dataclass(frozen=True)
class Peaks:
    """Device ceilings for the physics check (bytes/s and flop/s; 0 = unknown)."""

    bandwidth: float = 0.0
    flops: float = 0.0


def verification_plan(runtime: TaskRuntime, config: EvalConfig) -> list[tuple[int, int, str]]:
    distributions = runtime.task.meta.distributions
    plan = [(config.base_seed + i, 0, distributions[i % len(distributions)]) for i in range(config.seeds)]
    if config.check_shape_sets:
        plan += [(config.base_seed, s, "native") for s in range(1, runtime.task.num_shape_sets)]
    return plan


def physical_floor_ms(case: Case, flops: float | None, peaks: Peaks) -> float | None:
    """Fewest bytes over peak bandwidth vs flops over peak rate: no correct kernel runs faster."""
    times = []
    if peaks.bandwidth > 0:
        times.append((case.input_bytes() + case.output_bytes()) / peaks.bandwidth * 1e3)
    if peaks.flops > 0 and flops:
        times.append(flops / peaks.flops * 1e3)
    return max(times) if times else None


class CandidateRunner:
    """Calls one loaded candidate on cases of one task, on a private stream."""

    def __init__(self, runtime: TaskRuntime, library: KernelLibrary, stream: torch.cuda.Stream) -> None:
        self.runtime = runtime
        self.library = library
        self.stream = stream
        self._workspace: torch.Tensor | None = None
        self._buffers: dict[int, TrialBuffers] = {}  # per shape set: reused, so addresses repeat

    def bind(self, args: list[Any], outputs: list[torch.Tensor]) -> Callable[[], None]:
        """A zero-argument call of the candidate on these buffers; raises CandidateFailure on rc != 0."""
        inputs, outs = TensorArray(args), TensorArray(outputs)
        needed = self.library.workspace_bytes(inputs)
        if needed and (self._workspace is None or self._workspace.numel() < needed):
            self._workspace = torch.empty(needed, dtype=torch.uint8, device=self.runtime.device)
        workspace = self._workspace if needed else None

        def call() -> None:
            rc = self.library.forward(inputs, outs, workspace, self.stream)
            if rc != 0:
                raise CandidateFailure(
                    EvalStatus.RUNTIME_ERROR, f"optiml_forward returned {rc} ({cudart.error_name(rc)})"
                )

        return call

    def trial(self, case: Case) -> TrialCheck:
        """One verification trial: own input copies, poisoned outputs, guards, inputs-unchanged check."""
        task = self.runtime.task
        # The case's tensors were made on the default stream; the refill below runs on ours. Without
        # this wait a large (or busy-GPU) case is copied before it is finished, and the stale copy
        # later reads as "the candidate modified its inputs".
        torch.cuda.synchronize()
        with torch.cuda.stream(self.stream):
            buffers = self._buffers.get(case.shape_set)
            if buffers is not None and buffers.matches(case.abi_inputs, case.expected):
                buffers.refill(case.abi_inputs)
            else:
                buffers = TrialBuffers(case.abi_inputs, case.expected)
                self._buffers[case.shape_set] = buffers
        torch.cuda.synchronize()
        threads_before = cudart.thread_count()
        self.bind(buffers.args, buffers.outputs)()
        synchronize_or_fail()
        if cudart.thread_count() > threads_before:
            # the thread may launch work later into freed buffers: this worker cannot be trusted again
            raise CandidateFailure(
                EvalStatus.INTEGRITY, "the candidate left a host thread running after the call", fatal=True
            )
        overrun = buffers.overrun()
        if overrun is not None:
            raise CandidateFailure(
                EvalStatus.INTEGRITY, f"the candidate wrote past the end of {overrun} (guard bytes changed)"
            )
        changed = modified_inputs(case.abi_inputs, buffers.args)
        if changed:
            raise CandidateFailure(
                EvalStatus.INTEGRITY, f"the candidate modified input(s) {changed}: inputs are read-only"
            )
        result = compare(buffers.outputs, case.expected, task.meta.atol, task.meta.rtol)
        return TrialCheck(
            seed=case.seed,
            shape_set=case.shape_set,
            distribution=case.distribution,
            passed=result.passed,
            max_abs_err=result.max_abs_err,
            max_rel_err=result.max_rel_err,
            mismatched=result.mismatched,
            total=result.total,
            nan_count=result.nan_count,
            message=result.message,
        )

    def timed_calls(self, cases: list[Case]) -> list[TimedCall]:
        """Per case: the bound call, a re-poisoning of its outputs, and a check of what it wrote."""
        atol, rtol = self.runtime.task.meta.atol, self.runtime.task.meta.rtol
        calls: list[TimedCall] = []
        self.stream.wait_stream(torch.cuda.current_stream())  # the cases were made on the default stream
        for case in cases:
            with torch.cuda.stream(self.stream):
                args = clone_args(case.abi_inputs)
                outputs = fresh_outputs(case.expected)
            prepare = functools.partial(_poison_all, outputs)
            check = functools.partial(quick_match, outputs, case.expected, atol, rtol)
            calls.append((self.bind(args, outputs), prepare, check))
        return calls


def _poison_all(outputs: list[torch.Tensor]) -> None:
    for out in outputs:
        poison_(out)


def synchronize_or_fail() -> None:
    try:
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as exc:
        raise CandidateFailure(EvalStatus.OUT_OF_MEMORY, str(exc).splitlines()[0], fatal=True) from exc
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CandidateFailure(EvalStatus.RUNTIME_ERROR, f"CUDA error after the call: {first}", fatal=True) from exc


def evaluate_candidate(
    runtime: TaskRuntime, so_path: str, config: EvalConfig, peaks: Peaks, flops: float | None
) -> CandidateReport:
    """Run the whole protocol for one shared object; never raises for candidate faults."""
    report = CandidateReport(status=EvalStatus.OK)
    clock = time.perf_counter()
    try:
        try:
            library = KernelLibrary(so_path)
        except AbiError as exc:
            raise CandidateFailure(EvalStatus.LOAD_ERROR, str(exc)) from exc
        stream = torch.cuda.Stream(device=runtime.device)
        runner = CandidateRunner(runtime, library, stream)
        report.phase_seconds["load"] = _lap(clock)

        clock = time.perf_counter()
        _verify(runner, runtime, verification_plan(runtime, config), report)
        report.phase_seconds["verify"] = _lap(clock)

        clock = time.perf_counter()
        timing_cases = [runtime.case(config.base_seed + i) for i in range(max(1, config.timing_inputs))]
        report.timing = _time(runner, timing_cases, config)
        report.phase_seconds["time"] = _lap(clock)

        clock = time.perf_counter()
        report.floor_ms = physical_floor_ms(timing_cases[0], flops, peaks)
        if report.floor_ms and report.timing.median_ms < config.suspect_margin * report.floor_ms:
            _recheck_suspect(runner, runtime, timing_cases, config, report)
        _verify(runner, runtime, [(config.base_seed + 97, 0, "native")], report)  # after timing, fresh seed
        report.phase_seconds["recheck"] = _lap(clock)
    except CandidateFailure as failure:
        report.status, report.message, report.fatal = failure.status, failure.message, failure.fatal
    except torch.cuda.OutOfMemoryError as exc:
        report.status, report.message = EvalStatus.OUT_OF_MEMORY, str(exc).splitlines()[0]
        report.fatal = True
    finally:
        if cudart.persisting_l2_limit() > 0 and report.status is EvalStatus.OK:
            report.status = EvalStatus.INTEGRITY
            report.message = "the candidate set a persisting-L2 carve-out (cudaLimitPersistingL2CacheSize)"
        cudart.reset_persisting_l2()
    return report


def _verify(
    runner: CandidateRunner, runtime: TaskRuntime, plan: list[tuple[int, int, str]], report: CandidateReport
) -> None:
    for seed, shape_set, distribution in plan:
        check = runner.trial(runtime.case(seed, shape_set, distribution))
        report.trials.append(check)
        if not check.passed:
            where = f"seed {seed}, shape set {shape_set}, {distribution} inputs"
            raise CandidateFailure(EvalStatus.WRONG_ANSWER, f"wrong answer ({where}): {check.message}")


def _time(runner: CandidateRunner, cases: list[Case], config: EvalConfig) -> TimingStats:
    timer = DeviceTimer(runner.stream, flush_l2=config.flush_l2)
    samples, failed_at = run_trials(
        timer,
        runner.timed_calls(cases),
        warmup=config.warmup_calls,
        min_trials=config.min_trials,
        max_trials=config.max_trials,
        seconds=config.timing_seconds,
    )
    synchronize_or_fail()
    if failed_at is not None:
        raise CandidateFailure(
            EvalStatus.WRONG_ANSWER,
            f"timed call {failed_at} produced a wrong output (work skipped, cached or stale between calls)",
        )
    stats = TimingStats.from_samples(samples.event_ms, samples.wall_ms)
    hidden_ms = stats.wall_median_ms - 2 * stats.median_ms - config.stream_slack_ms
    if hidden_ms > 0:
        raise CandidateFailure(
            EvalStatus.INTEGRITY,
            f"work ran outside the given stream: the host saw {stats.wall_median_ms:.3f} ms per call "
            f"but the stream's events only {stats.median_ms:.3f} ms",
        )
    return stats


def _recheck_suspect(
    runner: CandidateRunner,
    runtime: TaskRuntime,
    cases: list[Case],
    config: EvalConfig,
    report: CandidateReport,
) -> None:
    assert report.timing is not None and report.floor_ms is not None
    first = report.timing.median_ms
    report.warnings.append(
        f"suspect: {first:.4f} ms is below {config.suspect_margin:.0%} of the physical floor "
        f"{report.floor_ms:.4f} ms; re-verified with fresh inputs and re-timed"
    )
    fresh = [(config.base_seed + 500 + i, 0, d) for i, d in enumerate(("normal", "uniform_pm1", "native"))]
    _verify(runner, runtime, fresh, report)
    report.timing = _time(runner, cases, config)
    if report.timing.median_ms < config.suspect_margin * report.floor_ms:
        raise CandidateFailure(
            EvalStatus.INTEGRITY,
            f"time {report.timing.median_ms:.4f} ms stays below the physical floor {report.floor_ms:.4f} ms "
            "(bytes / peak bandwidth, flops / peak rate): the measurement is being fooled",
        )


def _lap(start: float) -> float:
    return round(time.perf_counter() - start, 4)
