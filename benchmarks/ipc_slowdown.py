"""Why a kernel runs slower in the candidate process than in the judge's: which of its differences costs.

``judge_overhead.json`` (H200, 2026-12-01) has the naive silu at 0.33 ms on the candidate stream's own
events against 0.30 ms in-process, softmax 3.93 against 3.19 ms, with neither the judge's L2 flush nor its
fresh-input fill the cause. What remains differs in three ways, timed here one at a time on the same
kernels (torch ops, CUDA events on the timing process's own stream, L2 flushed before every call):

* ``local``: a second process times the ops on tensors it allocated itself;
* ``ipc``: the same process on tensors the first process allocated and shared over CUDA IPC (as the
  judge lends its buffers to the candidate process);
* ``+l2_reset``: each of those with ``cudaCtxResetPersistingL2Cache`` and a zero persisting-L2 limit
  before every call (the candidate process's prologue);
* ``owner``: the first process on its own tensors (the judge's side: another context is alive).

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


def operations(x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], Any]]:
    return {
        "scale (x * 2, 2 passes)": lambda: torch.mul(x, 2.0, out=y),
        "softmax(x, dim=-1)": lambda: torch.softmax(x, dim=-1),
        "row sum": lambda: x.sum(dim=-1),
        "copy (y = x)": lambda: y.copy_(x),
    }


def timed(op: Callable[[], Any], flush: torch.Tensor, reset_l2: bool, trials: int) -> float:
    stream = torch.cuda.current_stream()
    samples = []
    for i in range(trials + 3):
        flush.zero_()
        torch.cuda.synchronize()
        if reset_l2:
            cudart.reset_persisting_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        op()
        end.record(stream)
        end.synchronize()
        if i >= 3:
            samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def variants(x: torch.Tensor, y: torch.Tensor, flush: torch.Tensor, trials: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, op in operations(x, y).items():
        out[name] = {
            "plain": timed(op, flush, False, trials),
            "+l2_reset": timed(op, flush, True, trials),
        }
    return out


def timer_process(shared: tuple[torch.Tensor, torch.Tensor], trials: int, results: Any) -> None:
    x_ipc, y_ipc = shared
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    x_local, y_local = x_ipc.clone(), torch.empty_like(y_ipc)
    torch.cuda.synchronize()
    results.put({"local": variants(x_local, y_local, flush, trials), "ipc": variants(x_ipc, y_ipc, flush, trials)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ipc_slowdown.json")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--commit", default=None, help="default: git rev-parse --short HEAD")
    args = parser.parse_args()
    commit = head_commit(args.commit)
    context = mp.get_context("spawn")
    x = torch.randn(ROWS, COLS, device="cuda")
    y = torch.empty_like(x)
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    results = context.Queue()
    child = context.Process(target=timer_process, args=((x, y), args.trials, results))
    child.start()
    measured = results.get(timeout=600)
    child.join(timeout=60)
    measured["owner"] = variants(x, y, flush, args.trials)  # after the child: one timing process at a time
    for where, ops in measured.items():
        for name, times in ops.items():
            print(f"{where:6s} {name:26s} " + "  ".join(f"{k} {v:.4f} ms" for k, v in times.items()), flush=True)
    write_result(args.out, "ipc_slowdown", commit, shape=[ROWS, COLS], trials=args.trials, ms=measured)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
