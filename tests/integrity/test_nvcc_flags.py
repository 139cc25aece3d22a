"""The nvcc flag allow-list."""

from __future__ import annotations

import pytest

from optiml.integrity.screen import screen_flags


@pytest.mark.parametrize(
    "flags",
    [
        ("-O3",),
        ("-Xptxas", "-O3,-v"),
        ("-Xptxas=-dlcm=ca",),
        ("--maxrregcount=64",),
        ("-maxrregcount", "64"),
        ("-DBLOCK=256", "-DUSE_VEC", "-UFOO"),
        ("-D", "TILE=32"),
        ("-lineinfo", "--extra-device-vectorization", "-std=c++17", "--expt-relaxed-constexpr"),
        ("-Xcompiler", "-O3"),
    ],
)
def test_allowed_flags_pass(flags: tuple[str, ...]) -> None:
    assert screen_flags(flags, fp32_strict=True).findings == ()


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        (("-I/home/me",), "-I/home/me"),
        (("-include", "/etc/passwd"), "-include"),
        (("--pre-include=/etc/passwd",), "--pre-include=/etc/passwd"),
        (("-o", "/tmp/x"), "-o"),
        (("-lcurl",), "-lcurl"),
        (("-Xlinker", "--wrap=cudaEventElapsedTime"), "-Xlinker"),
        (("-Xcompiler", "-include,/etc/passwd"), "-Xcompiler -include,/etc/passwd"),
        (("-Xcompiler=-fplugin=evil.so",), "-Xcompiler=-fplugin=evil.so"),
        (("-Xptxas",), "-Xptxas "),
        (("-DX=system(1)",), "-DX=system(1)"),
        (("-D", "X=(1)"), "-D X=(1)"),
        (("-arch=sm_80",), "-arch=sm_80"),
        (("--default-stream", "per-thread"), "--default-stream"),
        (("-ccbin", "./evil"), "-ccbin"),
    ],
)
def test_other_flags_are_rejected(flags: tuple[str, ...], shown: str) -> None:
    report = screen_flags(flags, fp32_strict=False)
    assert report.rejected
    assert report.rejections[0].rule == "nvcc-flag"
    assert report.rejections[0].text == shown


@pytest.mark.parametrize(
    "flag", ["--use_fast_math", "-use_fast_math", "--ftz=true", "-prec-div=false", "--prec-sqrt=false"]
)
def test_fast_math_is_flagged_only_for_fp32_strict(flag: str) -> None:
    strict = screen_flags((flag,), fp32_strict=True)
    assert not strict.rejected and [f.rule for f in strict.flags] == ["fast-math"]
    assert screen_flags((flag,), fp32_strict=False).findings == ()


def test_precise_math_switches_are_not_flagged() -> None:
    assert screen_flags(("--ftz=false", "--prec-div=true", "--fmad=true"), fp32_strict=True).findings == ()
