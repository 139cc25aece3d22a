"""Measure a GPU's roofs once: DRAM copy bandwidth, FP32 FMA rate, tensor-core and FP64 matmul rates.

Run in the isolated worker setup as ``python -m optiml.peaks.probe --out PEAKS.json
[--fma-so FMA.so]``. The FP32 roof comes from :data:`FMA_PROBE_SOURCE` (compiled by the
orchestrator with nvcc: eight independent FMA chains per thread keep every FP32 lane busy);
without it, from an FP32 matmul with TF32 off. Tensor-core roofs come from fp16/bf16
``torch.matmul`` and the FP64 roof from a float64 one. Each figure is the best of several
timed runs (CUDA events). Standard library and torch only; torch is imported inside
:func:`measure` so the orchestrator can read the CUDA source without it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: A kernel that issues nothing but independent FFMAs, with a C entry point for ctypes.
FMA_PROBE_SOURCE = r"""
#include <cuda_runtime.h>

__global__ void optiml_fma_loop(float* out, int iters, float seed) {
  float a = seed + threadIdx.x, b = a + 1.f, c = a + 2.f, d = a + 3.f;
  float e = a + 4.f, f = a + 5.f, g = a + 6.f, h = a + 7.f;
#pragma unroll 16
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 0.9999f, 0.0001f); b = fmaf(b, 0.9999f, 0.0001f);
    c = fmaf(c, 0.9999f, 0.0001f); d = fmaf(d, 0.9999f, 0.0001f);
    e = fmaf(e, 0.9999f, 0.0001f); f = fmaf(f, 0.9999f, 0.0001f);
    g = fmaf(g, 0.9999f, 0.0001f); h = fmaf(h, 0.9999f, 0.0001f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d + e + f + g + h;
}

extern "C" __attribute__((visibility("default")))
int optiml_fma_peak(float* out, int blocks, int threads, int iters, cudaStream_t stream) {
  optiml_fma_loop<<<blocks, threads, 0, stream>>>(out, iters, 1.0f);
  return (int)cudaGetLastError();
}
"""
FMA_CHAINS = 8  # independent FMAs per loop iteration in FMA_PROBE_SOURCE
FMA_THREADS = 256
FMA_BLOCKS_PER_SM = 8  # 8 × 256 threads = 2048: a full H100/H200 SM
FMA_ITERS = 16384  # a multiple of the unroll factor; ≈1 ms on an H200, so launch overhead is noise
COPY_BYTES = 512 * 1024 * 1024
MATMUL_N = 8192
FP64_MATMUL_N = 4096
REPEATS = 10


def measure(fma_so: str | None) -> dict[str, Any]:
    """All peaks of GPU 0 as a dict matching :class:`optiml.profile.roofline.Peaks`."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device is visible")
    device = torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(device)
    notes = []

    bandwidth = _copy_bandwidth(device)
    if fma_so:
        fp32 = _fma_rate(fma_so, props.multi_processor_count, device)
        notes.append("fp32 from an FFMA loop")
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        fp32 = _matmul_rate(torch.float32, MATMUL_N, device)
        notes.append("fp32 from SGEMM (no FMA probe)")
    return {
        "gpu": props.name,
        "dram_bandwidth": bandwidth,
        "fp32_flops": fp32,
        "fp16_tensor_flops": _matmul_rate(torch.float16, MATMUL_N, device),
        "bf16_tensor_flops": _matmul_rate(torch.bfloat16, MATMUL_N, device),
        "fp64_flops": _matmul_rate(torch.float64, FP64_MATMUL_N, device),
        "source": f"measured {time.strftime('%Y-%m-%d')} (copy bandwidth; {'; '.join(notes)}; torch.matmul)",
    }


def _best_ms(call: Callable[[], object], repeats: int = REPEATS) -> float:
    import torch

    call()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def _copy_bandwidth(device: Any) -> float:
    """Device-to-device copy: bytes read plus bytes written per second."""
    import torch

    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * COPY_BYTES / (_best_ms(lambda: dst.copy_(src)) / 1e3)


def _matmul_rate(dtype: Any, n: int, device: Any) -> float:
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    ms = _best_ms(lambda: torch.matmul(a, b))
    return 2 * n**3 / (ms / 1e3)


def _fma_rate(so_path: str, sms: int, device: Any) -> float:
    import torch

    lib = ctypes.CDLL(so_path)
    entry = lib.optiml_fma_peak
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    blocks = sms * FMA_BLOCKS_PER_SM
    out = torch.empty(blocks * FMA_THREADS, dtype=torch.float32, device=device)
    stream = torch.cuda.current_stream(device)

    def launch() -> None:
        rc = entry(out.data_ptr(), blocks, FMA_THREADS, FMA_ITERS, stream.cuda_stream)
        if rc != 0:
            raise RuntimeError(f"FMA probe launch failed with CUDA error {rc}")

    ms = _best_ms(launch)
    return blocks * FMA_THREADS * FMA_ITERS * FMA_CHAINS * 2 / (ms / 1e3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optiml.peaks.probe")
    parser.add_argument("--out", required=True, help="where to write the peaks as JSON")
    parser.add_argument("--fma-so", default=None, help="shared object built from FMA_PROBE_SOURCE")
    args = parser.parse_args(argv)
    try:
        peaks = measure(args.fma_so)
    except Exception as exc:  # one line for the orchestrator, never a traceback
        print(f"peaks probe failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    Path(args.out).write_text(json.dumps(peaks), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
