"""The Hopper warp-group GEMM kernel (fp16 / bf16, fp32 accumulation) of the GEMM template.

The ``wgmma`` variant, for sm_90a: each warp group (128 threads) owns 64 rows of a ``bm × bn``
block tile and issues ``wgmma.mma_async.m64n{bn}k16`` with both operands read straight from
shared memory through matrix descriptors. Tiles arrive by a ``stages``-deep ``cp.async`` pipeline
(64-deep k slices: one 128-byte row per tile row) into the 128-byte-swizzled layout the
descriptors name: 16-byte chunk ``c`` of row ``r`` lives at chunk ``c ^ (r % 8)`` of that row, and
every tile starts on a 1024-byte boundary. A (k contiguous) is ``[bm][64]``; B is ``[bn][64]``
when k is its contiguous dim (``x @ W.T``), else (``a @ b``) panels of ``[64 k][64 n]`` read
transposed by the instruction. Generic-proxy writes (``cp.async``) are made visible to the
asynchronous proxy with ``fence.proxy.async`` before the barrier that precedes each slice's MMAs.
With three or more stages one slice's MMAs stay in flight (``wgmma.wait_group 1``) while the next
slice's are issued, and the copies run ``stages - 2`` slices ahead.

Descriptors (PTX ISA, "matrix descriptor"): start address, leading-dimension byte offset (LBO),
stride-dimension byte offset (SBO), swizzle mode 1 (128 B) in bits 62–63. K-major, 128-byte
swizzle: SBO = 1024 (eight 128-byte rows), LBO unused; MN-major: LBO = the stride between 64-wide
MN panels, SBO = 1024 (eight k rows). A k16 step advances the start address by 32 bytes (k-major)
or by 16 rows of 128 bytes (MN-major).

Only when A's contiguous dim is k and both operands allow 16-byte copies; otherwise the launch
takes the scalar ``mma`` build (:func:`optiml.templates.gemm.mma.fallback_config`).
"""

from __future__ import annotations

from optiml.templates.base import GroupConfig
from optiml.templates.gemm.mma import LaunchTerms, tensor_core_launch
from optiml.templates.ptx import wgmma_function

BK = 64  # k per slice: one 128-byte swizzle row of 16-bit values
PANEL = 64  # MN-major B: n per panel (one 128-byte row)
MAX_SMEM = 227 * 1024
ALIGN = 1024  # a 128-byte-swizzle atom (8 rows)
MN_PANEL_IS_LBO = True  # MN-major operand: LBO = panel stride, SBO = 8-row stride (CUTLASS's canonical form)


def stage_bytes(bm: int, bn: int) -> int:
    return (bm + bn) * BK * 2


def smem_bytes(bm: int, bn: int, stages: int) -> int:
    return stages * stage_bytes(bm, bn) + ALIGN  # + the alignment slack of the dynamic base


def check(config: GroupConfig) -> str | None:
    """Why ``config`` is illegal for the wgmma kernel, or None."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    if bm % 64 or bn % PANEL or not 64 <= bn <= 256:
        return f"{config.label()}: bm a multiple of 64, bn a multiple of {PANEL} up to 256"
    if smem_bytes(bm, bn, stages) > MAX_SMEM:
        return f"{config.label()}: {smem_bytes(bm, bn, stages)} B of shared memory (at most {MAX_SMEM})"
    if (bm // 64) * 128 > 512:
        return f"{config.label()}: {(bm // 64) * 128} threads per block (at most 512)"
    return None


def accumulator_epilogue(bn: int, element: str) -> str:
    """Loops over a warp group's m64n{bn} fp32 accumulators: ``element`` (indented for the innermost
    loop) runs once per register ``4 j + 2 h + q``, at row ``m`` (the output row ``r`` of product ``z``) and
    column ``n`` (shared with the 3xTF32 kernels)."""
    return f"""\
  // accumulator layout: warp w of the group has rows 16 w + lane / 4 (+ 8); register 4 j + 2 h + q is
  // column 8 j + 2 (lane % 4) + q of row + 8 h
#pragma unroll
  for (int h = 0; h < 2; ++h) {{
    const int64_t m = m0 + wg * 64 + warp * 16 + lane / 4 + 8 * h;
    if (m >= P.M) continue;
    const int64_t r = z * P.M + m;
#pragma unroll
    for (int j = 0; j < {bn // 8}; ++j)
#pragma unroll
      for (int q = 0; q < 2; ++q) {{
        const int64_t n = n0 + j * 8 + 2 * (lane % 4) + q;
{element}
      }}
  }}
"""


def stored_accumulators(p: str, bn: int) -> str:
    """The warp group's accumulators ``d`` through the GEMM epilogue into the output: each thread's two
    adjacent columns (registers ``4 j + 2 h``, ``+1``) as one pair store (``{p}_epi2``) where
    ``P.pair_out``, else element by element (``{p}_epi1``)."""
    return f"""\
#pragma unroll
  for (int h = 0; h < 2; ++h) {{
    const int64_t m = m0 + wg * 64 + warp * 16 + lane / 4 + 8 * h;
    if (m >= P.M) continue;
    const int64_t r = z * P.M + m;
#pragma unroll
    for (int j = 0; j < {bn // 8}; ++j) {{
      const int64_t n = n0 + j * 8 + 2 * (lane % 4);
      const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
      if (P.pair_out && n + 1 < P.N) {{
        {p}_epi2(P, r, n, v0, v1);
      }} else {{
        if (n < P.N) {p}_epi1(P, r, n, v0);
        if (n + 1 < P.N) {p}_epi1(P, r, n + 1, v1);
      }}
    }}
  }}
"""


def kernel(p: str, config: GroupConfig, b_k_major: bool, dtype: str) -> str:
    """``{p}_wgmma_vec`` for ``dtype`` operands (launch with :func:`smem_bytes` of dynamic shared memory)."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    threads = (bm // 64) * 128
    a_bytes, stage = bm * BK * 2, stage_bytes(bm, bn)
    # With 3+ stages one slice's MMAs stay in flight while the next slice's are issued; the copies then
    # run stages - 2 slices ahead (the stage they refill was read two slices ago).
    inflight = 1 if stages >= 3 else 0
    ahead = stages - 1 - inflight
    a_chunks, b_chunks = bm * BK // 8, bn * BK // 8
    guard_a = "true" if a_chunks % threads == 0 else f"f < {a_chunks}"
    guard_b = "true" if b_chunks % threads == 0 else f"f < {b_chunks}"
    if b_k_major:
        b_copy = f"""\
#pragma unroll
    for (int l = 0; l < {(b_chunks + threads - 1) // threads}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads};
      if ({guard_b}) {{
        const int r = f >> 3, c = f & 7;
        const bool ok = n0 + r < P.N && k0 + c * 8 < P.K;
        optiml_cp16(sb + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)), B + (ok ? (n0 + r) * P.sbn + k0 + c * 8 : 0), ok);
      }}
    }}"""
        b_desc = "optiml_desc(bb + ks * 32u, 16u, 1024u)"
    else:
        per_row = bn // 8
        lbo, sbo = (PANEL * BK * 2, 1024) if MN_PANEL_IS_LBO else (1024, PANEL * BK * 2)
        b_copy = f"""\
#pragma unroll
    for (int l = 0; l < {(b_chunks + threads - 1) // threads}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads};
      if ({guard_b}) {{
        const int k = f / {per_row}, c = f % {per_row}, panel = c >> 3, cc = c & 7;
        const bool ok = k0 + k < P.K && n0 + c * 8 < P.N;
        optiml_cp16(sb + (unsigned)(panel * {PANEL * BK * 2} + k * 128 + ((cc ^ (k & 7)) << 4)),
                 B + (ok ? (k0 + k) * P.sbk + n0 + c * 8 : 0), ok);
      }}
    }}"""
        b_desc = f"optiml_desc(bb + ks * 2048u, {lbo}u, {sbo}u)"
    copy = f"""\
    {{
      const unsigned sa = s0 + (unsigned)stage * {stage}u, sb = sa + {a_bytes}u;
#pragma unroll
      for (int l = 0; l < {(a_chunks + threads - 1) // threads}; ++l) {{
        const int f = (int)threadIdx.x + l * {threads};
        if ({guard_a}) {{
          const int r = f >> 3, c = f & 7;
          const bool ok = m0 + r < P.M && k0 + c * 8 < P.K;
          optiml_cp16(sa + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)),
                      A + (ok ? (m0 + r) * P.sam + k0 + c * 8 : 0), ok);
        }}
      }}
{b_copy}
    }}
"""
    return f"""\
// {bm}x{bn} tile per block: {bm // 64} warp group(s) of 64 rows, wgmma.m64n{bn}k16 from 128-byte-swizzled shared
// memory, {BK}-deep slices in a {stages}-stage cp.async pipeline{"" if b_k_major else " (B read transposed)"}.
__global__ void __launch_bounds__({threads}) {p}_wgmma_vec(const {p}_prob P) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  const unsigned s0 = ((unsigned)__cvta_generic_to_shared({p}_smem) + {ALIGN - 1}u) & ~{ALIGN - 1}u;
  const int wg = (int)threadIdx.x >> 7, lane = (int)threadIdx.x & 31, warp = ((int)threadIdx.x >> 5) & 3;
  int64_t z, tmi, tni, oa, ob;
  {p}_tile(P.tiles_m, P.tiles_n, z, tmi, tni);
  {p}_offsets(P.bsz, P.bsa, P.bsb, z, oa, ob);
  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const unsigned short* __restrict__ A = (const unsigned short*)(P.a + oa);
  const unsigned short* __restrict__ B = (const unsigned short*)(P.b + ob);
  float d[{bn // 2}];
#pragma unroll
  for (int i = 0; i < {bn // 2}; ++i) d[i] = 0.f;
  const int64_t KT = (P.K + {BK - 1}) / {BK};
#pragma unroll
  for (int s = 0; s < {ahead}; ++s) {{
    if (s < KT) {{
      const int stage = s;
      const int64_t k0 = (int64_t)s * {BK};
{copy}    }}
    optiml_cp_commit();
  }}
  for (int64_t kt = 0; kt < KT; ++kt) {{
    optiml_cp_wait<{ahead - 1}>();
    optiml_proxy_fence();
    __syncthreads();  // every warp group's MMAs of slice kt - 1 - {inflight} are done: its stage is free
    {{
      const int64_t next = kt + {ahead};
      if (next < KT) {{
        const int stage = (int)(next % {stages});
        const int64_t k0 = next * {BK};
{copy}      }}
      optiml_cp_commit();
    }}
    const unsigned ab = s0 + (unsigned)(kt % {stages}) * {stage}u + (unsigned)wg * {64 * 128}u;
    const unsigned bb = s0 + (unsigned)(kt % {stages}) * {stage}u + {a_bytes}u;
    optiml_wg_fence();
#pragma unroll
    for (unsigned ks = 0; ks < {BK // 16}; ++ks)
      {wgmma_function(dtype, bn, b_k_major)}(d, optiml_desc(ab + ks * 32u, 16u, 1024u), {b_desc});
    optiml_wg_commit();
    optiml_wg_wait<{inflight}>();
  }}
  optiml_wg_wait<0>();
  optiml_cp_wait<0>();
{stored_accumulators(p, bn)}}}
"""


def launch(p: str, config: GroupConfig, fallback: GroupConfig, terms: LaunchTerms) -> str:
    """``{p}_launch``: the wgmma kernel when both operands allow 16-byte copies, else the scalar mma one."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    smem = smem_bytes(bm, bn, stages)
    return tensor_core_launch(p, f"{p}_wgmma_vec", bm, bn, (bm // 64) * 128, smem, fallback, terms)
