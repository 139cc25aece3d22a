"""Does another process's *pending* GPU work slow a kernel down? (issue 38: the device-ended window's residual)

A window ended on the device leaves the judge's stream waiting (``cuStreamWaitValue32``) while the candidate's
call runs in another process's context. On the H200 (2026-12-05, ``window_residual.json``) a one-call window on
19_ReLU (6.4 GB in, 6.4 GB out) read 0.26 ms above the candidate stream's own events, while a one-thread kernel
held 6 ms on the global timer read 0.06 ms above them: the residual follows what the call keeps on the GPU,
not how long it takes. If a context with work queued is given time slices while another context's kernel
runs, every slice preempts that kernel (its registers and shared memory saved and restored): cheap for one
thread, dear for a full GPU of memory-bound blocks.

This times, in one process the way KernelBench does (CUDA events on the current stream, L2 flushed and the
device synchronised before each call, median of ``--calls``), three kernels — a full-GPU memory-bound ReLU
over ``--gib`` GiB, a compute-bound fp32 matmul and torch's one-thread ``_sleep`` — under three bystanders:

* ``none``: no other process on the GPU;
* ``idle``: another process holds a CUDA context with nothing queued;
* ``waiting``: another process's stream waits on a device word nobody writes until the end (the judge's
  stream during a device-ended window).

    PYTHONPATH=src python3 benchmarks/pending_context.py --out benchmarks/results/pending_context.json
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
import torch.multiprocessing as mp
from result_file import head_commit, write_result

from optiml.evaluate.candidate_process import StreamMemoryOps
from optiml.evaluate.timing import DeviceTimer

ROOT = Path(__file__).resolve().parent.parent
BYSTANDERS = ("none", "idle", "waiting")
SLEEP_CYCLES = 4_000_000  # torch.cuda._sleep: ~2 ms at the H200's boost clock


def bystander(kind: str, ready: mp.Event, stop: mp.Event) -> None:
    """Hold a context (``idle``) or a stream waiting on a word until ``stop`` (``waiting``)."""
    word = torch.zeros(1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    if kind == "waiting":
        ops, stream = StreamMemoryOps(), torch.cuda.Stream()
        code = ops.wait(stream.cuda_stream, word.data_ptr(), 1)
        if code:
            raise RuntimeError(f"cuStreamWaitValue32 failed: {code}")
    ready.set()
    stop.wait()
    if kind == "waiting":
        ops.write(torch.cuda.Stream().cuda_stream, word.data_ptr(), 1)
    torch.cuda.synchronize()


def time_kernel(call: Callable[[], None], calls: int, timer: DeviceTimer) -> float:
    """Median ms of ``calls`` calls, each on a flushed L2 and an idle device, between events on the current stream."""
    for _ in range(3):
        call()
    return statistics.median(timer.time_call(call)[0] for _ in range(calls))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=6.0, help="the ReLU's input size")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pending_context.json")
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    elements = int(args.gib * (1 << 30)) // 4
    x = torch.randn(elements, device="cuda")
    y = torch.empty_like(x)
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    c = torch.empty_like(a)
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = DeviceTimer(torch.cuda.current_stream())

    def relu() -> None:
        torch.clamp_min(x, 0.0, out=y)

    def matmul() -> None:
        torch.mm(a, b, out=c)

    def sleep() -> None:
        torch.cuda._sleep(SLEEP_CYCLES)

    kernels = {"relu_memory_bound": relu, "matmul_compute_bound": matmul, "sleep_one_thread": sleep}
    context = mp.get_context("spawn")
    rows = []
    for kind in BYSTANDERS:
        ready, stop = context.Event(), context.Event()
        process = None
        if kind != "none":
            process = context.Process(target=bystander, args=(kind, ready, stop))
            process.start()
            if not ready.wait(120):
                raise SystemExit(f"the {kind} bystander did not start")
        try:
            for name, call in kernels.items():
                ms = time_kernel(call, args.calls, timer)
                rows.append({"bystander": kind, "kernel": name, "median_ms": ms})
                print(f"{kind:8s} {name:22s} {ms:8.3f} ms", flush=True)
        finally:
            stop.set()
            if process is not None:
                process.join(60)
    alone = {r["kernel"]: r["median_ms"] for r in rows if r["bystander"] == "none"}
    for row in rows:
        row["extra_ms"] = row["median_ms"] - alone[row["kernel"]]
    write_result(args.out, "pending_context", head_commit(args.commit), relu_gib=args.gib, calls=args.calls, rows=rows)


if __name__ == "__main__":
    main()
