"""The program ncu profiles: runs each candidate (and optionally the reference) once in range.

Launched as::

    ncu --clock-control none --csv --page raw --profile-from-start off --metrics … \\
        python -m optiml.profile.target --task TASK.py --so a.so [--so b.so …] [--reference] \\
        [--seed N] [--shape-set S] --report EVENTS.jsonl

Every entry is prepared and called once for warm-up *outside* the profiled range (lazy
loading, first-launch costs), then called once inside ``cudaProfilerStart``/``Stop`` within an
NVTX range ``optiml:<label>``. Attribution: right before each entry's call, inside the range,
a marker kernel (``torch.cuda._sleep``, ATen's ``spin_kernel``) is launched, so in ncu's list
of profiled kernels each marker opens the group of kernels of the next entry. Which entries
were profiled, in order, is written as JSON lines to ``--report`` (the CSV on stdout is ncu's).

Worker side: standard library, torch and worker-side optiml modules only. Candidate output on
fd 1 is redirected to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import torch

from optiml.errors import TaskError
from optiml.evaluate.abi import AbiError, KernelLibrary
from optiml.evaluate.checks import clone_args, fresh_outputs
from optiml.evaluate.harness import CandidateFailure, CandidateRunner
from optiml.evaluate.runtime import Case, TaskRuntime
from optiml.task import load_task

REFERENCE_LABEL = "reference"  # entries are "candidate <j>" (j-th --so) and this; the Profiler relies on it
MARKER_CYCLES = 1000  # the marker kernel spins this long: negligible, but a real launch


@dataclass(frozen=True)
class Entry:
    """One thing to profile: a label and a zero-argument call on prepared buffers."""

    index: int
    label: str
    call: Callable[[], None]


def candidate_call(runtime: TaskRuntime, case: Case, so_path: str, stream: torch.cuda.Stream) -> Callable[[], None]:
    """A bound call of the candidate on its own input copies and poisoned outputs."""
    library = KernelLibrary(so_path)
    with torch.cuda.stream(stream):
        args = clone_args(case.abi_inputs)
        outputs = fresh_outputs(case.expected)
    torch.cuda.synchronize()
    return CandidateRunner(runtime, library, stream).bind(args, outputs)


def reference_call(case: Case, stream: torch.cuda.Stream) -> Callable[[], None]:
    def call() -> None:
        with torch.no_grad(), torch.cuda.stream(stream):
            case.model(*case.args)

    return call


def run(args: argparse.Namespace, events: IO[str]) -> int:
    runtime = TaskRuntime(load_task(args.task), "cuda")
    case = runtime.case(args.seed, args.shape_set)
    stream = torch.cuda.Stream()
    _event(
        events,
        "case",
        input_bytes=case.input_bytes(),
        output_bytes=case.output_bytes(),
        device=torch.cuda.get_device_name(),
    )

    entries: list[Entry] = []
    plan: list[tuple[str, str | None]] = [(f"candidate {i}", so) for i, so in enumerate(args.so)]
    if args.reference:
        plan.append((REFERENCE_LABEL, None))
    for index, (label, so_path) in enumerate(plan):
        try:
            call = reference_call(case, stream) if so_path is None else candidate_call(runtime, case, so_path, stream)
            call()  # warm-up, outside the profiled range
            torch.cuda.synchronize()
        except (AbiError, CandidateFailure, RuntimeError) as exc:
            _event(events, "failed", index=index, label=label, error=_one_line(exc))
            if _context_lost(exc):
                return 3
            continue
        entries.append(Entry(index, label, call))

    for entry in entries:
        torch.cuda.synchronize()
        _event(events, "profiling", index=entry.index, label=entry.label)
        torch.cuda.profiler.start()
        try:
            with torch.cuda.nvtx.range(f"optiml:{entry.label}"):
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(MARKER_CYCLES)
                entry.call()
            torch.cuda.synchronize()
        except (CandidateFailure, RuntimeError) as exc:
            _event(events, "failed", index=entry.index, label=entry.label, error=_one_line(exc))
            if _context_lost(exc):
                return 3
            continue
        finally:
            torch.cuda.profiler.stop()
        _event(events, "profiled", index=entry.index, label=entry.label)
    _event(events, "done")
    return 0


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, CandidateFailure):
        return exc.message
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _context_lost(exc: BaseException) -> bool:
    """A sticky CUDA error (illegal address, …) poisons the context: nothing after it can run."""
    return (isinstance(exc, CandidateFailure) and exc.fatal) or "illegal" in str(exc).lower()


def _event(stream: IO[str], kind: str, **fields: Any) -> None:
    stream.write(json.dumps({"event": kind, **fields}) + "\n")
    stream.flush()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m optiml.profile.target")
    parser.add_argument("--task", required=True)
    parser.add_argument("--so", action="append", default=[], help="a candidate shared object (repeatable)")
    parser.add_argument("--reference", action="store_true", help="also profile the PyTorch reference")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--shape-set", type=int, default=0)
    parser.add_argument("--report", required=True, help="JSON-lines file of what was profiled")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.dup2(2, 1)  # a candidate's printf must not mix into ncu's CSV on stdout
    sys.stdout = sys.stderr
    if not torch.cuda.is_available():
        print("profile target: no CUDA device is visible", file=sys.stderr)
        return 2
    with open(args.report, "a", encoding="utf-8") as events:
        try:
            return run(args, events)
        except TaskError as exc:
            _event(events, "error", error=str(exc))
            print(f"profile target: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
