"""Which compile flags are proposed, and when fast math is allowed."""

from __future__ import annotations

from pathlib import Path

from propose_helpers import make_task

from optiml.kernel.source import KernelSource
from optiml.propose.flags import FAST_MATH_MIN_RTOL, flag_changes
from optiml.values import CompileResult, KernelResources

KERNEL = KernelSource("OPTIML_EXPORT int optiml_forward();\n")


def compiled(registers: int, spill_stores: int = 0) -> CompileResult:
    resources = (KernelResources(name="k", arch="sm_90a", registers=registers, spill_stores=spill_stores),)
    return CompileResult(
        ok=True, so_path=None, digest="d", arch="sm_90a", seconds=0.1, cached=False, resources=resources
    )


def keys(changes: list) -> list[str]:
    return [c.key for c in changes]


def test_fast_math_only_with_loose_tolerance(tmp_path: Path) -> None:
    strict = make_task(tmp_path, rtol=1e-4)
    loose = make_task(tmp_path, rtol=FAST_MATH_MIN_RTOL)
    assert "flag:--use_fast_math" not in keys(flag_changes(KERNEL, strict))
    [fast] = [c for c in flag_changes(KERNEL, loose) if c.key == "flag:--use_fast_math"]
    assert fast.flags == ("--use_fast_math",)
    assert "rtol=0.001" in fast.rationale


def test_flags_already_present_or_always_passed_are_not_proposed(tmp_path: Path) -> None:
    task = make_task(tmp_path, rtol=1e-2)
    assert keys(flag_changes(KERNEL, task)) == [
        "flag:-Xptxas=-dlcm=ca",
        "flag:-extra-device-vectorization",
        "flag:--use_fast_math",
    ]
    with_flags = KERNEL.with_flags(("-Xptxas=-dlcm=ca", "--use_fast_math"))
    [change] = flag_changes(with_flags, task)
    assert change.flags == ("-Xptxas=-dlcm=ca", "--use_fast_math", "-extra-device-vectorization")
    assert all(c.key != "flag:-O3" for c in flag_changes(KERNEL, task))  # the compiler always passes -O3


def test_register_cap_from_ptxas_report(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    [cap] = [c for c in flag_changes(KERNEL, task, compiled(registers=120)) if c.key.startswith("flag:-maxrreg")]
    assert cap.flags == ("-maxrregcount=96",) and "k uses 120" in cap.rationale
    assert not any("maxrreg" in k for k in keys(flag_changes(KERNEL, task, compiled(registers=40))))
    assert not any("maxrreg" in k for k in keys(flag_changes(KERNEL, task, compiled(registers=120, spill_stores=8))))
