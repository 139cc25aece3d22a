"""nvcc builds for real (CI has nvcc, no GPU): cache, diagnostics, resources, parallelism."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from optiml.kernel.compiler import (
    HOST_OPTIMIZATION,
    SPLIT_COMPILE,
    SPLIT_COMPILE_MIN_KERNELS,
    Compiler,
    CompilerConfig,
    fast_linker,
    include_dir,
    splits_compile,
)
from optiml.kernel.identity import elf_sections
from optiml.kernel.skeleton import render_skeleton
from optiml.kernel.source import KernelSource, normalize_source
from optiml.task import load_task

pytestmark = pytest.mark.nvcc

ROOT = Path(__file__).resolve().parents[2]
SCALE = """#include "optiml.h"
#define BLOCK_SIZE 256
__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no,
                                 void* ws, size_t wb, cudaStream_t stream) {
  int64_t n = optiml_numel(&in[0]);
  scale<<<(unsigned)optiml_cdiv(n, BLOCK_SIZE), BLOCK_SIZE, 0, stream>>>((const float*)in[0].data,
                                                                       (float*)out[0].data, n);
  return optiml_check_launch();
}
"""


@pytest.fixture
def compiler(tmp_path: Path) -> Compiler:
    return Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))


def test_builds_shared_object_with_resources(compiler: Compiler) -> None:
    result = compiler.compile(KernelSource(SCALE))
    assert result.ok, result.log
    assert result.so_path and Path(result.so_path).is_file()
    assert not result.cached
    [res] = result.resources
    assert res.name.startswith("scale(")
    assert res.registers > 0 and res.spill_stores == 0 and res.arch == "sm_90a"


def test_cache_hit_is_fast_and_keyed_by_flags(compiler: Compiler) -> None:
    first = compiler.compile(KernelSource(SCALE))
    start = time.perf_counter()
    again = compiler.compile(KernelSource(SCALE))
    assert again.cached and again.so_path == first.so_path
    assert time.perf_counter() - start < 0.2
    other = compiler.compile(KernelSource(SCALE, flags=("-DUNUSED_FLAG=1",)))
    assert not other.cached and other.so_path != first.so_path


def test_host_code_gets_its_own_level_and_a_fast_linker(compiler: Compiler, tmp_path: Path) -> None:
    """nvcc's -O is the host code's level: the build passes HOST_OPTIMIZATION and no other -O; a fast
    linker the host compiler has links the library (gold leaves its version note), and both are part
    of the cache key."""
    result = compiler.compile(KernelSource(SCALE))
    assert result.ok, result.log
    levels = [flag for flag in result.command if flag.startswith("-O")]
    assert levels == [HOST_OPTIMIZATION]
    linker = fast_linker("g++")
    sections = {name for name, *_ in elf_sections(Path(str(result.so_path)).read_bytes())}
    if linker == "gold":
        assert "-fuse-ld=gold" in result.command and ".note.gnu.gold-version" in sections
    elif linker is None:
        assert not any(flag.startswith("-fuse-ld") for flag in result.command)
    plain = Compiler(
        CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache", host_optimization="-O3", fast_linker=False)
    )
    assert plain.host_flags == ("-O3",)
    assert plain.cache_key(KernelSource(SCALE)) != compiler.cache_key(KernelSource(SCALE))
    other = plain.compile(KernelSource(SCALE))
    assert other.ok and not other.cached
    assert ".note.gnu.gold-version" not in {name for name, *_ in elf_sections(Path(str(other.so_path)).read_bytes())}


def test_no_fast_linker_without_a_host_compiler(tmp_path: Path) -> None:
    assert fast_linker(None) is None
    assert fast_linker(str(tmp_path / "no-such-g++")) is None


def test_a_new_compiler_reuses_the_kept_nvcc_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The -dryrun listing is kept in the cache folder: a second process's compiler (a new Compiler on the
    same folder) builds without a dry run, and a garbled kept listing only costs the parallel schedule."""
    from optiml.kernel import compiler as compiler_module

    first = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    assert first.compile(KernelSource(SCALE)).ok
    [kept] = (tmp_path / "cache" / compiler_module.LISTINGS_DIR).glob("*.txt")
    assert "cicc" in kept.read_text()
    monkeypatch.setattr(compiler_module.nvcc_steps, "dryrun", lambda cmd: pytest.fail("dry run repeated"))
    second = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    built = second.compile(KernelSource(SCALE + "// another build\n"))
    assert built.ok and built.binary_digest
    kept.write_text("garbage")
    third = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    assert third.compile(KernelSource(SCALE + "// a third build\n")).ok  # nvcc's own serial build


def test_compile_error_has_line_and_message(compiler: Compiler) -> None:
    broken = SCALE.replace("y[i] = 2.0f * x[i];", "y[i] = 2.0f * x[i] + missing_name;")
    result = compiler.compile(KernelSource(broken))
    assert not result.ok and result.so_path is None
    [error] = result.errors
    assert error.line == 5
    assert "missing_name" in error.message
    assert "line 5" in result.error_summary()


def test_bad_flag_and_link_errors_are_reported(compiler: Compiler) -> None:
    flag = compiler.compile(KernelSource(SCALE, flags=("--no-such-flag",)))
    assert not flag.ok and "no-such-flag" in flag.error_summary()


def test_spills_and_shared_memory_are_parsed(compiler: Compiler) -> None:
    heavy = SCALE.replace(
        "if (i < n) y[i] = 2.0f * x[i];",
        "__shared__ float tile[1024]; volatile float local[256];\n"
        "  for (int k = 0; k < 256; ++k) local[k] = x[(i + k) % n];\n"
        "  tile[threadIdx.x] = local[i % 256]; __syncthreads();\n"
        "  if (i < n) y[i] = tile[(threadIdx.x + 1) % blockDim.x];",
    )
    result = compiler.compile(KernelSource(heavy))
    assert result.ok, result.log
    [res] = result.resources
    assert res.shared_bytes == 4096
    assert res.stack_bytes >= 1024 and res.barriers == 1


def test_compile_many_runs_in_parallel_and_keeps_order(compiler: Compiler) -> None:
    kernels = [KernelSource(SCALE.replace("2.0f", f"{k}.0f")) for k in range(2, 6)]
    start = time.perf_counter()
    results = compiler.compile_many(kernels)
    assert [r.digest for r in results] == [k.digest for k in kernels]
    assert all(r.ok for r in results)
    assert time.perf_counter() - start < 60


def test_every_starter_kernel_and_skeleton_compiles_cleanly(compiler: Compiler) -> None:
    tasks = sorted((ROOT / "tasks").glob("*.py"))
    sources = []
    for path in tasks:
        task = load_task(path)
        assert task.naive_kernel_path is not None
        sources.append(KernelSource.from_file(task.naive_kernel_path))
        sources.append(KernelSource(render_skeleton(task)))
    for result in compiler.compile_many(sources):
        assert result.ok, result.error_summary()
        assert not [d for d in result.diagnostics if d.severity == "warning"], result.error_summary()


def test_normalised_identity_ignores_comments_and_layout() -> None:
    a = KernelSource(SCALE)
    b = KernelSource("// a comment\n" + SCALE.replace("  ", "    ").replace("/* x */", ""))
    assert a.digest == b.digest
    assert normalize_source("int /* c */ x;  // y\n") == "int x;"
    assert KernelSource(SCALE, ("-O3",)).digest != a.digest


def many_kernels(count: int) -> KernelSource:
    """A source of ``count`` kernels, each launched by ``optiml_forward`` (a multi-kernel plan in small)."""
    kernels = "".join(
        f"__global__ void scale{k}(const float* __restrict__ x, float* __restrict__ y, int64_t n) {{\n"
        f"  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n"
        f"  if (i < n) y[i] = {k + 2}.0f * x[i] + (float)(i % {k + 3});\n}}\n"
        for k in range(count)
    )
    launches = "".join(
        f"  scale{k}<<<(unsigned)optiml_cdiv(n, 256), 256, 0, stream>>>((const float*)in[0].data, "
        "(float*)out[0].data, n);\n"
        for k in range(count)
    )
    return KernelSource(
        '#include "optiml.h"\n' + kernels + "OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int ni, "
        "optiml_tensor* out, int no, void* ws, size_t wb, cudaStream_t stream) {\n"
        "  int64_t n = optiml_numel(&in[0]);\n" + launches + "  return optiml_check_launch();\n}\n"
    )


def test_splits_compile_reads_nvcc_s_version() -> None:
    assert splits_compile("Build cuda_13.0.r13.0/compiler.36424714_0")
    assert splits_compile("Build cuda_12.1.r12.1/compiler.32415258_0")
    assert not splits_compile("Build cuda_12.0.r12.0/compiler.31968024_0")
    assert not splits_compile("Build cuda_11.8.r11.8/compiler.31833905_0")
    assert not splits_compile("no version here")


def test_a_many_kernel_source_splits_its_compile_into_the_same_machine_code(compiler: Compiler, tmp_path: Path) -> None:
    if not compiler.split_compile:
        pytest.skip(f"nvcc without -split-compile ({compiler.version})")
    many, few = many_kernels(SPLIT_COMPILE_MIN_KERNELS), many_kernels(SPLIT_COMPILE_MIN_KERNELS - 1)
    assert SPLIT_COMPILE in compiler.build_flags(many) and SPLIT_COMPILE not in compiler.build_flags(few)
    assert SPLIT_COMPILE not in compiler.build_flags(KernelSource(SCALE))
    built = compiler.compile(many)
    assert built.ok and SPLIT_COMPILE in built.command, built.error_summary()
    unsplit = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "other"))
    unsplit.split_compile = False  # an older nvcc: the same source is another build
    assert SPLIT_COMPILE not in unsplit.build_flags(many) and unsplit.cache_key(many) != compiler.cache_key(many)
    (tmp_path / "many.cu").write_text(many.code, encoding="utf-8")
    texts = []
    for extra in ((), (SPLIT_COMPILE,)):
        cubin = tmp_path / f"many{len(extra)}.cubin"
        command = [compiler.nvcc, "-cubin", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"]
        command += [f"-I{include_dir()}", *extra, "-o", str(cubin), str(tmp_path / "many.cu")]
        subprocess.run(command, check=True, capture_output=True)
        texts.append({name: body for name, _, _, body in elf_sections(cubin.read_bytes()) if name.startswith(".text.")})
    assert len(texts[0]) == SPLIT_COMPILE_MIN_KERNELS and texts[0] == texts[1]  # kernel for kernel, the same code
