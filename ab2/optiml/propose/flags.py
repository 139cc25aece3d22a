"""Compile-flag changes worth trying on a kernel, and when each is allowed.

``--use_fast_math`` swaps in approximate ``expf``/``logf``/division/``sqrtf``, flushes denormals to
zero and contracts more multiply-adds. The intrinsics it substitutes have relative errors of a few
ulp around 1e-6, growing with the argument (``__expf``: ``2 + 1.16*|x|`` ulp), so it is only
proposed when the task's relative tolerance is at least :data:`FAST_MATH_MIN_RTOL` = 1e-3: two to
three orders of magnitude above the approximation error, so a kernel that was right stays right.
The fp32 default (1e-4, what KernelBench uses) does not qualify; fp16/bf16 tasks (1e-2) do. Such a
task is never "fp32-strict" in the sense of :func:`optiml.integrity.screen.is_fp32_strict`, so the
integrity screen does not flag the proposal either.

Flags the compiler always passes (:data:`optiml.kernel.compiler.BASE_FLAGS`) are never proposed:
they would change the cache key without changing the binary. That is why ``-O3`` is not among the
candidates: every candidate is already built with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.kernel.compiler import BASE_FLAGS
from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.values import CompileResult

FAST_MATH_MIN_RTOL = 1e-3
REGISTER_CAPS = (128, 96, 64, 48, 32)


@dataclass(frozen=True)
class FlagChange:
    key: str
    flags: tuple[str, ...]  # the kernel's complete new flag list
    rationale: str
    signals: frozenset[str]


_CANDIDATES = (
    (
        "-Xptxas=-dlcm=ca",
        "Cache global loads in L1 as well as L2 (-dlcm=ca): helps kernels that re-read neighbouring data "
        "within a block, such as stencils, row passes and uncoalesced reads.",
        frozenset({"memory"}),
    ),
    (
        "-extra-device-vectorization",
        "Let the device compiler vectorise more aggressively (-extra-device-vectorization): it may merge "
        "adjacent scalar loads and stores into wider ones.",
        frozenset({"memory", "compute"}),
    ),
)


def flag_changes(kernel: KernelSource, task: Task, compile_result: CompileResult | None = None) -> list[FlagChange]:
    """Flags to add to ``kernel``, in a stable order (see the module docstring for what is allowed)."""
    have = set(kernel.flags) | set(BASE_FLAGS)
    changes = [
        FlagChange(f"flag:{flag}", (*kernel.flags, flag), why, signals)
        for flag, why, signals in _CANDIDATES
        if flag not in have
    ]
    if "--use_fast_math" not in have and task.meta.rtol >= FAST_MATH_MIN_RTOL:
        changes.append(
            FlagChange(
                "flag:--use_fast_math",
                (*kernel.flags, "--use_fast_math"),
                f"Compile with --use_fast_math: approximate transcendentals and division, flush-to-zero. "
                f"The task's rtol={task.meta.rtol:g} is at least {FAST_MATH_MIN_RTOL:g}, far above their "
                "error (a few ulp).",
                frozenset({"compute"}),
            )
        )
    cap = _register_cap(kernel, compile_result)
    if cap is not None:
        changes.append(cap)
    return changes


def _register_cap(kernel: KernelSource, compile_result: CompileResult | None) -> FlagChange | None:
    """``-maxrregcount`` one step below the kernel's heaviest register use, when that use is high."""
    if compile_result is None or not compile_result.resources:
        return None
    if any(flag.startswith("-maxrregcount") for flag in kernel.flags):
        return None
    worst = max(compile_result.resources, key=lambda r: r.registers)
    if worst.spills:
        return None  # already spilling: a lower cap would only spill more
    cap = next((c for c in REGISTER_CAPS if c < worst.registers), None)
    if cap is None or worst.registers <= 64:
        return None
    return FlagChange(
        f"flag:-maxrregcount={cap}",
        (*kernel.flags, f"-maxrregcount={cap}"),
        f"Cap registers at {cap} per thread (-maxrregcount={cap}; {worst.name} uses {worst.registers}): more "
        "resident warps to hide latency, at the risk of spills (watch the ptxas report).",
        frozenset({"occupancy"}),
    )
