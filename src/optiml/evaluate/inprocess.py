"""A candidate loaded into *this* process: for the profiler's target and in-process measurements only.

Verdicts are never computed this way — the candidate's host code would share the interpreter
that computes them (``optiml.evaluate.judge`` runs it in a process of its own). What still
needs the candidate in-process: the program Nsight Compute profiles (``optiml.profile.target``),
template checks that only ask "does it compute the right thing", and
``benchmarks/judge_overhead.py``, which measures the previous in-process design beside the judge.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from optiml.evaluate import cudart
from optiml.evaluate.abi import KernelLibrary, TensorArray
from optiml.evaluate.candidate_link import CandidateFailure
from optiml.evaluate.checks import TrialBuffers, check_trial, clone_args, fresh_outputs, poison_, quick_match
from optiml.evaluate.runtime import Case, TaskRuntime
from optiml.evaluate.timing import TimedCall
from optiml.values import EvalStatus, TrialCheck


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
        return check_trial(case, buffers)  # the judge's check: guards, inputs unchanged, the case's tolerance

    def timed_calls(self, cases: list[Case]) -> list[TimedCall]:
        """Per case: the bound call, a re-poisoning of its outputs, and a check of what it wrote."""
        calls: list[TimedCall] = []
        self.stream.wait_stream(torch.cuda.current_stream())  # the cases were made on the default stream
        for case in cases:
            with torch.cuda.stream(self.stream):
                args = clone_args(case.abi_inputs)
                outputs = fresh_outputs(case.expected)
            prepare = functools.partial(_poison_all, outputs)
            check = functools.partial(quick_match, outputs, case.expected, case.atol, case.rtol)
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
