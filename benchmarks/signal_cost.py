"""Where does a device-ended window's residual come from? (issue 38) The end signal's two halves, timed alone.

A device-ended window (``optiml.evaluate.device_end``) ends when the judge's stream, waiting with
``cuStreamWaitValue32``, sees the word the candidate's stream writes behind its call with
``cuStreamWriteValue32``. On the H200 (2026-12-05, ``window_residual_relu_h200.json``) a one-call window on
19_ReLU read 0.26 ms above the candidate's own events, a one-thread 6 ms kernel only 0.06 ms
(``window_residual_spin_h200.json``), and another process's waiting stream does not slow a kernel down
(``pending_context_h100.json``). Two suspects are left, each timed here for a full-GPU memory-bound ReLU over
``--gib`` GiB (and over a sixth of it), a sum that only reads those GiB, a compute-bound fp32 matmul and torch's
one-thread ``_sleep`` (whether the residual follows bytes written, bytes touched or neither):

* ``write``: the write itself, after the kernel, on the kernel's stream — with its memory barrier (the
  default, as the candidate process writes it) and without — between events of that stream;
* ``watcher``: another process's stream, waiting for the word, records its own end event: the waiter's window
  (start event recorded before the kernel was launched) minus the kernel stream's own events, per kernel.

    PYTHONPATH=src python3 benchmarks/signal_cost.py --out benchmarks/results/signal_cost.json
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
from result_file import head_commit, write_result

from optiml.evaluate.candidate_process import StreamMemoryOps

ROOT = Path(__file__).resolve().parent.parent
SLEEP_CYCLES = 4_000_000


def kernels(gib: float) -> dict[str, Callable[[], None]]:
    """Calls that differ in what they leave behind: GBs written, GBs only read (a sum: 4 bytes written), a
    sixth of the bytes, a compute-bound matmul over 200 MB, one thread asleep."""
    x = torch.randn(int(gib * (1 << 30)) // 4, device="cuda")
    y = torch.empty_like(x)
    small = x[: x.numel() // 6]
    total = torch.empty((), device="cuda")
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    c = torch.empty_like(a)
    torch.backends.cuda.matmul.allow_tf32 = False

    def relu() -> None:
        torch.clamp_min(x, 0.0, out=y)

    def relu_sixth() -> None:
        torch.clamp_min(small, 0.0, out=y[: small.numel()])

    def read_only() -> None:
        torch.sum(x, dim=0, out=total)

    def matmul() -> None:
        torch.mm(a, b, out=c)

    def sleep() -> None:
        torch.cuda._sleep(SLEEP_CYCLES)

    return {
        "relu_memory_bound": relu,
        "relu_sixth_of_the_bytes": relu_sixth,
        "sum_reads_only": read_only,
        "matmul_compute_bound": matmul,
        "sleep_one_thread": sleep,
    }


def write_rows(calls: int, gib: float) -> list[dict[str, Any]]:
    """Per kernel: its own time, and the time of a write behind it, with and without the barrier."""
    ops, word = StreamMemoryOps(), torch.zeros(1, dtype=torch.int32, device="cuda")
    stream = torch.cuda.current_stream()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for name, call in kernels(gib).items():
        call()
        for flags in (ops.WRITE_DEFAULT, ops.WRITE_NO_MEMORY_BARRIER):
            kernel_ms, write_ms = [], []
            for index in range(calls):
                flush.zero_()
                torch.cuda.synchronize()
                marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                marks[0].record()
                call()
                marks[1].record()
                code = ops.write(stream.cuda_stream, word.data_ptr(), index + 1, flags)
                if code:
                    raise RuntimeError(f"cuStreamWriteValue32 failed: {code}")
                marks[2].record()
                marks[2].synchronize()
                kernel_ms.append(marks[0].elapsed_time(marks[1]))
                write_ms.append(marks[1].elapsed_time(marks[2]))
            row = {"kernel": name, "barrier": flags == ops.WRITE_DEFAULT}
            row |= {"kernel_ms": statistics.median(kernel_ms), "write_ms": statistics.median(write_ms)}
            print(row, flush=True)
            rows.append(row)
    return rows


def watcher(handles: Any, requests: Any, windows: Any) -> None:
    """The judge's half: record a start event, wait for the word to equal the request's token, record the end."""
    word = handles.get()
    ops, stream = StreamMemoryOps(), torch.cuda.current_stream()
    while (token := requests.get()) is not None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        code = ops.wait(stream.cuda_stream, word.data_ptr(), token)
        end.record()
        windows.put(("armed", code))
        end.synchronize()
        windows.put((token, start.elapsed_time(end)))


def watcher_rows(calls: int, gib: float) -> list[dict[str, Any]]:
    """Per kernel: the watcher's window (the host hand-off included) minus the kernel stream's own events."""
    context = mp.get_context("spawn")
    handles, requests, windows = context.Queue(), context.Queue(), context.Queue()
    process = context.Process(target=watcher, args=(handles, requests, windows))
    process.start()
    word = torch.zeros(1, dtype=torch.int32, device="cuda")
    handles.put(word)
    ops, stream = StreamMemoryOps(), torch.cuda.current_stream()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, token = [], 1
    try:
        for name, call in kernels(gib).items():
            call()
            excess = []
            for _ in range(calls + 3):
                flush.zero_()
                torch.cuda.synchronize()
                token += 1
                requests.put(token)
                if windows.get(timeout=60)[1]:
                    raise RuntimeError("the watcher's cuStreamWaitValue32 failed")
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                call()
                end.record()
                ops.write(stream.cuda_stream, word.data_ptr(), token)
                end.synchronize()
                excess.append(windows.get(timeout=60)[1] - start.elapsed_time(end))
            row = {"kernel": name, "window_minus_kernel_ms": statistics.median(excess[3:])}
            print(row, flush=True)
            rows.append(row)
    finally:
        requests.put(None)
        process.join(60)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=6.0)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "signal_cost.json")
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    write = write_rows(args.calls, args.gib)
    watch = watcher_rows(args.calls, args.gib)
    write_result(args.out, "signal_cost", head_commit(args.commit), gib=args.gib, write=write, watcher=watch)


if __name__ == "__main__":
    main()
