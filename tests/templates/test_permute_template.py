"""Permute template: space, default rule, deterministic rendering, nvcc builds, and numerics on the CPU.

Numerics run without a GPU: the rendered translation unit is compiled with g++ as host code
against a small CUDA emulator (the real ``optiml.h`` over a mock ``cuda_runtime.h``: blocks run in
sequence, each block's threads are OS threads sharing a barrier for ``__syncthreads``, or run one
after another when the file has no barrier) and called
through ctypes on numpy arrays. :func:`emulate` is shared with the pool template's tests.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tu import EMULATOR_SANITIZERS, translation_unit

from optiml.evaluate.abi import OptimlTensor as _Tensor
from optiml.graph.ir import Graph, Node, TensorType, Value
from optiml.kernel.compiler import Compiler, CompilerConfig, include_dir
from optiml.kernel.source import KernelSource
from optiml.templates.base import DeviceFacts, GroupConfig, Operand, RenderContext, TemplateError
from optiml.templates.group import Group, PermuteSpec
from optiml.templates.permute.permute import PermuteTemplate

FACTS = DeviceFacts()
PERMUTE = PermuteTemplate()
needs_nvcc = [pytest.mark.nvcc, pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")]
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="the CUDA emulator needs g++")


def permute_group(shape: tuple[int, ...], perm: tuple[int, ...], index: int = 0, dtype: str = "float32") -> Group:
    out = tuple(shape[d] for d in perm)
    values = (Value(0, TensorType(shape, dtype)), Value(1, TensorType(out, dtype), producer=0))
    graph = Graph(values, (0,), (Node(0, "permute", (0,), (1,), (("perm", perm),), "aten.permute"),), (1,))
    return Group(index, "permute", (0,), (0,), (1,), graph, PermuteSpec(perm))


def permute_context(prefix: str, ctype: str = "float", compute: str = "float") -> RenderContext:
    return RenderContext(
        prefix=prefix,
        inputs=[Operand(f"((const {ctype}*)inputs[0].data)", ctype)],
        outputs=[Operand(f"(({ctype}*)outputs[0].data)", ctype)],
        dims=lambda vid, d: f"{'inputs' if vid == 0 else 'outputs'}[0].shape[{d}]",
        compute_type=compute,
    )


def render(group: Group, config: GroupConfig) -> str:
    code = PERMUTE.render(group, config, permute_context(group.prefix))
    return code.device + "\n" + code.host


# -- space, rule, rendering ---------------------------------------------------------------------
def test_space_default_and_seeds() -> None:
    group = permute_group((4, 8, 16), (0, 2, 1))
    space = PERMUTE.space(group, FACTS)
    assert space.variants == ("tiled", "naive_gather")
    assert PERMUTE.default(group, FACTS) == GroupConfig.of("tiled", tile=32, block_rows=8)
    seeds = PERMUTE.seeds(group, FACTS)
    assert seeds[0] == PERMUTE.default(group, FACTS) and len(seeds) == 3 and len(set(seeds)) == 3
    assert all(space.reason_invalid(s) is None for s in seeds)
    assert "not in" in (space.reason_invalid(GroupConfig.of("tiled", tile=16, block_rows=8)) or "")
    assert "not in" in (space.reason_invalid(GroupConfig.of("naive_gather", threads=1024)) or "")
    assert "not set" in (space.reason_invalid(GroupConfig.of("tiled", tile=32)) or "")
    assert "no knob" in (space.reason_invalid(GroupConfig.of("naive_gather", threads=256, tile=32)) or "")
    assert "unknown variant" in (space.reason_invalid(GroupConfig.of("vectorized", width=4)) or "")
    with pytest.raises(TemplateError):
        PERMUTE.render(group, GroupConfig.of("tiled", tile=48, block_rows=8), permute_context("g0"))


def test_render_is_deterministic_prefixed_and_size_free() -> None:
    for config in PERMUTE.seeds(permute_group((2, 3, 4, 5), (0, 2, 3, 1)), FACTS):
        a = render(permute_group((2, 3, 4, 5), (0, 2, 3, 1), index=5), config)
        assert a == render(permute_group((2, 3, 4, 5), (0, 2, 3, 1), index=5), config)
        assert a == render(permute_group((64, 1, 999, 3), (0, 2, 3, 1), index=5), config)  # sizes never baked
        for name in re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)", a):
            assert name.startswith("g5_")
        assert "__half" not in a and "__nv_bfloat16" not in a


def test_bad_perm_is_rejected() -> None:
    group = permute_group((2, 3, 4), (0, 2, 1))
    broken = Group(0, "permute", group.nodes, group.inputs, group.outputs, group.graph, PermuteSpec((0, 1, 1)))
    with pytest.raises(TemplateError, match="permutation"):
        PERMUTE.render(broken, PERMUTE.default(broken, FACTS), permute_context("g0"))


# -- nvcc: every variant for a 3-D transpose, NCHW -> NHWC and a 2-D transpose ----------------------
@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=needs_nvcc)])
def test_every_variant_compiles(tmp_path: Path, dtype: str) -> None:
    cases = [
        ((4, 5, 6), (0, 2, 1), GroupConfig.of("tiled", tile=32, block_rows=8)),
        ((4, 5, 6), (0, 2, 1), GroupConfig.of("naive_gather", threads=256)),
        ((2, 3, 4, 5), (0, 2, 3, 1), GroupConfig.of("tiled", tile=64, block_rows=4)),
        ((2, 3, 4, 5), (0, 2, 3, 1), GroupConfig.of("naive_gather", threads=512)),
        ((7, 9), (1, 0), GroupConfig.of("tiled", tile=32, block_rows=4)),
        ((7, 9), (1, 0), GroupConfig.of("tiled", tile=64, block_rows=8)),
    ]
    codes = []
    for k, (shape, perm, config) in enumerate(cases):
        group = permute_group(shape, perm, index=k, dtype=dtype)
        codes.append(PERMUTE.render(group, config, permute_context(group.prefix)))
    # operands may be host-only expressions (the assembler's workspace offsets): device code must not use them
    host_only = RenderContext(
        prefix="g9",
        inputs=[Operand("((const float*)inputs[n_inputs - 1].data)", "float")],
        outputs=[Operand("((float*)outputs[n_outputs - 1].data)", "float")],
        dims=lambda vid, d: f"{'inputs' if vid == 0 else 'outputs'}[0].shape[{d}]",
    )
    tiled = GroupConfig.of("tiled", tile=32, block_rows=8)
    codes.append(PERMUTE.render(permute_group((2, 3, 4), (0, 2, 1), index=9), tiled, host_only))
    source = translation_unit(codes, 1, 1)
    result = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache")).compile(KernelSource(source))
    assert result.ok, result.error_summary() + "\n" + source
    assert all(r.spill_stores == 0 for r in result.resources)
    assert {r.name for r in result.resources if "transpose" in r.name}  # the tiled kernel is in the build


# ---- numerics on the CPU (g++ and a CUDA emulator) ------------------------------------------------
EMULATOR = r"""
// CPU emulation of the CUDA subset the pool and permute kernels use (test-only).
#pragma once
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
typedef int cudaError_t;
typedef void* cudaStream_t;
enum { cudaSuccess = 0, cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
static int emu_error = 0;
static inline cudaError_t cudaGetLastError(void) { const int e = emu_error; emu_error = 0; return e; }
template <class F> static inline cudaError_t cudaFuncSetAttribute(F, int, int v) { return v <= 227 * 1024 ? 0 : 1; }
struct emu_dim3 { unsigned x, y, z; };
static thread_local emu_dim3 threadIdx, blockIdx;
static emu_dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static
struct emu_barrier {
  std::mutex m;
  std::condition_variable cv;
  int need = 0, count = 0;
  long gen = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    const long g = gen;
    if (++count == need) { count = 0; ++gen; cv.notify_all(); return; }
    cv.wait(lock, [&] { return gen != g; });
  }
};
static emu_barrier* emu_bar = nullptr;
static inline void __syncthreads() { emu_bar->wait(); }
static inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
static inline uint64_t __umul64hi(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }
static inline float __int_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline double __longlong_as_double(unsigned long long x) { double f; memcpy(&f, &x, 8); return f; }
alignas(16) static unsigned char emu_dyn_smem[256 * 1024];
struct emu_launch {
  unsigned grid, block;
  size_t smem;
  emu_launch(unsigned g, unsigned b, size_t s, cudaStream_t) : grid(g), block(b), smem(s) {}
  template <class K, class... A> void operator()(K kernel, A... args) {
    if (grid == 0 || block == 0 || block > 1024 || smem > sizeof(emu_dyn_smem)) { emu_error = 9; return; }
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; ++b) {
      emu_barrier bar;
      bar.need = (int)block;
      emu_bar = &bar;
      memset(emu_dyn_smem, 0xff, smem);  // poison: NaN for floats
#ifdef EMU_SEQUENTIAL  // no barriers in this file: run the threads one after another
      for (unsigned t = 0; t < block; ++t) { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; kernel(args...); }
#else
      std::vector<std::thread> threads;
      for (unsigned t = 0; t < block; ++t)
        threads.emplace_back([=] { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; kernel(args...); });
      for (auto& th : threads) th.join();
#endif
    }
  }
};
"""

GXX = (
    "g++",
    "-std=c++17",
    "-O1",
    "-shared",
    "-fPIC",
    "-pthread",
    "-Wall",
    "-Wno-unknown-pragmas",
    "-Wno-unused-function",
    "-Wno-unused-variable",
    *EMULATOR_SANITIZERS,
)
_DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 3, np.dtype(np.int64): 5}


def _descriptor(array: np.ndarray) -> _Tensor:
    t = _Tensor()
    t.data, t.ndim, t.dtype = array.ctypes.data, array.ndim, _DTYPES[array.dtype]
    stride = 1
    for d in range(array.ndim - 1, -1, -1):
        t.shape[d], t.stride[d] = array.shape[d], stride
        stride *= array.shape[d]
    return t


def to_host_code(source: str) -> str:
    """A rendered translation unit as host C++ for the emulator."""
    dynamic = r"extern __shared__ __align__\(16\) unsigned char (\w+)\[\];"
    source = re.sub(dynamic, r"unsigned char* \1 = emu_dyn_smem;", source)
    # a kernel declared for thread-block clusters of C blocks is launched with C (the emulator runs them together);
    # a launch names the latest kernel declared by that name (units of one library reuse names)
    clusters: dict[str, str] = {}

    def rewrite(m: re.Match[str]) -> str:
        if m.group("kernel"):
            clusters[m.group("kernel")] = m.group("blocks") or ""
            return m.group(0)
        blocks = clusters.get(m.group("name").split("<")[0], "")
        return f"emu_launch({m.group('args')}{', ' + blocks if blocks else ''})({m.group('name')}, "

    declared = (
        r"__global__ void (?:__cluster_dims__\((?P<blocks>\d+), 1, 1\) )?"
        r"(?:__launch_bounds__\([^)]*\) )?(?P<kernel>\w+)\("
    )
    launched = r"(?P<name>\w+(?:<[^<>;]*>)?)<<<(?P<args>.*?)>>>\("
    source = re.sub(f"{declared}|{launched}", rewrite, source)
    return source if "__syncthreads" in source else "#define EMU_SEQUENTIAL 1\n" + source


def emulate(tmp_path: Path, source: str, inputs: list[np.ndarray], outputs: list[tuple[tuple[int, ...], Any]]) -> Any:
    """Build ``source`` for the emulator (cached under ``tmp_path``) and return ``(rc, outputs)``.

    Outputs start poisoned (NaN, or -77 for integers), so an element a kernel misses shows up.
    """
    host = to_host_code(source)
    key = hashlib.sha256(host.encode()).hexdigest()[:16]
    mock = tmp_path / "mock"
    mock.mkdir(exist_ok=True)
    (mock / "cuda_runtime.h").write_text(EMULATOR)
    lib = tmp_path / f"emu_{key}.so"
    if not lib.exists():
        cpp = tmp_path / f"emu_{key}.cpp"
        cpp.write_text(host)
        build = subprocess.run(
            [*GXX, f"-I{mock}", f"-I{include_dir()}", "-o", str(lib), str(cpp)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert build.returncode == 0, build.stderr[-4000:]
        assert "warning" not in build.stderr, build.stderr[-4000:]
    handle = ctypes.CDLL(str(lib))
    ins = [np.ascontiguousarray(a) for a in inputs]
    outs = [np.full(shape, np.nan if np.dtype(dt).kind == "f" else -77, dtype=dt) for shape, dt in outputs]
    tin = (_Tensor * len(ins))(*[_descriptor(a) for a in ins])
    tout = (_Tensor * len(outs))(*[_descriptor(a) for a in outs])
    rc = handle.optiml_forward(tin, len(ins), tout, len(outs), None, ctypes.c_size_t(0), None)
    return rc, outs


def _force_64bit(source: str) -> str:
    """The same code with its 32-bit index fast paths disabled (the 64-bit kernels run)."""
    forced = source.replace("total < 2147483648LL", "total < 0LL")
    assert forced != source
    return forced


PERMS: list[tuple[tuple[int, ...], list[tuple[int, ...]]]] = [
    # perm, run-time shapes: transposes with tails, size-1 dims, tiny sides (gather), copy rows, identity
    ((0, 2, 1), [(3, 40, 37), (1, 17, 70), (5, 1, 33), (2, 3, 4)]),
    ((0, 2, 3, 1), [(2, 20, 5, 9), (1, 3, 7, 11), (2, 33, 1, 17), (2, 9, 3, 5), (1, 1, 1, 1)]),
    ((1, 0), [(70, 45), (1, 50), (16, 16), (70, 5), (70, 3)]),
    ((0, 2, 1, 3), [(2, 20, 18, 5), (3, 1, 4, 40)]),
    ((4, 2, 0, 3, 1), [(2, 17, 3, 4, 18), (3, 2, 2, 19, 20)]),
]
CONFIGS = [
    GroupConfig.of("tiled", tile=32, block_rows=8),
    GroupConfig.of("tiled", tile=64, block_rows=4),
    GroupConfig.of("naive_gather", threads=256),
]


@needs_gxx
@pytest.mark.parametrize("perm,shapes", PERMS, ids=[str(p) for p, _ in PERMS])
def test_permutes_are_exact_on_the_emulator(
    tmp_path: Path, perm: tuple[int, ...], shapes: list[tuple[int, ...]]
) -> None:
    rng = np.random.default_rng(len(perm))
    group = permute_group(tuple(range(2, 2 + len(perm))), perm)
    for config in CONFIGS:
        source = translation_unit([PERMUTE.render(group, config, permute_context("g0"))], 1, 1)
        variants = [source, _force_64bit(source)] if config == CONFIGS[0] else [source]
        for code in variants:
            for shape in shapes:
                x = rng.standard_normal(shape).astype(np.float32)
                want = np.ascontiguousarray(np.transpose(x, perm))
                rc, (got,) = emulate(tmp_path, code, [x], [(want.shape, np.float32)])
                assert rc == 0, (config.label(), shape)
                assert np.array_equal(got, want), (config.label(), shape)


@needs_gxx
def test_int64_permute_is_exact_even_with_a_float_compute_type(tmp_path: Path) -> None:
    group = permute_group((2, 3, 4, 5), (0, 3, 1, 2), dtype="int64")
    ctx = permute_context("g0", ctype="int64_t", compute="float")  # the assembler's compute type for int64
    x = (np.arange(2 * 17 * 3 * 20, dtype=np.int64) + (1 << 40)).reshape(2, 17, 3, 20)
    for config in CONFIGS:
        source = translation_unit([PERMUTE.render(group, config, ctx)], 1, 1)
        rc, (got,) = emulate(tmp_path, source, [x], [((2, 20, 17, 3), np.int64)])
        assert rc == 0 and np.array_equal(got, np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))), config.label()


@needs_gxx
def test_double_permute_is_exact_on_the_emulator(tmp_path: Path) -> None:
    group = permute_group((2, 3, 4), (2, 0, 1))
    ctx = permute_context("g0", ctype="double", compute="double")
    source = translation_unit([PERMUTE.render(group, CONFIGS[0], ctx)], 1, 1)
    x = np.random.default_rng(7).standard_normal((33, 5, 40))
    rc, (got,) = emulate(tmp_path, source, [x], [((40, 33, 5), np.float64)])
    assert rc == 0 and np.array_equal(got, np.ascontiguousarray(np.transpose(x, (2, 0, 1))))


@needs_gxx
def test_emulator_catches_a_wrong_kernel(tmp_path: Path) -> None:
    """The numerics check is not vacuous: a transpose that skips the last row of each tile is reported."""
    group = permute_group((2, 3), (1, 0))
    source = translation_unit([PERMUTE.render(group, CONFIGS[0], permute_context("g0"))], 1, 1)
    broken = source.replace("if (i < P.SB && ja < P.SA)", "if (i + 1 < P.SB && ja < P.SA)")
    assert broken != source
    x = np.arange(40 * 50, dtype=np.float32).reshape(40, 50)
    rc, (got,) = emulate(tmp_path, broken, [x], [((50, 40), np.float32)])
    assert rc == 0 and not np.array_equal(got, x.T)
