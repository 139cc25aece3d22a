"""What the kernel probes (``rmsnorm_nchw_probe.py``, ``stream_probe.py``) share: KernelBench's clock and
tolerance, and their ``load_inline`` build."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

KERNELBENCH_TOLERANCE = 1e-4
FLUSH_BYTES = 256 * 1024 * 1024  # written before every timed call, as KernelBench flushes L2 (50 MB on H100)


def time_ms(fn: Callable[[], object], flush: torch.Tensor, warmup: int, iters: int) -> float:
    """Median of ``iters`` calls timed by CUDA events around each, L2 flushed by writing ``flush`` before each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in events:
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def build_extension(prefix: str, cuda_source: str, wrapper: str, functions: Sequence[str]) -> tuple[Any, float]:
    """The extension (cached by torch under a name hashed from its sources) and the seconds the build took."""
    from torch.utils.cpp_extension import load_inline

    name = prefix + hashlib.sha256((cuda_source + wrapper).encode()).hexdigest()[:12]
    started = time.perf_counter()
    module = load_inline(
        name=name,
        cpp_sources=wrapper,
        cuda_sources=cuda_source,
        functions=list(functions),
        extra_cuda_cflags=["-O3", "-lineinfo"],
        verbose=False,
    )
    return module, time.perf_counter() - started
