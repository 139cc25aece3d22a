"""The Hopper 3xTF32 GEMM fed by TMA (float32 in, float32 out, fp32 accuracy) of the GEMM template.

The ``tf32x3_tma`` variant, for sm_90a, A k-major. The arithmetic is that of ``tf32x3`` and
``tf32x3_wgmma`` (:mod:`optiml.templates.gemm.tf32`): each fp32 value ``x`` is split into ``big =
tf32(x)`` and ``small = tf32(x - big)``, a 32-deep k slice's ``a_small·b_big + a_big·b_small +
a_big·b_big`` is summed by the tensor cores into a zeroed partial, and the partial is added to the
accumulators in fp32. ``tf32x3_wgmma`` loads every slice through registers in the threads that then
multiply it, so global-memory latency sits between slices (Nsight Compute: latency-bound at
~55 TFLOP/s). Here, as in the bf16 ``wgmma_tma`` kernel (:mod:`optiml.templates.gemm.wgmma_tma`):

* **one producer warp group**, one thread of which issues Tensor Memory Accelerator copies of each
  raw fp32 slice into a ``stages``-deep ring: A's ``[bm][32]`` box, and B's ``[bn][32]`` box (k its
  contiguous dim, ``x @ W.T``) or ``bn / 32`` boxes of ``[32 k][32 n]`` (``a @ b``), all 128-byte
  swizzled and zero-filled past the matrix edge; *full* / *empty* mbarriers hand stages over;
* **bm / 64 consumer warp groups** that split each slice once:
  - **A from registers**: each thread reads its fragments of its warp group's 64 rows straight from
    the raw stage (``wgmma`` with A in registers, the ``m64nNk8`` TF32 layout: register ``v`` of
    lane ``l`` in warp ``w`` holds row ``16 w + l / 4 + 8 (v & 1)``, k ``l % 4 + 4 (v >> 1)``), and
    splits them in registers. A's big and small parts never touch shared memory;
  - **B through shared memory**: the consumers split the raw B slice between them into big / small
    tiles, k-major and 128-byte swizzled (TF32 MMAs read B k-major only, so an ``a @ b`` operand is
    transposed here), double buffered.

The consumers' loop issues slice ``kt``'s twelve MMAs, splits slice ``kt + 1``'s B into the other
buffer while they run, waits for them and adds the partial, loads and splits ``kt + 1``'s A
fragments, and meets the other consumer warp group at a named barrier (``bar.sync 1``), after which
the raw stage goes back to the producer. Each block sums one split-K slice of K when K is split (the
GEMM template's plan, as for ``tf32x3``). Only a single product (``batch == 1``) whose operands
allow 16-byte loads and whose sizes fit TMA's 32-bit coordinates takes this kernel; otherwise the
launch runs the ``mma.sync`` 3xTF32 kernel of the same block tile (:func:`fallback_config`).
"""

from __future__ import annotations

from optiml.templates.base import GroupConfig
from optiml.templates.gemm import tf32 as gemm_tf32
from optiml.templates.gemm.tf32_wgmma import fallback_config, split_k_store
from optiml.templates.gemm.wgmma import accumulator_epilogue
from optiml.templates.gemm.wgmma_tma import CONSUMER_REGISTERS, producer_head, tensor_map_declarations

BK = 32  # k per slice: one 128-byte swizzle row of floats
ROW = BK * 4  # bytes per tile row
PANEL = 32  # n per box of an a @ b operand (one 128-byte row)
ALIGN = 1024  # a 128-byte-swizzle atom (8 rows)
MAX_SMEM = 227 * 1024
MAX_STAGES = 4
#: registers a consumer thread: bn / 2 accumulators, bn / 2 partial sums, 32 A fragments and the rest
MAX_BN = 128
CONSUMER_BARRIER = 1  # the named barrier of the consumer warp groups (0 is __syncthreads')


def threads(bm: int) -> int:
    """One producer warp group and one consumer warp group per 64 rows."""
    return (bm // 64 + 1) * 128


def raw_stage_bytes(bm: int, bn: int) -> int:
    """One stage of the ring: the raw fp32 slices of A and B."""
    return (bm + bn) * ROW


def split_bytes(bn: int) -> int:
    """B's big and small tiles, two buffers."""
    return 2 * 2 * bn * ROW


def smem_bytes(bm: int, bn: int, stages: int) -> int:
    barriers = 2 * 8 * stages
    return stages * raw_stage_bytes(bm, bn) + split_bytes(bn) + barriers + ALIGN  # + the alignment slack


def check(config: GroupConfig) -> str | None:
    """Why ``config`` is illegal for the kernel, or None."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    if bm not in (64, 128):
        return f"{config.label()}: bm is 64 or 128 (one or two consumer warp groups)"
    if bn % 64 or not 64 <= bn <= MAX_BN:
        return f"{config.label()}: bn is 64 or {MAX_BN} (accumulators and partial sums: {bn} registers a thread)"
    if not 2 <= stages <= MAX_STAGES:
        return f"{config.label()}: 2 to {MAX_STAGES} stages"
    if smem_bytes(bm, bn, stages) > MAX_SMEM:
        return f"{config.label()}: {smem_bytes(bm, bn, stages)} B of shared memory (at most {MAX_SMEM})"
    return gemm_tf32.check(fallback_config(config))


def _b_split(p: str, bn: int, b_k_major: bool, consumers: int) -> str:
    """Statements: this consumer thread's share of a raw B slice (at ``raw_b``) split into the big and small
    tiles at ``b_big`` / ``b_small`` (byte offsets from ``base``), k-major and 128-byte swizzled."""
    nthreads = consumers * 128
    chunks = bn * BK // 4
    per = chunks // nthreads
    if b_k_major:  # chunk f: row n = f / 8, 16-byte chunk c = f % 8 of k, the same swizzled spot in all three
        body = """\
      const int r = f >> 3, c = f & 7;
      const unsigned at = (unsigned)(r * 128 + ((c ^ (r & 7)) << 4));
      const float4 x = *(const float4*)(base + raw_b + at);
      unsigned big[4], small[4];
      optiml_split(x.x, big[0], small[0]);
      optiml_split(x.y, big[1], small[1]);
      optiml_split(x.z, big[2], small[2]);
      optiml_split(x.w, big[3], small[3]);
      *(uint4*)(base + b_big + at) = make_uint4(big[0], big[1], big[2], big[3]);
      *(uint4*)(base + b_small + at) = make_uint4(small[0], small[1], small[2], small[3]);"""
    else:  # chunk f: four n from 4 q at one k; lanes spread over eight k, so the 4-byte stores hit distinct banks
        quads = bn // 4
        body = f"""\
      const int q = (f >> 3) % {quads}, k = ((f >> 3) / {quads}) * 8 + (f & 7), n = q * 4;
      const float4 x = *(const float4*)(base + raw_b + (unsigned)((n >> 5) * {PANEL * ROW} + k * 128 +
                                                                   ((((n & 31) >> 2) ^ (k & 7)) << 4)));
      const float v[4] = {{x.x, x.y, x.z, x.w}};
#pragma unroll
      for (int e = 0; e < 4; ++e) {{
        const int r = n + e;
        const unsigned at = (unsigned)(r * 128 + (((k >> 2) ^ (r & 7)) << 4) + (k & 3) * 4);
        unsigned big, small;
        optiml_split(v[e], big, small);
        *(unsigned*)(base + b_big + at) = big;
        *(unsigned*)(base + b_small + at) = small;
      }}"""
    return f"""\
#pragma unroll
    for (int l = 0; l < {per}; ++l) {{
      const int f = ct + l * {nthreads};
{body}
    }}
"""


def _a_fragments(p: str) -> str:
    """Statements: this thread's A fragments of a raw slice (at ``raw_a``) split into ``ab`` / ``as_``."""
    return """\
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int r = arow + 8 * (v & 1), k = ks * 8 + (lane & 3) + 4 * (v >> 1);
        const float x = *(const float*)(base + raw_a + (unsigned)(r * 128 + (((k >> 2) ^ (r & 7)) << 4) + (k & 3) * 4));
        optiml_split(x, ab[ks][v], as_[ks][v]);
      }
"""


def kernel(p: str, config: GroupConfig, b_k_major: bool) -> str:
    """``{p}_tf32_tma`` (launch with :func:`threads` threads and :func:`smem_bytes` of dynamic shared memory)."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    consumers = bm // 64
    a_raw, stage = bm * ROW, raw_stage_bytes(bm, bn)
    split0 = stages * stage
    regs = bn // 2
    rebalance = consumers > 1  # the producer gave registers back (producer_head): the consumers take them
    if b_k_major:
        b_copy = "optiml_tma_load(sb, &TB, (int)k0, (int)n0, bar);"
    else:
        b_copy = f"""\
#pragma unroll
        for (int panel = 0; panel < {bn // PANEL}; ++panel)
          optiml_tma_load(sb + (unsigned)panel * {PANEL * ROW}u, &TB, (int)(n0 + panel * {PANEL}), (int)k0, bar);"""
    producer = producer_head(p, stages, consumers, stage, a_raw, f"kbeg + kt * {BK}")
    b_split = _b_split(p, bn, b_k_major, consumers)
    a_split = _a_fragments(p)
    mmas = f"""\
      const unsigned b_big = split0 + (unsigned)(kt & 1) * {2 * bn * ROW}u, b_small = b_big + {bn * ROW}u;
      optiml_wg_fence();
#pragma unroll
      for (unsigned ks = 0; ks < {BK // 8}; ++ks) {{  // small terms first; the slice's first MMA zeroes the partial
        optiml_wgmma_tf32_rs<{bn}>(part, as_[ks], optiml_desc(s0 + b_big + ks * 32u, 16u, 1024u), ks != 0);
        optiml_wgmma_tf32_rs<{bn}>(part, ab[ks], optiml_desc(s0 + b_small + ks * 32u, 16u, 1024u), 1);
        optiml_wgmma_tf32_rs<{bn}>(part, ab[ks], optiml_desc(s0 + b_big + ks * 32u, 16u, 1024u), 1);
      }}
      optiml_wg_commit();"""
    return f"""\
// 3xTF32 fed by TMA: {bm}x{bn} tile per block, a producer warp group copying raw {BK}-deep fp32 slices into
// {stages} stages, {consumers} consumer warp group(s) of 64 rows that split A into registers and B into big /
// small shared tiles ({"k" if b_k_major else "n"}-major in memory) and issue wgmma.m64n{bn}k8 with A in registers.
__global__ void __launch_bounds__({threads(bm)}, 1)
    {p}_tf32_tma(const {p}_prob P, const __grid_constant__ optiml_tensor_map TA,
                 const __grid_constant__ optiml_tensor_map TB) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  const unsigned s0 = ((unsigned)__cvta_generic_to_shared({p}_smem) + {ALIGN - 1}u) & ~{ALIGN - 1}u;
  // generic pointer to s0: the split reads and writes shared memory through it
  unsigned char* const base = {p}_smem + (s0 - (unsigned)__cvta_generic_to_shared({p}_smem));
  const unsigned split0 = {split0}u;  // byte offsets from s0: the raw stages, then B's two split buffers
  const unsigned full = s0 + {split0 + split_bytes(bn)}u, empty = full + {8 * stages}u;
  const int group = (int)threadIdx.x >> 7;
{gemm_tf32.split_k_head(p, bm, bn, operands=False)}  const int64_t KT = (kend - kbeg + {BK - 1}) / {BK};
{producer}        optiml_tma_load(sa, &TA, (int)k0, (int)m0, bar);
        {b_copy}
      }}
    }}
    return;
  }}
{f"  optiml_regs_inc<{CONSUMER_REGISTERS}>();" if rebalance else ""}
  const int wg = group - 1, ct = (int)threadIdx.x - 128, lane = (int)threadIdx.x & 31;
  const int warp = ((int)threadIdx.x >> 5) & 3, arow = wg * 64 + warp * 16 + (lane >> 2);
  float acc[{regs}], part[{regs}];
#pragma unroll
  for (int i = 0; i < {regs}; ++i) acc[i] = 0.f;
  unsigned ab[4][4], as_[4][4];  // this slice's A fragments, big and small, per k8 step
  if (KT > 0) {{  // slice 0: A's fragments and B's split
    optiml_mbar_wait(full, 0u);
    const unsigned raw_a = 0u, raw_b = {a_raw}u, b_big = split0, b_small = split0 + {bn * ROW}u;
{a_split}{b_split}  }}
  optiml_proxy_fence();
  optiml_named_sync<{CONSUMER_BARRIER}>({consumers * 128}u);
  if (KT > 0 && (ct & 127) == 0) optiml_mbar_arrive(empty);
  for (int64_t kt = 0; kt < KT; ++kt) {{
    {{
{mmas}
    }}
    const int64_t next = kt + 1;
    const int s = (int)(next % {stages});
    const unsigned raw_a = (unsigned)s * {stage}u, raw_b = raw_a + {a_raw}u;
    if (next < KT) {{  // B's split of the next slice into the other buffer (read by slice kt - 1's finished MMAs)
      optiml_mbar_wait(full + 8u * s, (unsigned)(next / {stages}) & 1u);
      const unsigned b_big = split0 + (unsigned)(next & 1) * {2 * bn * ROW}u, b_small = b_big + {bn * ROW}u;
{b_split}    }}
    optiml_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < {regs}; ++i) acc[i] += part[i];
    if (next < KT) {{  // the MMAs are done with the A registers: the next slice's fragments
{a_split}    }}
    optiml_proxy_fence();
    // B's split is whole, and every warp group's MMAs of slice kt are done
    optiml_named_sync<{CONSUMER_BARRIER}>({consumers * 128}u);
    if (next < KT && (ct & 127) == 0) optiml_mbar_arrive(empty + 8u * (unsigned)s);
  }}
{accumulator_epilogue(bn, split_k_store(p))}}}
"""


def tma_launch(p: str, config: GroupConfig, b_k_major: bool) -> str:
    """Host statements, inside the 16-byte branch of :func:`optiml.templates.gemm.tf32.launch` (after the
    split of K and any padding), that launch ``{p}_tf32_tma`` and go on to the split-K sum where the
    product allows it and the driver encodes its tensor maps; otherwise they fall through to the
    ``mma.sync`` kernel of the same tile."""
    bm, bn, stages = (int(config.get(k)) for k in ("bm", "bn", "stages"))
    smem = smem_bytes(bm, bn, stages)
    maps = "\n    ".join(tensor_map_declarations(bm, bn, b_k_major, BK, PANEL, 4))
    return f"""\
  // One product whose sizes fit TMA coordinates: the TMA kernel (tensor maps encoded per call).
  if (vec && P.batch == 1 && P.M < 2147483647LL && P.N < 2147483647LL && P.K < 2147483647LL) {{
    {maps}
    const int swizzle = OPTIML_TMA_SWIZZLE_128B;
    // a map the driver refuses (or no driver function to encode it) leaves the mma.sync kernel below
    if (optiml_tensor_map_encode(&ta, {p}_tma_type, 2, P.a, adims, astride, abox, swizzle) == 0 &&
        optiml_tensor_map_encode(&tb, {p}_tma_type, 2, P.b, bdims, bstride, bbox, swizzle) == 0) {{
      const cudaError_t e = cudaFuncSetAttribute({p}_tf32_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});
      if (e != cudaSuccess) return (int)e;
      {p}_tf32_tma<<<(unsigned)blocks, {threads(bm)}, {smem}, stream>>>(P, ta, tb);
      {{ const cudaError_t e2 = cudaGetLastError(); if (e2 != cudaSuccess) return (int)e2; }}
      return P.splits > 1 ? {p}_splitk_launch(P, stream) : 0;
    }}
  }}
"""
