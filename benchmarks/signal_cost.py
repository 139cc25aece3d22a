"""Where does a device-ended window's residual come from? (issue 38) The end signal's two halves, timed alone.

A device-ended window (``optiml.evaluate.device_end``) ends when the judge's stream, waiting with
``cuStreamWaitValue32``, sees the word the candidate's stream writes behind its call with
``cuStreamWriteValue32``. On the H200 (2026-12-05, ``window_residual_relu_h200.json``) a one-call window on
19_ReLU read 0.26 ms above the candidate's own events, a one-thread 6 ms kernel only 0.06 ms
(``window_residual_spin_h200.json``), and another process's waiting stream does not slow a kernel down
(``pending_context_h100.json``). The end signal is timed here for a full-GPU memory-bound ReLU over
``--gib`` GiB (and over a sixth of it), a sum that only reads those GiB, a compute-bound fp32 matmul and torch's
one-thread ``_sleep`` (whether the residual follows bytes written, bytes touched or neither):

* ``write``: the write itself, after the kernel, on the kernel's stream (with its memory barrier, as the
  candidate process writes it), between events of that stream;
* ``same_context``: a second stream of the kernel's own context waits for the word and records its end
  event: the waiter's window minus the kernel stream's events, per kernel (no host hand-off, no other context);
* ``watcher``: another process's stream does the same (the judge's place): its window holds the host hand-off
  too, so read it against the empty call's row. Three setups: ``plain`` (the kernel's process owns its
  buffers), ``imported_buffers`` (the watcher owns them and the kernel's process maps them — through torch's
  CUDA IPC handles, not the judge's virtual-memory blocks shared by file descriptor: the same ownership, another
  mapping, so a difference here is a lead for ``window_residual.py``, which runs the judge itself),
  ``imported_and_refilled`` (the watcher also rewrites and poisons them before each window, as the judge does).

Measured (H100, 2026-12-05, ``signal_cost_h100.json``, 6 GiB): the write costs 0.003 ms behind any kernel;
a waiting stream of the same context sees it 0.025 ms after an empty call and 0.03–0.06 ms after the others;
another process's waiting stream 0.29–0.32 ms after an empty call and only 0.04–0.065 ms more after the 6 GiB
ReLU — a fifth of the judge's 0.28–0.31 ms residual on such windows. The two imported setups had not yet run
to the end on a GPU when the device time ran out (the first attempt shared one queue both ways).

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

    def empty() -> None:
        torch.cuda._sleep(0)

    return {
        "empty_call": empty,
        "relu_memory_bound": relu,
        "relu_sixth_of_the_bytes": relu_sixth,
        "sum_reads_only": read_only,
        "matmul_compute_bound": matmul,
        "sleep_one_thread": sleep,
    }


def write_rows(calls: int, gib: float) -> list[dict[str, Any]]:
    """Per kernel: its own time, and the time of the write behind it (with its memory barrier: the driver's
    v2 entry point, the one CUDA 12 and later resolve, refuses the no-barrier flag with
    CUDA_ERROR_INVALID_VALUE — H100, 2026-12-05, ``signal_cost_h100.json``)."""
    ops, word = StreamMemoryOps(), torch.zeros(1, dtype=torch.int32, device="cuda")
    stream = torch.cuda.current_stream()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for name, call in kernels(gib).items():
        call()
        kernel_ms, write_ms = [], []
        for index in range(calls):
            flush.zero_()
            torch.cuda.synchronize()
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            marks[0].record()
            call()
            marks[1].record()
            if code := ops.write(stream.cuda_stream, word.data_ptr(), index + 1):
                raise RuntimeError(f"cuStreamWriteValue32 returned {code}")
            marks[2].record()
            marks[2].synchronize()
            kernel_ms.append(marks[0].elapsed_time(marks[1]))
            write_ms.append(marks[1].elapsed_time(marks[2]))
        row = {"kernel": name, "kernel_ms": statistics.median(kernel_ms), "write_ms": statistics.median(write_ms)}
        print(row, flush=True)
        rows.append(row)
    return rows


def same_context_rows(calls: int, gib: float) -> list[dict[str, Any]]:
    """Per kernel: a second stream of the same context waits for the word, as the judge's stream does from
    another process: its window minus the kernel stream's own events (no host hand-off, no context switch)."""
    ops, word = StreamMemoryOps(), torch.zeros(1, dtype=torch.int32, device="cuda")
    stream, waiting = torch.cuda.current_stream(), torch.cuda.Stream()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, token = [], 1
    for name, call in kernels(gib).items():
        call()
        excess = []
        for _ in range(calls):
            flush.zero_()
            torch.cuda.synchronize()
            token += 1
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            with torch.cuda.stream(waiting):
                marks[2].record()
                if ops.wait(waiting.cuda_stream, word.data_ptr(), token):
                    raise RuntimeError("cuStreamWaitValue32 failed")
                marks[3].record()
            marks[0].record()
            call()
            marks[1].record()
            ops.write(stream.cuda_stream, word.data_ptr(), token)
            torch.cuda.synchronize()
            excess.append(marks[2].elapsed_time(marks[3]) - marks[0].elapsed_time(marks[1]))
        row = {"kernel": name, "window_minus_kernel_ms": statistics.median(excess)}
        print("same context", row, flush=True)
        rows.append(row)
    return rows


def watcher(
    handles: Any, exports: Any, requests: Any, windows: Any, gib: float, own_buffers: bool, refill: bool
) -> None:
    """The judge's half: (optionally) write its buffers as the judge refills and poisons them, record a start
    event, wait for the word to equal the request's token, record the end event."""
    word = handles.get()
    ops, stream = StreamMemoryOps(), torch.cuda.current_stream()
    x = torch.randn(int(gib * (1 << 30)) // 4, device="cuda") if own_buffers or refill else None
    y = torch.empty_like(x) if x is not None else None
    if own_buffers:
        exports.put((x, y))  # imported by the kernel's process through torch's CUDA IPC handles
    while (token := requests.get()) is not None:
        if refill and x is not None and y is not None:
            x.mul_(1.0)  # the judge's fresh inputs: every byte read and written
            y.fill_(float("nan"))  # its poisoned outputs
            torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        code = ops.wait(stream.cuda_stream, word.data_ptr(), token)
        end.record()
        windows.put(("armed", code))
        end.synchronize()
        windows.put((token, start.elapsed_time(end)))


WATCHER_SETUPS = {
    "plain": (False, False),  # the kernel's process owns its buffers, the watcher writes nothing
    "imported_buffers": (True, False),  # the watcher owns the buffers, the kernel's process imports them
    "imported_and_refilled": (True, True),  # ... and the watcher writes them before each window, as the judge does
}


def watcher_rows(calls: int, gib: float, setup: str) -> list[dict[str, Any]]:
    """Per kernel: the watcher's window (the host hand-off included) minus the kernel stream's own events."""
    own_buffers, refill = WATCHER_SETUPS[setup]
    context = mp.get_context("spawn")
    handles, exports, requests, windows = (context.Queue() for _ in range(4))
    process = context.Process(target=watcher, args=(handles, exports, requests, windows, gib, own_buffers, refill))
    process.start()
    word = torch.zeros(1, dtype=torch.int32, device="cuda")
    handles.put(word)
    ops, stream = StreamMemoryOps(), torch.cuda.current_stream()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    rows, token = [], 1
    try:
        if own_buffers:
            x, y = exports.get(timeout=120)

            def relu_imported() -> None:
                torch.clamp_min(x, 0.0, out=y)

            calls_by_name = {"empty_call": lambda: torch.cuda._sleep(0), "relu_memory_bound": relu_imported}
        else:
            calls_by_name = kernels(gib)
        for name, call in calls_by_name.items():
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
            row = {"kernel": name, "setup": setup, "window_minus_kernel_ms": statistics.median(excess[3:])}
            print("other process", row, flush=True)
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
    parser.add_argument("--watchers", default=",".join(WATCHER_SETUPS), help="watcher setups, comma-separated")
    args = parser.parse_args()
    write = write_rows(args.calls, args.gib)
    same = same_context_rows(args.calls, args.gib)
    watch = [row for setup in args.watchers.split(",") for row in watcher_rows(args.calls, args.gib, setup)]
    write_result(
        args.out, "signal_cost", head_commit(args.commit), gib=args.gib, write=write, same_context=same, watcher=watch
    )


if __name__ == "__main__":
    main()
