"""The Hopper GEMM with TMA loads and a producer warp group (fp16 / bf16, fp32 accumulation).

The ``wgmma_tma`` variant, for sm_90a. The ``wgmma`` kernel (:mod:`optiml.templates.gemm.wgmma`) has
every thread copy its share of each slice with ``cp.async`` and the whole block meet at a barrier
per slice, so copies and MMAs take turns in the same warps. Here the work is split:

* **one producer warp group**, of which one thread issues the copies: each 64-deep k slice of A
  (``[bm][64]``) and B (``[bn][64]`` when k is its contiguous dim, else ``bn / 64`` panels of
  ``[64 k][64 n]``) arrives by Tensor Memory Accelerator copies (``cp.async.bulk.tensor``) that
  write the 128-byte-swizzled layout the wgmma descriptors name and zero-fill past the matrix
  edge. The producer gives its registers back (``setmaxnreg.dec``);
* **bm / 64 consumer warp groups**, 64 rows of the tile each, which issue
  ``wgmma.mma_async.m64n{bn}k16`` on each slice as soon as it has landed, keep one slice's MMAs in
  flight, and then hand the slice before it back to the producer.

The hand-over is two ``mbarrier`` rings over the ``stages`` shared-memory stages: *full* (count 1: the
producer's ``arrive.expect_tx`` of the stage's bytes, completed by the copies' byte count) and
*empty* (one arrival per consumer warp group). Use ``r`` of a stage waits on parity ``r & 1`` of
*full* and the producer's on parity ``(r & 1) ^ 1`` of *empty* (the first round passes at once).
No block-wide barrier runs inside the k loop.

The tensor maps are encoded on the host each call (``optiml_tma.h``; a few microseconds) and passed
as ``__grid_constant__`` parameters. Only a single product (``batch == 1``) with 16-byte-aligned
operands whose rows are multiples of 16 bytes takes this kernel; batched products run the ``wgmma``
kernel of the same tile, and unaligned operands the scalar ``mma`` build.
"""

from __future__ import annotations

from optiml.templates.base import GroupConfig
from optiml.templates.gemm import wgmma as gemm_wgmma
from optiml.templates.gemm.mma import LaunchTerms, tensor_core_launch
from optiml.templates.gemm.wgmma import ALIGN, BK, MAX_SMEM, PANEL, stage_bytes, stored_accumulators
from optiml.templates.ptx import wgmma_function

PRODUCER_REGISTERS = 40  # setmaxnreg.dec: the producer only counts slices and issues copies
CONSUMER_REGISTERS = 232  # setmaxnreg.inc: 128 accumulators a thread at bn = 256
MAX_STAGES = 8


def threads(bm: int) -> int:
    """One producer warp group and one consumer warp group per 64 rows."""
    return (bm // 64 + 1) * 128


def barrier_bytes(stages: int) -> int:
    return 2 * 8 * stages  # a full and an empty mbarrier per stage


def smem_bytes(bm: int, bn: int, stages: int) -> int:
    return stages * stage_bytes(bm, bn) + barrier_bytes(stages) + ALIGN  # + the alignment slack


def check(config: GroupConfig) -> str | None:
    """Why ``config`` is illegal for the TMA kernel, or None."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    if bm not in (64, 128) or bn % PANEL or not 64 <= bn <= 256:
        return f"{config.label()}: bm 64 or 128, bn a multiple of {PANEL} up to 256"
    if not 2 <= stages <= MAX_STAGES:
        return f"{config.label()}: 2 to {MAX_STAGES} stages"
    if smem_bytes(bm, bn, stages) > MAX_SMEM:
        return f"{config.label()}: {smem_bytes(bm, bn, stages)} B of shared memory (at most {MAX_SMEM})"
    return None


def tma_type(p: str, dtype: str) -> str:
    """``{p}_tma_type``: the operands' TMA element type, for the host's tensor maps."""
    tma_type = {"bfloat16": "OPTIML_TMA_BFLOAT16", "float32": "OPTIML_TMA_FLOAT32"}.get(dtype, "OPTIML_TMA_FLOAT16")
    return f"static const int {p}_tma_type = {tma_type};\n"


def producer_head(p: str, stages: int, consumers: int, stage: int, a_bytes: int, k0: str) -> str:
    """Kernel statements: thread 0 sets up the *full* / *empty* mbarrier rings, then the producer warp group
    (group 0; it gives registers back when there are several consumer warp groups) starts its loop over
    the ``KT`` slices: a free stage ``s`` at ``sa`` (A's box, ``sb`` past its ``a_bytes``), its barrier
    ``bar`` armed for ``stage`` bytes, slice start ``k0`` (an expression of ``kt``); the caller issues the
    copies and closes the loop, the producer's branch and its ``return`` (shared with the 3xTF32 TMA kernel)."""
    rebalance = consumers > 1  # 384 threads leave 170 registers a thread: the producer gives most of its share
    return f"""\
  if (threadIdx.x == 0) {{
#pragma unroll
    for (int s = 0; s < {stages}; ++s) {{
      optiml_mbar_init(full + 8u * s, 1u);
      optiml_mbar_init(empty + 8u * s, {consumers}u);
    }}
    optiml_mbar_init_fence();
  }}
  __syncthreads();
  if (group == 0) {{  // the producer
{f"    optiml_regs_dec<{PRODUCER_REGISTERS}>();" if rebalance else ""}
    if (threadIdx.x == 0) {{
      for (int64_t kt = 0; kt < KT; ++kt) {{
        const int s = (int)(kt % {stages});
        optiml_mbar_wait(empty + 8u * s, ((unsigned)(kt / {stages}) & 1u) ^ 1u);
        const unsigned sa = s0 + (unsigned)s * {stage}u, sb = sa + {a_bytes}u, bar = full + 8u * s;
        const int64_t k0 = {k0};
        optiml_mbar_expect(bar, {stage}u);
"""


def kernel(p: str, config: GroupConfig, b_k_major: bool, dtype: str) -> str:
    """``{p}_wgmma_tma`` for ``dtype`` operands (launch with :func:`threads` threads and :func:`smem_bytes`
    of dynamic shared memory)."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    consumers = bm // 64
    a_bytes, stage = bm * BK * 2, stage_bytes(bm, bn)
    # 384 threads leave 170 registers a thread: the producer gives most of its share to the consumers
    rebalance = consumers > 1
    if b_k_major:
        b_copy = "optiml_tma_load(sb, &TB, (int)k0, (int)n0, bar);"
        b_desc = "optiml_desc(bb + ks * 32u, 16u, 1024u)"
    else:
        b_copy = f"""\
#pragma unroll
        for (int panel = 0; panel < {bn // PANEL}; ++panel)
          optiml_tma_load(sb + (unsigned)panel * {PANEL * BK * 2}u, &TB, (int)(n0 + panel * {PANEL}), (int)k0, bar);"""
        b_desc = f"optiml_desc(bb + ks * 2048u, {PANEL * BK * 2}u, 1024u)"
    return f"""\
// {bm}x{bn} tile per block: a producer warp group issuing TMA copies of {BK}-deep slices into {stages} stages,
// {consumers} consumer warp group(s) of 64 rows issuing wgmma.m64n{bn}k16{"" if b_k_major else " (B read transposed)"};
// full / empty mbarriers per stage, no block-wide barrier in the k loop.
__global__ void __launch_bounds__({threads(bm)}, 1)
    {p}_wgmma_tma(const {p}_prob P, const __grid_constant__ optiml_tensor_map TA,
                  const __grid_constant__ optiml_tensor_map TB) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  const unsigned s0 = ((unsigned)__cvta_generic_to_shared({p}_smem) + {ALIGN - 1}u) & ~{ALIGN - 1}u;
  const unsigned full = s0 + {stages * stage}u, empty = full + {8 * stages}u;
  const int group = (int)threadIdx.x >> 7;
  int64_t z, tmi, tni;
  {p}_tile(P.tiles_m, P.tiles_n, z, tmi, tni);
  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const int64_t KT = (P.K + {BK - 1}) / {BK};
{producer_head(p, stages, consumers, stage, a_bytes, f"kt * {BK}")}\
        optiml_tma_load(sa, &TA, (int)k0, (int)m0, bar);
        {b_copy}
      }}
    }}
    return;
  }}
{f"  optiml_regs_inc<{CONSUMER_REGISTERS}>();" if rebalance else ""}
  const int wg = group - 1, lane = (int)threadIdx.x & 31, warp = ((int)threadIdx.x >> 5) & 3;
  float d[{bn // 2}];
#pragma unroll
  for (int i = 0; i < {bn // 2}; ++i) d[i] = 0.f;
  for (int64_t kt = 0; kt < KT; ++kt) {{
    const int s = (int)(kt % {stages});
    optiml_mbar_wait(full + 8u * s, (unsigned)(kt / {stages}) & 1u);
    const unsigned ab = s0 + (unsigned)s * {stage}u + (unsigned)wg * {64 * 128}u;
    const unsigned bb = s0 + (unsigned)s * {stage}u + {a_bytes}u;
    optiml_wg_fence();
#pragma unroll
    for (unsigned ks = 0; ks < {BK // 16}; ++ks)
      {wgmma_function(dtype, bn, b_k_major)}(d, optiml_desc(ab + ks * 32u, 16u, 1024u), {b_desc});
    optiml_wg_commit();
    optiml_wg_wait<1>();  // the slice before this one is read: its stage goes back to the producer
    if (kt > 0 && (threadIdx.x & 127) == 0) optiml_mbar_arrive(empty + 8u * (unsigned)((kt - 1) % {stages}));
  }}
  optiml_wg_wait<0>();
{stored_accumulators(p, bn)}}}
"""


def tensor_map_declarations(bm: int, bn: int, b_k_major: bool, bk: int, panel: int, element_bytes: int) -> list[str]:
    """The host lines a TMA launch encodes its tensor maps from: A k-major in ``bk`` × ``bm`` boxes, B k-major in
    ``bk`` × ``bn`` boxes or n-major in ``panel`` × ``bk`` ones; strides in bytes of ``element_bytes`` elements."""
    if b_k_major:
        b_dims, b_stride, b_box = "(uint64_t)P.K, (uint64_t)P.N", "P.sbn", f"{bk}u, {bn}u"
    else:
        b_dims, b_stride, b_box = "(uint64_t)P.N, (uint64_t)P.K", "P.sbk", f"{panel}u, {bk}u"
    return [
        "optiml_tensor_map ta, tb;",
        "const uint64_t adims[2] = {(uint64_t)P.K, (uint64_t)P.M}, "
        f"astride[1] = {{(uint64_t)P.sam * {element_bytes}}};",
        f"const unsigned abox[2] = {{{bk}u, {bm}u}};",
        f"const uint64_t bdims[2] = {{{b_dims}}}, bstride[1] = {{(uint64_t){b_stride} * {element_bytes}}};",
        f"const unsigned bbox[2] = {{{b_box}}};",
    ]


def tma_launch(p: str, config: GroupConfig, b_k_major: bool) -> str:
    """Host statements that launch ``{p}_wgmma_tma`` and return where the product allows it and the driver
    encodes its tensor maps; otherwise they fall through to the ``wgmma`` kernel (inside the 16-byte branch
    of :func:`~optiml.templates.gemm.mma.tensor_core_launch`)."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    smem = smem_bytes(bm, bn, stages)
    maps = "\n      ".join(tensor_map_declarations(bm, bn, b_k_major, BK, PANEL, 2))
    return f"""\
    // One product whose sizes fit TMA coordinates: the TMA kernel (tensor maps encoded per call).
    if (P.batch == 1 && P.M < 2147483647LL && P.N < 2147483647LL && P.K < 2147483647LL) {{
      {maps}
      const int swizzle = OPTIML_TMA_SWIZZLE_128B;
      // a map the driver refuses (or no driver function to encode it) leaves the cp.async kernel below
      if (optiml_tensor_map_encode(&ta, {p}_tma_type, 2, P.a, adims, astride, abox, swizzle) == 0 &&
          optiml_tensor_map_encode(&tb, {p}_tma_type, 2, P.b, bdims, bstride, bbox, swizzle) == 0) {{
        const cudaError_t e =
            cudaFuncSetAttribute({p}_wgmma_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});
        if (e != cudaSuccess) return (int)e;
        {p}_wgmma_tma<<<(unsigned)blocks, {threads(bm)}, {smem}, stream>>>(P, ta, tb);
        return (int)cudaGetLastError();
      }}
    }}
"""


def launch(
    p: str,
    config: GroupConfig,
    fallback: GroupConfig,
    b_k_major: bool,
    terms: LaunchTerms,
) -> str:
    """``{p}_launch``: the TMA kernel for a single aligned product, the ``wgmma`` kernel of the same tile for
    an aligned batch, the scalar ``mma`` build otherwise."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    smem = gemm_wgmma.smem_bytes(bm, bn, stages)
    return tensor_core_launch(
        p, f"{p}_wgmma_vec", bm, bn, (bm // 64) * 128, smem, fallback, terms, first=tma_launch(p, config, b_k_major)
    )
