"""The compute roof of the physics floor, so that a compute-bound fake cannot hide under bandwidth.

The floor of a candidate's time is ``max(bytes / bandwidth, flops / compute roof)``. Without a
compute roof a GEMM whose answer is replayed from a cache runs at copy speed and still looks
physical. The roof is the GPU's measured peak (:mod:`optiml.peaks`' probe, cached per GPU), never
below its datasheet figure: the floor must be a bound no honest kernel beats, so the higher of
the two is used. Which peak applies follows the task's dtype and tolerance: fp32 tasks with a
tight tolerance get the faster of the FP32 FMA rate and a quarter of the half-precision tensor-core
rate (fp32 accuracy on tensor cores splits each operand: three TF32 products, a sixth of that rate,
run the template's ``tf32x3_tma`` GEMM at 1.4-1.5x the FMA rate on the H200; slicing schemes on int8
units reach about a fifth), fp32 tasks with a loose tolerance the TF32 tensor-core rate, fp16/bf16
tasks their tensor-core rate, fp64 the FP64 rate. Only the task's own ``OPTIML['flops']`` counts as
work: flops counted from the reference's ops overstate it wherever an honest kernel may skip work the
reference does (a diagonal or triangular matmul), and would reject such kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.integrity.screen import is_fp32_strict
from optiml.kernel.compiler import Compiler
from optiml.task import Task, TaskMeta


@dataclass(frozen=True)
class ComputeRoof:
    """flop/s for the floor and a one-line account of where it came from."""

    flops_per_s: float
    source: str


def roof_rate(meta: TaskMeta, fp32: float, fp16_tensor: float, bf16_tensor: float, fp64: float) -> float:
    """The compute peak that bounds a task of this dtype and tolerance (flop/s; 0 = unknown)."""
    if meta.dtype == "float16":
        return fp16_tensor or fp32
    if meta.dtype == "bfloat16":
        return bf16_tensor or fp16_tensor or fp32
    if meta.dtype == "float64":
        return fp64 or fp32 / 2
    if is_fp32_strict(meta):
        return max(fp32, fp16_tensor / 4)  # split products on tensor cores (see the module docstring)
    return max(fp32, fp16_tensor / 2)  # a loose fp32 tolerance admits TF32 tensor cores (half the fp16 rate)


def compute_roof(task: Task, compiler: Compiler) -> ComputeRoof:
    """The roof for ``task`` on this machine's GPU: measured (cached) or datasheet, whichever is higher."""
    from optiml.peaks import Peaks, datasheet_peaks, find_peaks

    def rate(peaks: Peaks) -> float:
        return roof_rate(
            task.meta, peaks.fp32_flops, peaks.fp16_tensor_flops, peaks.bf16_tensor_flops, peaks.fp64_flops
        )

    found = find_peaks(compiler)
    sheet = datasheet_peaks(found.gpu)
    best, source = rate(found), found.source
    if sheet is not None and rate(sheet) > best:
        best, source = rate(sheet), f"{sheet.source}, above the {found.source} {rate(found) / 1e12:.1f} TFLOP/s"
    return ComputeRoof(best, f"{best / 1e12:.1f} TFLOP/s for {task.meta.dtype} ({source})")
