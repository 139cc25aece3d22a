"""nvcc's steps with the host and device chains at once: the listing's cut, the script, the build."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.nvcc_steps import (
    FATBIN_SYMBOL,
    NvccSteps,
    fatbin_data_source,
    fatbin_wrapper,
    module_id,
    parallel_script,
    parse_dryrun,
    tool_name,
)
from optiml.kernel.source import KernelSource

ENVIRONMENT = [
    "#$ _SPACE_= ",
    "#$ CICC_PATH=/opt/cuda/nvvm/bin",
    '#$ SYSTEM_INCLUDES="-isystem" "/opt/cuda/include/cccl"',
]
LISTING = [
    *ENVIRONMENT,
    "#$ rm .nvcc/k_dlink.reg.c",
    '#$ gcc -E -x c++ kernel.cu -o ".nvcc/kernel.cpp4.ii"',
    '#$ cudafe++ --c++17 --gen_module_id_file --module_id_file_name ".nvcc/kernel.module_id" ".nvcc/kernel.cpp4.ii"',
    '#$ gcc -D__CUDA_ARCH__=900 -E -x c++ kernel.cu -o ".nvcc/kernel.cpp1.ii"',
    '#$ "$CICC_PATH/cicc" --module_id_file_name ".nvcc/kernel.module_id" ".nvcc/kernel.cpp1.ii" -o ".nvcc/kernel.ptx"',
    '#$ ptxas -arch=sm_90a -v ".nvcc/kernel.ptx" -o ".nvcc/kernel.cubin"',
    '#$ fatbinary --create=".nvcc/kernel.fatbin" --embedded-fatbin=".nvcc/kernel.fatbin.c"',
    '#$ gcc -c -x c++ ".nvcc/kernel.cudafe1.cpp" -o ".nvcc/kernel.o"',
    '#$ g++ -shared ".nvcc/kernel.o" -o "kernel.so"',
]


def test_a_listing_is_cut_into_two_chains_and_a_tail() -> None:
    steps = parse_dryrun("\n".join(["nvcc warning : a note of nvcc's own", *LISTING]))
    assert steps is not None
    assert [tool_name(c) for c in steps.host] == ["gcc", "cudafe++"]
    assert "--gen_module_id_file" not in steps.host[-1]  # the module id is written beforehand
    assert [tool_name(c) for c in steps.device] == ["gcc", "cicc", "ptxas", "fatbinary"]
    assert [tool_name(c) for c in steps.tail] == ["gcc", "g++"]
    assert steps.prelude == ("rm .nvcc/k_dlink.reg.c",)
    assert steps.module_id_file == '".nvcc/kernel.module_id"'
    assert steps.notes == ("nvcc warning : a note of nvcc's own",)
    assert len(steps.environment) == 3


@pytest.mark.parametrize(
    "change",
    [
        lambda lines: [line for line in lines if "cudafe++" not in line],  # no host front end
        lambda lines: [line.replace("--gen_module_id_file ", "") for line in lines],  # id made elsewhere
        lambda lines: [line for line in lines if "ptxas" not in line],  # no device compile
        lambda lines: [
            line.replace('--module_id_file_name ".nvcc/kernel.module_id" ".nvcc/kernel.cpp1', '".nvcc/k')
            for line in lines
        ],  # cicc reads no module id: the chains are not what they seem
        lambda lines: lines[:-2],  # nothing after the fatbinary
    ],
)
def test_a_listing_of_another_shape_is_left_to_nvcc(change) -> None:
    assert parse_dryrun("\n".join(change(LISTING))) is None


CICC = (
    '#$ "$CICC_PATH/cicc" --include_file_name "kernel.fatbin.c" --module_id_file_name ".nvcc/kernel.module_id" '
    '--gen_c_file_name ".nvcc/kernel.cudafe1.c" --stub_file_name ".nvcc/kernel.cudafe1.stub.c" ".nvcc/kernel.cpp1.ii" '
    '-o ".nvcc/kernel.ptx"'
)
WHOLE_PROGRAM = [
    *ENVIRONMENT,
    "#$ rm .nvcc/kernel_dlink.reg.c",
    '#$ gcc -E -x c++ kernel.cu -o ".nvcc/kernel.cpp4.ii"',
    '#$ cudafe++ --c++17 --gen_module_id_file --module_id_file_name ".nvcc/kernel.module_id" ".nvcc/kernel.cpp4.ii"',
    '#$ gcc -D__CUDA_ARCH__=900 -E -x c++ kernel.cu -o ".nvcc/kernel.cpp1.ii"',
    CICC,
    '#$ ptxas -arch=sm_90a -m64 -v ".nvcc/kernel.ptx" -o ".nvcc/kernel.cubin"',
    '#$ fatbinary --create=".nvcc/kernel.fatbin" -64 "--image3=kind=elf,sm=90a,file=.nvcc/kernel.cubin" '
    '--embedded-fatbin=".nvcc/kernel.fatbin.c"',
    '#$ gcc -c -x c++ -fPIC -m64 ".nvcc/kernel.cudafe1.cpp" -o ".nvcc/kernel.o"',
    '#$ nvlink -m64 --shared --arch=sm_90a --register-link-binaries=".nvcc/kernel_dlink.reg.c" ".nvcc/kernel.o" '
    '-lcudadevrt -o ".nvcc/kernel_dlink.cubin"',
    '#$ fatbinary --create=".nvcc/kernel_dlink.fatbin" -64 -link '
    '"--image3=kind=elf,sm=90a,file=.nvcc/kernel_dlink.cubin" --embedded-fatbin=".nvcc/kernel_dlink.fatbin.c"',
    '#$ gcc -c -x c++ -DFATBINFILE="\\".nvcc/kernel_dlink.fatbin.c\\"" "/opt/cuda/bin/crt/link.stub" '
    '-o ".nvcc/kernel_dlink.o"',
    '#$ g++ -fPIC -m64 -Wl,--start-group ".nvcc/kernel_dlink.o" ".nvcc/kernel.o" -shared -lcudart_static '
    '-Wl,--end-group -o "kernel.so"',
]


def test_a_whole_program_build_gets_the_overlapped_tail() -> None:
    steps = parse_dryrun("\n".join(WHOLE_PROGRAM))
    assert steps is not None and steps.split is not None
    split = steps.split
    assert [tool_name(c) for c in steps.tail] == ["gcc", "nvlink", "fatbinary", "gcc", "g++"]  # nvcc's, kept
    assert [tool_name(c) for c in split.device_front] == ["gcc", "cicc"]  # cicc writes the stub the host compile needs
    assert [tool_name(c) for c in split.device_back] == ["ptxas", "fatbinary", "gcc"]
    assert "--embedded-fatbin" not in split.device_back[1]  # our wrapper stays
    assert split.device_back[2] == "gcc -c .nvcc/kernel.fatbin.s -o .nvcc/kernel.fatbin.o"
    assert split.host_compile == steps.tail[0]
    assert split.link == (
        'g++ -fPIC -m64 -Wl,--start-group .nvcc/kernel.fatbin.o ".nvcc/kernel.o" -shared -lcudart_static '
        '-Wl,--end-group -o "kernel.so"'
    )
    assert (split.fatbin_file, split.wrapper_file) == (".nvcc/kernel.fatbin", ".nvcc/kernel.fatbin.c")
    assert split.data_source_file == ".nvcc/kernel.fatbin.s"


def test_the_fatbinary_wrapper_points_at_the_data_objects_bytes() -> None:
    wrapper = fatbin_wrapper()
    assert f"extern const unsigned long long {FATBIN_SYMBOL}[]" in wrapper and 'visibility ("hidden")' in wrapper
    assert f"{{ 0x466243b1, 1, {FATBIN_SYMBOL}, 0 }}" in wrapper  # FATBINC_MAGIC, FATBINC_VERSION
    data = fatbin_data_source(".nvcc/kernel.fatbin").splitlines()
    assert data[:2] == ['.section .nv_fatbin,"a"', ".align 8"]
    assert f".hidden {FATBIN_SYMBOL}" in data and '.incbin ".nvcc/kernel.fatbin"' in data


def _replace(old: str, new: str) -> Callable[[list[str]], list[str]]:
    return lambda lines: [line.replace(old, new) for line in lines]


@pytest.mark.parametrize(
    "change",
    [
        _replace("--include_file_name", "--device-c --include_file_name"),  # -rdc=true, -dc: cicc
        _replace('-v ".nvcc/kernel.ptx', '-ewp ".nvcc/kernel.ptx'),  # -ewp: ptxas and fatbinary
        _replace(
            '-64 "--image3=kind=elf,sm=90a,file=.nvcc/kernel.cubin',
            '-64 --device-c "--image3=kind=elf,sm=90a,file=.nvcc/kernel.cubin',
        ),  # -ewp: a relocatable fatbinary
        _replace('--stub_file_name ".nvcc/', '--stub_file_name "elsewhere/'),  # the stub includes another wrapper
        _replace('--embedded-fatbin=".nvcc/kernel.fatbin.c"', ""),  # no wrapper to replace
        _replace('".nvcc/kernel_dlink.o" ".nvcc/kernel.o" -shared', '".nvcc/kernel.o" -shared'),  # dlink unlinked
        lambda lines: [line for line in lines if "nvlink" not in line],  # another tail
        lambda lines: [*lines[:-1], "#$ strip kernel.so", lines[-1]],  # another tail
        lambda lines: [*lines[:8], CICC, *lines[8:]],  # two device compiles
    ],
)
def test_other_tails_and_relocatable_device_code_keep_nvccs_tail(change) -> None:
    changed = change(WHOLE_PROGRAM)
    assert changed != WHOLE_PROGRAM
    steps = parse_dryrun("\n".join(changed))
    assert steps is not None and steps.split is None


def test_module_ids_follow_nvccs_form_and_differ_per_build() -> None:
    assert module_id("0123456789abcdef0123", "kernel.cu") == "_01234567_9_kernel_cu_89abcdef"
    assert module_id("a" * 24, "kernel.cu") != module_id("b" * 24, "kernel.cu")


def _run(script: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """``script`` in ``folder``, with nvcc's tools replaced by programs that do nothing."""
    (folder / "logs").mkdir(exist_ok=True)
    (folder / "bin").mkdir(exist_ok=True)
    for tool in ("cudafe++", "cicc", "ptxas", "fatbinary", "nvlink", "hostcc"):
        (folder / "bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (folder / "bin" / tool).chmod(0o755)
    env = {"PATH": f"{folder / 'bin'}:{os.environ['PATH']}"}
    merged = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}  # as the compile sandbox reads it
    return subprocess.run(["sh", "-c", script], cwd=folder, text=True, timeout=60, env=env, **merged)


def _steps(host: list[str], device: list[str], tail: list[str]) -> NvccSteps | None:
    listing = [
        *ENVIRONMENT,
        *(f"#$ {c}" for c in host[:-1]),
        f'#$ cudafe++ --gen_module_id_file --module_id_file_name "logs/id" ; {host[-1]}',
        *(f"#$ {c}" for c in device[:-1]),
        '#$ cicc --module_id_file_name "logs/id"',
        "#$ ptxas",
        f"#$ fatbinary ; {device[-1]}",
        *(f"#$ {c}" for c in tail),
    ]
    return parse_dryrun("\n".join(listing))


def test_the_script_runs_the_chains_at_once_in_nvccs_order(tmp_path: Path) -> None:
    steps = _steps(
        ["echo host-1", "sleep 0.5; echo host-2 >&2"],
        ["echo device-1", "sleep 0.5; echo device-2"],
        ["cat logs/id; echo", "echo tail-done"],
    )
    assert steps is not None
    done = _run(parallel_script(steps, "_abc_9_kernel_cu_def", "logs"), tmp_path)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == ["host-1", "host-2", "device-1", "device-2", "_abc_9_kernel_cu_def", "tail-done"]


def test_the_script_fails_as_nvcc_would(tmp_path: Path) -> None:
    both = _steps(["echo host-error; exit 2"], ["echo device-error; exit 3"], ["echo tail"])
    failed = _run(parallel_script(both, "_m", "logs"), tmp_path)
    assert failed.returncode == 2 and failed.stdout.split() == ["host-error"]  # nvcc stops at cudafe++
    device_only = _steps(["echo host-ok"], ["echo device-error; exit 3"], ["echo tail"])
    failed = _run(parallel_script(device_only, "_m", "logs"), tmp_path)
    assert failed.returncode == 3 and failed.stdout.split() == ["host-ok", "device-error"]
    tail_fails = _steps(["true"], ["true"], ["exit 4", "echo never"])
    failed = _run(parallel_script(tail_fails, "_m", "logs"), tmp_path)
    assert failed.returncode == 4 and "never" not in failed.stdout


def _whole_program(
    *, host: str = "true", cicc: str = "true", ptxas: str = "true", compile: str = "true", link: str = "true"
) -> NvccSteps:
    """A whole-program listing whose steps (the tools do nothing) run these commands after the tool."""
    listing = [
        *ENVIRONMENT,
        f'#$ cudafe++ --gen_module_id_file --module_id_file_name "logs/id" ; {host}',
        f'#$ cicc --include_file_name k.fatbin.c --stub_file_name logs/k.stub.c --module_id_file_name "logs/id" '
        f"; {cicc}",
        f"#$ ptxas ; {ptxas}",
        '#$ fatbinary --create="logs/k.fatbin" --embedded-fatbin="logs/k.fatbin.c"',
        f'#$ hostcc -c "logs/k.cpp" -o "logs/k.o" ; {compile}',
        "#$ nvlink ; echo nvlink",
        "#$ fatbinary -link ; echo dlink",
        '#$ hostcc -c link.stub -o "logs/k_dlink.o" ; echo dlink-compile',
        f'#$ hostcc "logs/k_dlink.o" "logs/k.o" -o k.so ; {link}',
    ]
    steps = parse_dryrun("\n".join(listing))
    assert steps is not None and steps.split is not None
    return steps


def test_the_host_compile_runs_after_cicc_beside_ptxas(tmp_path: Path) -> None:
    wait_for_compile = "i=0; while [ ! -f logs/compiling ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done"
    steps = _whole_program(
        host="echo host",
        cicc="echo cicc; : > logs/k.stub.c",  # cicc writes the stub the host compile includes
        ptxas=f"echo ptxas; {wait_for_compile}; test -f logs/compiling && echo ptxas-beside-compile",
        compile="test -f logs/k.stub.c && : > logs/compiling && echo compile-after-cicc",
        link="echo link",
    )
    done = _run(parallel_script(steps, "_m", "logs"), tmp_path)
    assert done.returncode == 0, done.stdout
    assert done.stdout.split() == ["host", "cicc", "ptxas", "ptxas-beside-compile", "compile-after-cicc", "link"]
    assert FATBIN_SYMBOL in (tmp_path / "logs" / "k.fatbin.c").read_text()  # our wrapper, not fatbinary's
    assert '.incbin "logs/k.fatbin"' in (tmp_path / "logs" / "k.fatbin.s").read_text()


@pytest.mark.parametrize(
    ("steps", "status", "output"),
    [
        (dict(host="echo host-error; exit 2", cicc="echo cicc-error; exit 3"), 2, ["host-error"]),
        (
            dict(host="echo host-ok", cicc="echo cicc-error; exit 3", compile="echo compile"),
            3,
            ["host-ok", "cicc-error"],
        ),
        (
            dict(host="echo host-ok", ptxas="echo ptxas-error; exit 5", compile="echo compile"),
            5,
            ["host-ok", "ptxas-error"],
        ),
        (dict(compile="echo compile-error; exit 6", link="echo link"), 6, ["compile-error"]),
        (
            dict(ptxas="echo ptxas-ok", compile="echo compile-ok", link="echo link-error; exit 7"),
            7,
            ["ptxas-ok", "compile-ok", "link-error"],
        ),
    ],
)
def test_the_overlapped_tail_fails_as_nvcc_would(
    tmp_path: Path, steps: dict[str, str], status: int, output: list[str]
) -> None:
    failed = _run(parallel_script(_whole_program(**steps), "_m", "logs"), tmp_path)
    assert failed.returncode == status and failed.stdout.split() == output


BROKEN = """#include "optiml.h"
__device__ float twice(float v) { return 2.0f * v + missing_name; }
OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no,
                                 void* ws, size_t wb, cudaStream_t stream) { return 0; }
"""


@pytest.mark.nvcc
def test_the_parallel_build_reports_what_nvcc_reports(tmp_path: Path) -> None:
    from tests.kernel.test_compiler import SCALE

    results = {}
    for parallel in (True, False):
        compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / str(parallel), parallel_steps=parallel))
        results[parallel] = [compiler.compile(KernelSource(code)) for code in (SCALE, BROKEN)]
        if parallel and None in compiler._listings.values():
            pytest.skip("this nvcc's -dryrun listing has another shape: it builds serially, as nvcc itself")
        assert len(compiler._listings) == (1 if parallel else 0)
    (fast_ok, fast_broken), (slow_ok, slow_broken) = results[True], results[False]
    assert fast_ok.ok and slow_ok.ok
    assert fast_ok.resources == slow_ok.resources
    assert fast_ok.binary_digest and fast_ok.binary_digest == slow_ok.binary_digest  # the same host and device code
    assert not fast_broken.ok and fast_broken.diagnostics == slow_broken.diagnostics
    assert [d.line for d in fast_broken.diagnostics if d.severity == "error"] == [2]


def test_doctor_says_when_an_nvcc_builds_serially(tmp_path: Path) -> None:
    from optiml.doctor import build_schedule_check

    odd = tmp_path / "nvcc"
    odd.write_text("#!/bin/sh\necho '#$ gcc -E -x c++ kernel.cu'\necho '#$ g++ -shared kernel.o -o kernel.so'\n")
    odd.chmod(0o755)
    check = build_schedule_check(str(odd), "sm_90a")
    assert not check.ok and "serial" in check.detail
    shaped = tmp_path / "nvcc_shaped"
    shaped.write_text("#!/bin/sh\ncat <<'LISTING'\n" + "\n".join(LISTING) + "\nLISTING\n")
    shaped.chmod(0o755)
    assert build_schedule_check(str(shaped), "sm_90a").ok


@pytest.mark.nvcc
def test_doctor_reads_the_installed_nvccs_listing() -> None:
    from optiml.doctor import build_schedule_check
    from optiml.kernel.compiler import find_nvcc

    check = build_schedule_check(find_nvcc(), "sm_90a")
    assert check.name == "nvcc build" and check.ok and "host compile beside ptxas" in check.detail
