"""Why a kernel runs slower in the candidate process than in the judge's: which of its differences costs.

``judge_overhead.json`` (H200, 2026-12-01) has the naive silu at 0.38 ms on the candidate stream's own
events against 0.30 ms in-process, softmax 3.93 against 3.19 ms, with neither the judge's L2 flush nor its
fresh-input fill the cause. The candidate process differs from an in-process timer in several ways; each
is timed here alone, on the same memory-bound torch ops, with CUDA events on the timing process's own
stream and the L2 flushed before every call:

* ``alone``: a child process times ops on its own tensors while no other process holds a CUDA context;
* ``local``: the same while the parent holds an (idle) context;
* ``ipc``: the child on tensors the parent allocated and shared over CUDA IPC (the judge's buffers);
* ``pingpong``: ``ipc`` with the parent doing the flush in *its* context and handing each call to the
  child over a pipe, as the judge does (a context switch before and after every call);
* ``owner``: the parent on its own tensors after the child exits;

each ``plain`` and ``+l2_reset`` (``cudaCtxResetPersistingL2Cache`` and a zero persisting-L2 limit before
every call, the candidate process's prologue).

    PYTHONPATH=src python3 benchmarks/ipc_slowdown.py --out benchmarks/results/ipc_slowdown.json
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

from optiml.evaluate import cudart

ROOT = Path(__file__).resolve().parent.parent
ROWS, COLS = 8192, 8192
WARMUP = 3


def operations(x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], Any]]:
    return {
        "scale (x * 2, 2 passes)": lambda: torch.mul(x, 2.0, out=y),
        "softmax(x, dim=-1)": lambda: torch.softmax(x, dim=-1),
        "row sum": lambda: x.sum(dim=-1),
        "copy (y = x)": lambda: y.copy_(x),
        "gather (random, 4M)": lambda: torch.take(x, _indices(x)),
    }


_INDEX_CACHE: dict[int, torch.Tensor] = {}


def _indices(x: torch.Tensor) -> torch.Tensor:
    """4M random positions over all of ``x`` (a TLB-bound access pattern), made once per tensor."""
    key = x.data_ptr()
    if key not in _INDEX_CACHE:
        generator = torch.Generator(device=x.device).manual_seed(0)
        _INDEX_CACHE[key] = torch.randint(0, x.numel(), (1 << 22,), device=x.device, generator=generator)
    return _INDEX_CACHE[key]


def flush_buffer() -> torch.Tensor:
    return torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")


def timed_once(op: Callable[[], Any], reset_l2: bool) -> float:
    stream = torch.cuda.current_stream()
    if reset_l2:
        cudart.reset_persisting_l2()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    op()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


def timed(op: Callable[[], Any], flush: torch.Tensor, reset_l2: bool, trials: int) -> float:
    samples = []
    for i in range(trials + WARMUP):
        flush.zero_()
        torch.cuda.synchronize()
        ms = timed_once(op, reset_l2)
        if i >= WARMUP:
            samples.append(ms)
    return statistics.median(samples)


def variants(x: torch.Tensor, y: torch.Tensor, flush: torch.Tensor, trials: int) -> dict[str, dict[str, float]]:
    return {
        name: {"plain": timed(op, flush, False, trials), "+l2_reset": timed(op, flush, True, trials)}
        for name, op in operations(x, y).items()
    }


def alone_process(trials: int, results: Any) -> None:
    x = torch.randn(ROWS, COLS, device="cuda")
    results.put({"alone": variants(x, torch.empty_like(x), flush_buffer(), trials)})


def timer_process(shared: tuple[torch.Tensor, torch.Tensor], trials: int, results: Any, pipe: Any) -> None:
    x_ipc, y_ipc = shared
    flush = flush_buffer()
    x_local, y_local = x_ipc.clone(), torch.empty_like(y_ipc)
    torch.cuda.synchronize()
    results.put({"local": variants(x_local, y_local, flush, trials), "ipc": variants(x_ipc, y_ipc, flush, trials)})
    # pingpong: the parent flushes and sends (op name, reset flag); this side times and answers
    ops = operations(x_ipc, y_ipc)
    while True:
        request = pipe.recv()
        if request is None:
            return
        if request[0] == "window":
            _, name, repeats = request
            for _ in range(repeats):
                ops[name]() if name else None
            torch.cuda.synchronize()
            pipe.send(0.0)
            continue
        name, reset_l2 = request
        pipe.send(timed_once(ops[name], reset_l2))


def pingpong(pipe: Any, flush: torch.Tensor, trials: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name in operations(flush, flush):
        out[name] = {}
        for label, reset_l2 in (("plain", False), ("+l2_reset", True)):
            samples = []
            for i in range(trials + WARMUP):
                flush.zero_()
                torch.cuda.synchronize()
                pipe.send((name, reset_l2))
                ms = pipe.recv()
                if i >= WARMUP:
                    samples.append(ms)
            out[name][label] = statistics.median(samples)
    return out


def windows(pipe: Any, flush: torch.Tensor, trials: int) -> dict[str, dict[str, float]]:
    """The judge's clock: events on this process's stream around a request for ``repeats`` back-to-back
    ops in the child, minus the same window around an empty request; per op."""
    stream = torch.cuda.current_stream()

    def window(name: str, repeats: int) -> float:
        samples = []
        for i in range(trials + WARMUP):
            flush.zero_()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            pipe.send(("window", name, repeats))
            pipe.recv()
            end.record(stream)
            end.synchronize()
            if i >= WARMUP:
                samples.append(start.elapsed_time(end))
        return statistics.median(samples)

    empty = window("", 1)
    out: dict[str, dict[str, float]] = {"empty window": {"ms": empty}}
    for name in operations(flush, flush):
        out[name] = {f"x{r}": (window(name, r) - empty) / r for r in (1, 4, 16)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ipc_slowdown.json")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--commit", default=None, help="default: git rev-parse --short HEAD")
    args = parser.parse_args()
    commit = head_commit(args.commit)
    context = mp.get_context("spawn")
    results = context.Queue()
    # first, before this process touches CUDA: a child with the GPU to itself
    alone = context.Process(target=alone_process, args=(args.trials, results))
    alone.start()
    measured = results.get(timeout=600)
    alone.join(timeout=60)
    x = torch.randn(ROWS, COLS, device="cuda")
    y = torch.empty_like(x)
    flush = flush_buffer()
    here, there = context.Pipe()
    child = context.Process(target=timer_process, args=((x, y), args.trials, results, there))
    child.start()
    measured.update(results.get(timeout=600))
    measured["pingpong"] = pingpong(here, flush, args.trials)
    measured["window"] = windows(here, flush, args.trials)
    here.send(None)
    child.join(timeout=60)
    measured["owner"] = variants(x, y, flush, args.trials)  # after the child: one timing process at a time
    for where, ops in measured.items():
        for name, times in ops.items():
            print(f"{where:8s} {name:26s} " + "  ".join(f"{k} {v:.4f} ms" for k, v in times.items()), flush=True)
    write_result(args.out, "ipc_slowdown", commit, shape=[ROWS, COLS], trials=args.trials, ms=measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
