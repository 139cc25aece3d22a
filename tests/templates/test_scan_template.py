"""Scan template: the planner's rule, the space, rendering, nvcc builds, and numerics on the CPU.

Numerics run without a GPU: the rendered translation unit is compiled with g++ against a small
CUDA emulator (one fiber per thread, blocks in sequence, real barriers and warp shuffles) and
compared exactly with a sequential scan (inputs are ±1, 2 and 0.5, so every partial sum and
product is exact in float).
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tu import EMULATOR_SANITIZERS, translation_unit, unary_context

from optiml.graph.ir import Graph, Node, TensorType, Value
from optiml.kernel.compiler import Compiler, CompilerConfig, include_dir
from optiml.kernel.source import KernelSource
from optiml.templates.base import DeviceFacts, GroupConfig, KernelCode, Operand, RenderContext, TemplateError
from optiml.templates.group import Group, ScanSpec
from optiml.templates.scan.scan import ScanTemplate

FACTS = DeviceFacts()
SCAN = ScanTemplate()


def scan_graph(shape: tuple[int, ...], n_outputs: int = 1, dtype: str = "float32") -> Graph:
    t = TensorType(tuple(shape), dtype)
    values = (Value(0, t), *(Value(1 + k, t, producer=k) for k in range(n_outputs)))
    nodes = tuple(Node(k, "cumsum", (0,), (1 + k,)) for k in range(n_outputs))
    return Graph(values=values, inputs=(0,), nodes=nodes, outputs=tuple(1 + k for k in range(n_outputs)))


def scan_group(
    shape: tuple[int, ...],
    dim: int,
    kind: str = "sum",
    reverse: bool = False,
    exclusive: bool = False,
    index: int = 0,
    graph: Graph | None = None,
    dtype: str = "float32",
) -> Group:
    graph = graph or scan_graph(shape, n_outputs=index + 1, dtype=dtype)  # node ``index`` scans input 0
    return Group(
        index=index,
        template="scan",
        nodes=(index,),
        inputs=(0,),
        outputs=(1 + index,),
        graph=graph,
        spec=ScanSpec(dim=dim, kind=kind, reverse=reverse, exclusive=exclusive),
    )


def output_context(
    prefix: str, k: int, in_ctype: str = "float", out_ctype: str = "float", facts: DeviceFacts = FACTS
) -> RenderContext:
    """Reads input 0, writes output ``k`` (several groups of one file each write their own output)."""
    return RenderContext(
        prefix=prefix,
        inputs=[Operand(f"((const {in_ctype}*)inputs[0].data)", in_ctype)],
        outputs=[Operand(f"(({out_ctype}*)outputs[{k}].data)", out_ctype)],
        dims=lambda vid, d: f"inputs[0].shape[{d}]",
        compute_type=out_ctype if out_ctype in ("double", "int64_t") else "float",
        facts=facts,
    )


# One case: (config, dim, kind, reverse, exclusive, output ctype); all read a 3-d float input.
Case = tuple[GroupConfig, int, str, bool, bool, str]


def render_cases(
    cases: list[Case], traced: tuple[int, ...] = (2, 3, 37), facts: DeviceFacts = FACTS
) -> tuple[str, list[KernelCode]]:
    graph = scan_graph(traced, n_outputs=len(cases))
    codes = []
    for k, (config, dim, kind, reverse, exclusive, ctype) in enumerate(cases):
        group = scan_group(traced, dim, kind, reverse, exclusive, index=k, graph=graph)
        # Along the last dim every config is in the space; along the others the row variants are
        # rendered anyway, to test their run-time fallbacks.
        assert SCAN.space(group, FACTS).reason_invalid(config) is None or dim != 2, config
        in_ctype = "int32_t" if ctype == "int64_t" else "float"  # integer scans accumulate in int64
        codes.append(SCAN.render(group, config, output_context(group.prefix, k, in_ctype, ctype, facts)))
    return translation_unit(codes, 1, len(cases)), codes


# ---- the planner's rule, the space, seeds ------------------------------------------------------


def test_default_follows_the_rule() -> None:
    assert SCAN.default(scan_group((8, 64, 32), 1), FACTS).variant == "col"  # columns shorter than a tile
    assert SCAN.default(scan_group((16, 4096, 1024), 1), FACTS) == GroupConfig.of("col_tile", lanes=16, items=8)
    assert SCAN.default(scan_group((256, 4096, 1024), 1), FACTS).variant == "col"  # a thread a column suffices
    assert SCAN.default(scan_group((3, 100003), 1), FACTS).variant == "row_split"
    assert SCAN.default(scan_group((65536, 37), -1), FACTS).variant == "row_warp"
    assert SCAN.default(scan_group((8192, 8192), 1), FACTS).variant == "row_block"
    assert SCAN.default(scan_group((4, 128, 1), 1), FACTS).variant == "row_block"  # inner == 1 at the traced shape
    assert SCAN.default(scan_group((100, 100000), 1), FACTS).variant == "row_split"  # fewer rows than SMs
    assert SCAN.default(scan_group((200, 100000), 1), FACTS).variant == "row_block"
    assert SCAN.default(scan_group((100, 1000), 1), FACTS).variant == "row_block"  # short rows


def test_few_columns_lead_their_seeds_with_deep_unrolling() -> None:
    few = SCAN.seeds(scan_group((16, 4096, 1024), 1), FACTS)  # cumsum_dim1: 16 384 columns, a thread each
    assert few[1] == GroupConfig.of("col", threads=128, unroll=32)
    many = SCAN.seeds(scan_group((256, 64, 4096), 1), FACTS)
    assert GroupConfig.of("col", threads=128, unroll=32) not in many[:2]
    assert SCAN.seeds(scan_group((64, 20, 64), 1), FACTS)[1] == GroupConfig.of("col", threads=128, unroll=16)


def test_default_knobs_cover_the_row() -> None:
    warp = SCAN.default(scan_group((65536, 37), 1), FACTS)
    assert warp == GroupConfig.of("row_warp", threads=256, items=2)  # 32 lanes * 2 >= 37
    block = SCAN.default(scan_group((8192, 8192), 1), FACTS)
    assert block.get("threads") * block.get("items") >= 4096
    split = SCAN.default(scan_group((3, 100003), 1), FACTS)
    tile = split.get("threads") * split.get("items")
    assert 3 * -(-100003 // tile) >= 2 * FACTS.sm_count  # enough tiles for every SM


def test_space_rejects_bad_configs() -> None:
    group = scan_group((4, 5000), 1)
    space = SCAN.space(group, FACTS)
    assert set(space.variants) == {"row_block", "row_warp", "row_split", "col"}
    assert space.reason_invalid(GroupConfig.of("row_block", threads=256, items=4)) is None
    assert space.reason_invalid(GroupConfig.of("row_block", threads=64, items=4)) is not None
    assert space.reason_invalid(GroupConfig.of("row_block", threads=256, items=3)) is not None
    assert space.reason_invalid(GroupConfig.of("row_block", threads=256)) is not None  # missing knob
    assert space.reason_invalid(GroupConfig.of("row_warp", threads=256, items=16)) is not None
    assert space.reason_invalid(GroupConfig.of("col", threads=256, unroll=4, items=2)) is not None
    assert space.reason_invalid(GroupConfig.of("tree", threads=256)) is not None
    # Shared memory: a 16384-element chunk does not fit a 48 KiB device.
    small = SCAN.space(group, DeviceFacts(smem_per_block_optin=48 * 1024))
    assert small.reason_invalid(GroupConfig.of("row_block", threads=1024, items=16)) is not None
    assert small.reason_invalid(GroupConfig.of("row_block", threads=1024, items=8)) is None
    # Registers: 1024 threads x 16 doubles spill.
    doubles = SCAN.space(scan_group((4, 5000), 1, dtype="float64"), FACTS)
    assert doubles.reason_invalid(GroupConfig.of("row_block", threads=1024, items=16)) is not None
    assert doubles.reason_invalid(GroupConfig.of("row_split", threads=512, items=16)) is None
    # A scan over a non-contiguous dim offers only the column kernels.
    columns = SCAN.space(scan_group((8, 64, 32), 1), FACTS)
    assert columns.variants == ("col", "col_tile")
    assert columns.reason_invalid(GroupConfig.of("col_tile", lanes=32, items=16)) is None
    assert columns.reason_invalid(GroupConfig.of("col_tile", lanes=64, items=4)) is not None
    assert "col_tile" not in space.variants  # a contiguous scan has no columns to tile


@pytest.mark.parametrize(
    "shape,dim",
    [((8, 64, 32), 1), ((3, 100003), 1), ((65536, 37), 1), ((8192, 8192), -1), ((7,), 0), ((2, 3, 4, 5), 0)],
)
def test_seeds_are_legal_and_distinct(shape: tuple[int, ...], dim: int) -> None:
    group = scan_group(shape, dim)
    seeds = SCAN.seeds(group, FACTS)
    assert seeds[0] == SCAN.default(group, FACTS)
    assert 3 <= len(seeds) <= 5
    assert len(set(seeds)) == len(seeds)
    space = SCAN.space(group, FACTS)
    assert all(space.reason_invalid(c) is None for c in seeds), seeds


def test_render_is_deterministic_and_prefixed() -> None:
    group = scan_group((2, 3, 37), 1, kind="prod", reverse=True, exclusive=True, index=7)
    for config in [
        GroupConfig.of("row_block", threads=256, items=4),
        GroupConfig.of("row_warp", threads=128, items=2),
        GroupConfig.of("row_split", threads=512, items=8),
        GroupConfig.of("col", threads=128, unroll=8),
    ]:
        a = SCAN.render(group, config, unary_context("g7"))
        b = SCAN.render(group, config, unary_context("g7"))
        assert a == b
        defined = re.findall(r"(?:__global__ void __launch_bounds__\(\d+\)|struct|unsigned|float)\s+(\w+)\(", a.device)
        assert defined and all(name.startswith("g7_") for name in defined), defined
        assert "__half" not in a.device + a.host and "__nv_bfloat16" not in a.device + a.host
        assert "stream>>>" in a.host and "<<<" in a.host
        assert "37" not in a.device and "37" not in a.host  # sizes come from the ABI at run time
        # The scanned dim is not the last: the row variants fall back to the column kernel.
        assert "g7_col" in a.device
    last = SCAN.render(scan_group((4, 50), 1), GroupConfig.of("row_block", threads=256, items=4), unary_context("g0"))
    assert "g0_col" not in last.device and "g0_row_block" in last.device
    # Few long lines at run time go to the split kernels, whatever the variant: scratch for them.
    assert "g0_split_scan" in last.device and f"< {FACTS.sm_count}" in last.workspace_bytes
    split = SCAN.render(scan_group((4, 50), 1), GroupConfig.of("row_split", threads=256, items=4), unary_context("g0"))
    assert "optiml_cdiv" in split.workspace_bytes and "inputs[0].shape[1]" in split.workspace_bytes
    assert "?" not in split.workspace_bytes and "g0_row_block" not in split.device


def test_render_rejects_unknown_variant_and_knobs() -> None:
    group = scan_group((4, 50), 1)
    with pytest.raises(TemplateError):
        SCAN.render(group, GroupConfig.of("tree", threads=256), unary_context("g0"))
    with pytest.raises(TemplateError):
        SCAN.render(group, GroupConfig.of("row_block", threads=96, items=4), unary_context("g0"))
    bad = Group(index=0, template="scan", nodes=(0,), inputs=(0,), outputs=(1,), graph=scan_graph((4, 50)))
    bad = Group(bad.index, bad.template, bad.nodes, bad.inputs, bad.outputs, bad.graph, ScanSpec(dim=1, kind="max"))
    with pytest.raises(TemplateError):
        SCAN.render(bad, GroupConfig.of("col", threads=256, unroll=4), unary_context("g0"))


# ---- nvcc builds ---------------------------------------------------------------------------------

BUILDS: dict[str, list[Case]] = {
    "row_block": [
        (GroupConfig.of("row_block", threads=128, items=1), 2, "sum", False, False, "float"),
        (GroupConfig.of("row_block", threads=256, items=4), 2, "prod", True, True, "float"),
        (GroupConfig.of("row_block", threads=1024, items=16), 2, "sum", True, False, "float"),
    ],
    "row_warp": [
        (GroupConfig.of("row_warp", threads=128, items=1), 2, "sum", True, True, "float"),
        (GroupConfig.of("row_warp", threads=256, items=8), 2, "prod", False, False, "float"),
    ],
    "row_split": [
        (GroupConfig.of("row_split", threads=256, items=4), 2, "sum", False, True, "float"),
        (GroupConfig.of("row_split", threads=1024, items=16), 2, "prod", True, False, "float"),
    ],
    "col_and_fallbacks": [
        (GroupConfig.of("col", threads=128, unroll=1), 0, "sum", False, False, "float"),
        (GroupConfig.of("col", threads=512, unroll=8), 1, "prod", True, True, "float"),
        (GroupConfig.of("row_block", threads=512, items=8), 1, "sum", False, False, "float"),
        (GroupConfig.of("row_split", threads=512, items=8), 1, "sum", True, True, "float"),
        (GroupConfig.of("col_tile", lanes=16, items=8), 1, "sum", False, False, "float"),
        (GroupConfig.of("col_tile", lanes=32, items=16), 1, "prod", True, True, "float"),
        (GroupConfig.of("col_tile", lanes=4, items=16), 1, "sum", True, False, "double"),
    ],
    "double_and_int64": [
        (GroupConfig.of("row_block", threads=512, items=16), 2, "sum", False, True, "double"),
        (GroupConfig.of("row_warp", threads=256, items=8), 2, "sum", True, False, "double"),
        (GroupConfig.of("row_split", threads=1024, items=8), 2, "prod", False, False, "double"),
        (GroupConfig.of("col", threads=256, unroll=4), 0, "sum", True, True, "double"),
        (GroupConfig.of("row_block", threads=256, items=8), 2, "sum", False, False, "int64_t"),
    ],
}


@pytest.fixture(scope="module")
def compiler(tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    return Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path_factory.mktemp("scan-kernels")))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_variants_compile_without_spills(compiler: Compiler, name: str) -> None:
    code, _ = render_cases(BUILDS[name])
    result = compiler.compile(KernelSource(code))
    assert result.ok, result.error_summary()
    assert not [d for d in result.diagnostics if d.severity == "warning"], result.log[-3000:]
    kernels = [r for r in result.resources if "_" in r.name]
    assert kernels
    for res in kernels:
        assert not res.spills and res.stack_bytes == 0, res


@pytest.mark.nvcc
def test_seeds_of_sample_shapes_compile(compiler: Compiler) -> None:
    codes = []
    samples = [((8, 64, 32), 1), ((65536, 37), 1), ((16, 512, 1024), 1)]  # column, row and tiled column seeds
    for s, (shape, dim) in enumerate(samples):
        group = scan_group(shape, dim, reverse=s % 2 == 1, exclusive=s >= 2)
        for k, config in enumerate(SCAN.seeds(group, FACTS)):
            prefix = f"s{s}_{k}"
            codes.append(SCAN.render(group, config, unary_context(prefix)))
    result = compiler.compile(KernelSource(translation_unit(codes, 1, 1)))
    assert result.ok, result.error_summary()


@pytest.mark.nvcc
def test_fused_loads_get_the_abi_descriptors(compiler: Compiler) -> None:
    """With ctx.loaders / storers the kernels rebind `inputs` / `outputs`, so those expressions compile."""
    group = scan_group((4, 50), 1)
    ctx = unary_context("g0")
    ctx.loaders = [lambda idx: f"(2.0f * ((const float*)inputs[0].data)[{idx}])"]
    ctx.storers = [lambda idx, v: f"((float*)outputs[0].data)[{idx}] = ({v}) + 1.0f;"]
    code = SCAN.render(group, GroupConfig.of("row_split", threads=256, items=4), ctx)
    assert "g0_io" in code.device
    result = compiler.compile(KernelSource(translation_unit([code], 1, 1)))
    assert result.ok, result.error_summary()


# ---- numerics on the CPU (g++ and a CUDA emulator) ---------------------------------------------

EMULATOR = r"""
// CPU emulation of the CUDA subset the scan kernels use: one fiber per thread, blocks in sequence (the blocks of
// a thread-block cluster together: each runs until all its threads wait at the cluster barrier, then the next).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unistd.h>
#include <vector>
typedef int cudaError_t;
typedef void* cudaStream_t;
enum { cudaSuccess = 0, cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
static inline cudaError_t cudaGetLastError(void) { return 0; }
template <class F> static inline cudaError_t cudaFuncSetAttribute(F, int, int v) { return v <= 227 * 1024 ? 0 : 1; }
struct emu_dim3 { unsigned x, y, z; };
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n)
#define __restrict__
#define __shared__ static
// x86-64 context switch: saves the callee-saved registers and the stack pointer.
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
)");
extern "C" void emu_switch(void** save, void* next);
struct emu_barrier { int need = 0, count = 0; long gen = 0; };
struct emu_fiber { void* sp = nullptr; std::vector<char> stack; bool done = false, at_cluster = false; };
static std::vector<emu_fiber> emu_fibers;
static std::vector<emu_barrier> emu_warp_bars;
static std::vector<double> emu_slots;
static emu_barrier emu_block_bar;
static void* emu_sched = nullptr;
static int emu_cur = -1;
static bool emu_progress = false;
static std::function<void()> emu_body;
// each block of a cluster has its own shared memory; emu_dyn_smem is the running block's
alignas(16) static unsigned char emu_smem_banks[8][256 * 1024];
static unsigned char* emu_dyn_smem = emu_smem_banks[0];
static unsigned emu_rank = 0;  // the running block's rank in its cluster
static size_t emu_dyn_bytes = 0;
static inline void emu_yield() { emu_switch(&emu_fibers[emu_cur].sp, emu_sched); }
// The emulated call runs in a forked child of a process that may hold other threads' locks (a Ray
// driver's, say): end it without exit()'s handlers, which could wait on such a lock for ever.
[[noreturn]] static void emu_die(int code) {
  fflush(stderr);
  _exit(code);
}
static inline void emu_wait(emu_barrier& b) {
  const long g = b.gen;
  emu_progress = true;
  if (++b.count == b.need) { b.count = 0; ++b.gen; return; }
  while (b.gen == g) emu_yield();
}
static inline void __syncthreads() { emu_wait(emu_block_bar); }
// barrier.cluster: every thread of the cluster's blocks arrives before any goes on (the scheduler releases them)
static inline void emu_cluster_wait() {
  emu_fibers[emu_cur].at_cluster = true;
  emu_progress = true;
  while (emu_fibers[emu_cur].at_cluster) emu_yield();
}
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait(emu_warp_bars[threadIdx.x / 32]); }
template <class T> static inline T emu_exchange(T x, int src) {
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  emu_slots[w * 32 + lane] = (double)x;
  __syncwarp();
  const T r = (T)emu_slots[w * 32 + src];
  __syncwarp();
  return r;
}
template <class T> static inline T __shfl_up_sync(unsigned, T x, int o) {
  const int lane = threadIdx.x % 32;
  return emu_exchange(x, lane >= o ? lane - o : lane);
}
template <class T> static inline T __shfl_down_sync(unsigned, T x, int o) {
  const int lane = threadIdx.x % 32;
  return emu_exchange(x, lane + o < 32 ? lane + o : lane);
}
template <class T> static inline T __shfl_xor_sync(unsigned, T x, int o) {
  return emu_exchange(x, (threadIdx.x % 32) ^ o);
}
template <class T> static inline T __shfl_sync(unsigned, T x, int src) { return emu_exchange(x, src & 31); }
static void emu_entry() {
  emu_body();
  emu_fibers[emu_cur].done = true;
  emu_progress = true;
  emu_switch(&emu_fibers[emu_cur].sp, emu_sched);
  abort();  // a finished fiber is never resumed
}
static void emu_run_cluster(unsigned b0, unsigned nc, unsigned nt) {
  const unsigned total = nc * nt;
  if (emu_fibers.size() < total) emu_fibers.resize(total);
  emu_warp_bars.assign((nt + 31) / 32, emu_barrier());
  for (unsigned w = 0; w < emu_warp_bars.size(); ++w) emu_warp_bars[w].need = 32;  // blocks are whole warps
  emu_slots.assign(emu_warp_bars.size() * 32, 0.0);
  emu_block_bar = emu_barrier();
  emu_block_bar.need = (int)nt;
  for (unsigned r = 0; r < nc; ++r) memset(emu_smem_banks[r], 0xff, emu_dyn_bytes);  // poison: NaN for floats
  for (unsigned t = 0; t < total; ++t) {
    emu_fiber& f = emu_fibers[t];
    f.done = f.at_cluster = false;
    if (f.stack.empty()) f.stack.resize(64 * 1024);
    void** sp = (void**)(((uintptr_t)(f.stack.data() + f.stack.size())) & ~(uintptr_t)15);
    *--sp = nullptr;               // fake return address of emu_entry
    *--sp = (void*)&emu_entry;     // where emu_switch returns to
    for (int r = 0; r < 6; ++r) *--sp = nullptr;
    f.sp = (void*)sp;
  }
  for (;;) {
    for (unsigned r = 0; r < nc; ++r) {  // block r runs until each of its threads is done or at the cluster barrier
      emu_rank = r;
      emu_dyn_smem = emu_smem_banks[r];
      blockIdx.x = b0 + r;
      for (;;) {
        bool blocked = true;
        emu_progress = false;
        for (unsigned t = 0; t < nt; ++t) {
          emu_fiber& f = emu_fibers[r * nt + t];
          if (f.done || f.at_cluster) continue;
          blocked = false;
          emu_cur = (int)(r * nt + t);
          threadIdx.x = t;
          emu_switch(&emu_sched, f.sp);
        }
        if (blocked) break;
        if (!emu_progress) { fprintf(stderr, "EMU deadlock in block %u\n", b0 + r); emu_die(3); }
      }
    }
    unsigned done = 0, waiting = 0;
    for (unsigned t = 0; t < total; ++t) {
      done += emu_fibers[t].done;
      waiting += emu_fibers[t].at_cluster;
    }
    if (done == total) break;
    if (waiting != total) {
      fprintf(stderr, "EMU: a thread left the cluster while others wait at its barrier\n");
      emu_die(3);
    }
    for (unsigned t = 0; t < total; ++t) emu_fibers[t].at_cluster = false;
  }
  emu_rank = 0;
  emu_dyn_smem = emu_smem_banks[0];
}
struct emu_launcher {
  unsigned grid, block;
  size_t smem;
  unsigned grid_y = 1;  // a 2-D grid: blocks (x, y), x fastest
  unsigned cluster = 1;  // blocks of a thread-block cluster (consecutive along x)
  template <class K, class... A> void operator()(K kernel, A... args) {
    if (smem > sizeof(emu_smem_banks[0])) { fprintf(stderr, "EMU: %zu B of shared memory\n", smem); emu_die(4); }
    if (block == 0 || block > 1024 || block % 32 || grid == 0 || grid_y == 0 || cluster == 0 || cluster > 8 ||
        grid % cluster) {
      fprintf(stderr, "EMU: bad launch\n");
      emu_die(5);
    }
    emu_dyn_bytes = smem;
    gridDim.x = grid; gridDim.y = grid_y; blockDim.x = block; gridDim.z = blockDim.y = blockDim.z = 1;
    emu_body = [=]() { kernel(args...); };
    for (unsigned y = 0; y < grid_y; ++y) {
      blockIdx.y = y;
      for (unsigned b = 0; b < grid; b += cluster) emu_run_cluster(b, cluster, block);
    }
    blockIdx.y = 0;
  }
};
#define EMU_LAUNCH(kernel, grid, block, smem, stream) \
  [&](auto... a) { (void)(stream); emu_launcher{(unsigned)(grid), (unsigned)(block), (size_t)(smem)}(kernel, a...); }
"""

CHECKER = r"""
#include <cmath>
#include <vector>
struct Spec { int dim, prod, rev, excl, dbl; };
static const Spec SPECS[] = {
@SPECS@
};
static const int64_t SHAPES[][3] = {
@SHAPES@
};
static uint64_t rng = 88172645463325252ull;
static double draw(void) {  // +-1, sometimes 2 or 0.5: every partial sum and product is exact
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  const unsigned r = (unsigned)(rng % 1000);
  return r < 5 ? 2.0 : r < 10 ? 0.5 : r < 500 ? 1.0 : -1.0;
}
int main(void) {
  const int N = (int)(sizeof(SPECS) / sizeof(SPECS[0]));
  int bad = 0;
  for (const auto& sh : SHAPES) {
    const int64_t n = sh[0] * sh[1] * sh[2];
    std::vector<float> x(n);
    for (auto& v : x) v = (float)draw();
    optiml_tensor in{};
    in.data = x.data(); in.ndim = 3; in.dtype = OPTIML_FLOAT32;
    for (int d = 0; d < 3; ++d) in.shape[d] = sh[d];
    in.stride[2] = 1; in.stride[1] = sh[2]; in.stride[0] = sh[1] * sh[2];
    std::vector<std::vector<double>> od(N);
    std::vector<std::vector<float>> of(N);
    std::vector<optiml_tensor> outs(N);
    for (int k = 0; k < N; ++k) {
      outs[k] = in;
      if (SPECS[k].dbl) { od[k].assign(n, NAN); outs[k].data = od[k].data(); outs[k].dtype = OPTIML_FLOAT64; }
      else { of[k].assign(n, NAN); outs[k].data = of[k].data(); }
    }
    const size_t wsb = @WORKSPACE@;
    std::vector<unsigned char> ws(wsb + 1, 0xff);
    const int rc = optiml_forward(&in, 1, outs.data(), N, wsb ? ws.data() : nullptr, wsb, nullptr);
    if (rc != 0) { printf("optiml_forward returned %d\n", rc); return 2; }
    for (int k = 0; k < N; ++k) {
      const Spec& s = SPECS[k];
      int64_t L = sh[s.dim], outer = 1, inner = 1, errs = 0;
      for (int d = 0; d < s.dim; ++d) outer *= sh[d];
      for (int d = s.dim + 1; d < 3; ++d) inner *= sh[d];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double acc = s.prod ? 1.0 : 0.0;
          for (int64_t q = 0; q < L; ++q) {
            const int64_t idx = (o * L + (s.rev ? L - 1 - q : q)) * inner + i;
            const double before = acc;
            acc = s.prod ? acc * x[idx] : acc + x[idx];
            const double want = s.excl ? before : acc;
            const double got = s.dbl ? od[k][idx] : (double)of[k][idx];
            if (!(got == want) && errs++ < 3)
              printf("case %d shape %lldx%lldx%lld at %lld: got %g want %g\n", k, (long long)sh[0],
                     (long long)sh[1], (long long)sh[2], (long long)idx, got, want);
          }
        }
      if (errs) {
        ++bad;
        printf("case %d shape %lldx%lldx%lld: %lld wrong\n", k, (long long)sh[0], (long long)sh[1],
               (long long)sh[2], (long long)errs);
      }
    }
  }
  if (bad) return 1;
  printf("OK\n");
  return 0;
}
"""


GXX = ("g++", "-std=c++17", "-O1", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-function", *EMULATOR_SANITIZERS)


# The emulated device has 4 SMs: fewer than 4 lines of at least 16384 elements take the split kernels.
EMULATED = DeviceFacts(sm_count=4)


def emulate(tmp_path: Path, cases: list[Case], shapes: list[tuple[int, int, int]]) -> str:
    code, _ = render_cases(cases, facts=EMULATED)
    dynamic = r"extern __shared__ __align__\(16\) unsigned char (\w+)\[\];"
    code = re.sub(dynamic, r"unsigned char* \1 = emu_dyn_smem;", code)
    code = re.sub(r"(\w+)<<<", r"EMU_LAUNCH(\1, ", code).replace(">>>(", ")(")
    specs = ",\n".join(
        f"  {{{dim}, {int(kind == 'prod')}, {int(rev)}, {int(excl)}, {int(ctype == 'double')}}}"
        for _, dim, kind, rev, excl, ctype in cases
    )
    workspace = "optiml_workspace_bytes(&in, 1)" if "optiml_workspace_bytes" in code else "0"
    checker = (
        CHECKER.replace("@SPECS@", specs)
        .replace("@SHAPES@", ",\n".join(f"  {{{a}, {b}, {c}}}" for a, b, c in shapes))
        .replace("@WORKSPACE@", workspace)
    )
    mock = tmp_path / "mock"
    mock.mkdir()
    (mock / "cuda_runtime.h").write_text(EMULATOR)
    (tmp_path / "emu.cpp").write_text(code + checker)
    build = subprocess.run(
        [*GXX, f"-I{mock}", f"-I{include_dir()}", "-o", str(tmp_path / "emu"), str(tmp_path / "emu.cpp")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    assert "warning" not in build.stderr, build.stderr[-4000:]
    run = subprocess.run([str(tmp_path / "emu")], capture_output=True, text=True, timeout=300)
    return run.stdout + run.stderr


needs_gxx = pytest.mark.skipif(
    shutil.which("g++") is None or platform.machine() != "x86_64" or platform.system() != "Linux",
    reason="the CUDA emulator needs g++ on x86-64 Linux",
)

# Scans along the last dim: rows of many lengths (tails, several chunks, several tiles, L = 1).
LAST_DIM: list[Case] = [
    (GroupConfig.of("row_block", threads=512, items=8), 2, "sum", True, True, "float"),
    (GroupConfig.of("row_block", threads=128, items=1), 2, "sum", False, False, "float"),
    (GroupConfig.of("row_block", threads=1024, items=16), 2, "prod", True, False, "float"),
    (GroupConfig.of("row_warp", threads=128, items=4), 2, "sum", False, True, "float"),
    (GroupConfig.of("row_warp", threads=256, items=1), 2, "prod", True, True, "float"),
    (GroupConfig.of("row_split", threads=256, items=4), 2, "sum", True, False, "float"),
    (GroupConfig.of("row_split", threads=1024, items=16), 2, "sum", False, True, "double"),
    (GroupConfig.of("col", threads=128, unroll=4), 0, "sum", True, False, "float"),
    (GroupConfig.of("col", threads=256, unroll=1), 1, "prod", False, True, "float"),
]
# Scans along the middle dim: row variants run when inner is 1 at run time, else fall back to col.
MIDDLE_DIM: list[Case] = [
    (GroupConfig.of("row_block", threads=256, items=2), 1, "sum", True, True, "double"),
    (GroupConfig.of("row_split", threads=256, items=8), 1, "sum", False, False, "float"),
    (GroupConfig.of("row_warp", threads=256, items=8), 1, "prod", True, False, "float"),
    (GroupConfig.of("col", threads=128, unroll=8), 1, "sum", True, True, "float"),
    (GroupConfig.of("col", threads=128, unroll=32), 1, "sum", False, True, "float"),
    (GroupConfig.of("col_tile", lanes=16, items=8), 1, "sum", False, False, "float"),
    (GroupConfig.of("col_tile", lanes=4, items=1), 1, "sum", True, True, "float"),
    (GroupConfig.of("col_tile", lanes=8, items=4), 1, "prod", True, False, "float"),
    (GroupConfig.of("col_tile", lanes=32, items=2), 1, "sum", False, True, "double"),
]


@needs_gxx
def test_last_dim_scans_are_exact_on_the_emulator(tmp_path: Path) -> None:
    # Row kernels: (1, 5, 20000) (5 lines >= 4 SMs, several chunks); split kernels: (1, 2, 70001).
    shapes = [(2, 3, 37), (1, 5, 20000), (2, 40, 1), (1, 2, 70001), (5, 7, 3), (1, 1, 16384)]
    out = emulate(tmp_path, LAST_DIM, shapes)
    assert out.strip().endswith("OK"), out[-3000:]


@needs_gxx
def test_middle_dim_scans_are_exact_on_the_emulator(tmp_path: Path) -> None:
    # Strided split kernels: (1, 20000, 3) (3 lines < 4 SMs); contiguous ones: (2, 16500, 1).
    shapes = [(2, 3, 37), (1, 5000, 1), (3, 777, 1), (5, 7, 3), (4, 1, 1), (1, 20000, 3), (2, 16500, 1), (5, 20000, 1)]
    out = emulate(tmp_path, MIDDLE_DIM, shapes)
    assert out.strip().endswith("OK"), out[-3000:]


@needs_gxx
def test_split_scan_of_many_tiles_is_exact_on_the_emulator(tmp_path: Path) -> None:
    """More tile totals than kernel 2 scans in one chunk (1075 tiles of 1024 > 256 threads * 4)."""
    cases: list[Case] = [(GroupConfig.of("row_split", threads=256, items=4), 2, "sum", True, True, "float")]
    out = emulate(tmp_path, cases, [(1, 1, 1100000), (2, 1, 3)])
    assert out.strip().endswith("OK"), out[-3000:]


@needs_gxx
def test_emulator_catches_a_wrong_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The numerics check is not vacuous: an off-by-one in the warp scan is reported."""
    import optiml.templates.scan.scan as scan_module

    monkeypatch.setattr(scan_module, "_PREAMBLE", scan_module._PREAMBLE.replace("lane >= o", "lane > o"))
    out = emulate(tmp_path, LAST_DIM[:1], [(1, 2, 100)])
    assert "wrong" in out and "OK" not in out
