"""The Hopper 3xTF32 GEMM kernel (float32 in, float32 out, fp32 accuracy) of the GEMM template.

The ``tf32x3_wgmma`` variant, for sm_90a. The same arithmetic as ``tf32x3``
(:mod:`optiml.templates.gemm.tf32`): each fp32 operand value ``x`` is split into ``big = tf32(x)``
and ``small = tf32(x - big)``, and the product is accumulated as ``a_small·b_big + a_big·b_small +
a_big·b_big``, each 32-deep k slice summed by the tensor cores into a partial that is added to the
accumulators in fp32. What differs is where the work happens:

* The split is done once per element and block, when a slice is staged: every thread loads its
  16-byte chunks of the slice from global memory into registers, splits them, and stores the big
  and the small parts into four shared-memory tiles (A big, A small, B big, B small). The
  ``mma.sync`` kernel splits each fragment again in every warp that reads it.
* ``wgmma.mma_async.m64n{bn}k8.tf32`` reads both operands straight from those tiles through matrix
  descriptors; each warp group (128 threads) owns 64 rows of the ``bm × bn`` block tile. The first
  MMA of a slice starts its partial from zero (``scale-d`` = 0), so the partial costs no zeroing.
* TF32 warp-group MMAs read both operands k-major. A slice row is 32 floats, one 128-byte swizzle
  row: 16-byte chunk ``c`` of row ``r`` lives at chunk ``c ^ (r % 8)``, every tile starts on a
  1024-byte boundary, and a k8 step advances a descriptor's start by 32 bytes. An operand whose
  contiguous dim is m or n (``a @ b``'s B) is transposed on its way into shared memory: a thread
  loads four consecutive n at one k and stores four 4-byte words, lanes spread over eight k so the
  stores hit distinct banks but for one 2-way pair.

The pipeline is two shared-memory stages and a register stage: a slice's MMAs are issued, then the
next slice is loaded, split and stored into the other stage while they run; the warp group waits for
its MMAs, adds the partial, and one barrier ends the slice. Each block sums one split-K slice of K
when K is split (the GEMM template's plan, as for ``tf32x3``). Only when both operands allow 16-byte
loads (contiguous dims and strides multiples of 4, aligned; a single product with an odd contiguous
dim is padded first); otherwise the launch takes the ``mma.sync`` 3xTF32 kernel's 4-byte build of
the same tile (:func:`fallback_config`).
"""

from __future__ import annotations

from optiml.templates.base import GroupConfig
from optiml.templates.gemm import tf32 as gemm_tf32
from optiml.templates.gemm import wgmma as gemm_wgmma

BK = 32  # k per slice: one 128-byte swizzle row of floats
ROW = BK * 4  # bytes per tile row
ALIGN = 1024  # a 128-byte-swizzle atom (8 rows)
MAX_SMEM = 227 * 1024
STAGES = 2
#: The accumulators and the partial sums, 2 · bn / 2 registers a thread, must leave room for the rest
MAX_BN = 128


def stage_bytes(bm: int, bn: int) -> int:
    """One stage: A big, A small, B big, B small."""
    return 2 * (bm + bn) * ROW


def smem_bytes(bm: int, bn: int) -> int:
    return STAGES * stage_bytes(bm, bn) + ALIGN  # + the alignment slack of the dynamic base


def threads(config: GroupConfig) -> int:
    return int(config.get("bm")) // 64 * 128


def check(config: GroupConfig) -> str | None:
    """Why ``config`` is illegal for the kernel, or None."""
    bm, bn = int(config.get("bm")), int(config.get("bn"))
    if bm % 64 or not 64 <= bm <= 128:
        return f"{config.label()}: bm is 64 or 128 (one or two warp groups)"
    if bn % 64 or not 64 <= bn <= MAX_BN:
        return f"{config.label()}: bn is 64 or {MAX_BN} (accumulators and partial sums: {bn} registers a thread)"
    if smem_bytes(bm, bn) > MAX_SMEM:
        return f"{config.label()}: {smem_bytes(bm, bn)} B of shared memory (at most {MAX_SMEM})"
    return gemm_tf32.check(fallback_config(config))


def fallback_config(config: GroupConfig) -> GroupConfig:
    """The ``mma.sync`` 3xTF32 tile the launch takes when the operands do not allow 16-byte loads: the
    same block tile (so one split-K plan serves both), 2 x wn warps with at most 64 accumulators each."""
    bm, bn = int(config.get("bm")), int(config.get("bn"))
    wn = 2 if (bm // 2) * (bn // 2) // 32 <= gemm_tf32.MAX_ACCUMULATORS else 4
    return GroupConfig.of("tf32x3", bm=bm, bn=bn, bk=BK, wm=2, wn=wn, stages=2)


def split_float4(p: str, value: str, indent: int) -> str:
    """Statements: ``big[4]`` and ``small[4]``, the TF32 parts of the float4 ``value``."""
    lines = ["unsigned big[4], small[4];"]
    lines += [f"optiml_split({value}.{c}, big[{i}], small[{i}]);" for i, c in enumerate("xyzw")]
    return "\n".join(" " * indent + line for line in lines)


def store_split(p: str, name: str, indent: int) -> str:
    """Statements storing ``big`` / ``small`` as 16-byte words at ``at`` past ``{name}_big`` / ``{name}_small``."""
    lines = [
        f"optiml_sts16({name}_{part} + at, {part}[0], {part}[1], {part}[2], {part}[3]);" for part in ("big", "small")
    ]
    return "\n".join(" " * indent + line for line in lines)


def slice_mmas(p: str, bn: int, stage: int, a_bytes: int, b_bytes: int, slot: str = "(kt & 1)") -> str:
    """Statements: one 32-deep slice's 3xTF32 warp-group MMAs into ``part`` (stage ``slot``; A big, A small,
    B big, B small in that order), small terms first, the slice's first MMA zeroing the partial; committed."""
    return f"""\
    const unsigned a_big = s0 + (unsigned){slot} * {stage}u + (unsigned)wg * {64 * ROW}u;
    const unsigned a_small = a_big + {a_bytes}u;
    const unsigned b_big = s0 + (unsigned){slot} * {stage}u + {2 * a_bytes}u, b_small = b_big + {b_bytes}u;
    optiml_wg_fence();
#pragma unroll
    for (unsigned ks = 0; ks < {BK // 8}; ++ks) {{  // small terms first; the slice's first MMA zeroes the partial
      const unsigned long long da_big = optiml_desc(a_big + ks * 32u, 16u, 1024u);
      const unsigned long long db_big = optiml_desc(b_big + ks * 32u, 16u, 1024u);
      optiml_wgmma_tf32<{bn}>(part, optiml_desc(a_small + ks * 32u, 16u, 1024u), db_big, ks != 0);
      optiml_wgmma_tf32<{bn}>(part, da_big, optiml_desc(b_small + ks * 32u, 16u, 1024u), 1);
      optiml_wgmma_tf32<{bn}>(part, da_big, db_big, 1);
    }}
    optiml_wg_commit();"""


def _stage(p: str, name: str, outer: int, k_major: bool, nthreads: int, tile: dict[str, str]) -> tuple[str, str]:
    """(loads, stores): one operand's ``outer x 32`` slice from global memory into registers
    ``{name}v``, then split into the big and small tiles at shared addresses ``{name}_big`` /
    ``{name}_small`` (128-byte swizzled, k-major). ``tile``: the operand's origin ``o0`` and size
    ``osize`` along outer, its pointer ``ptr`` and the element strides ``so`` (outer) / ``sk`` (k)."""
    chunks = outer * BK // 4
    per = (chunks + nthreads - 1) // nthreads
    guard = "" if chunks % nthreads == 0 else f"f < {chunks} && "
    if k_major:  # chunk f: row r (outer), 16-byte chunk c of k
        where = "const int r = f >> 3, c = f & 7;"
        inside = f"{tile['o0']} + r < {tile['osize']} && k0 + c * 4 < kend"
        address = f"{tile['ptr']} + ({tile['o0']} + r) * {tile['so']} + k0 + c * 4"
        store = f"        const unsigned at = (unsigned)(r * {ROW} + ((c ^ (r & 7)) << 4));\n" + store_split(p, name, 8)
    else:  # chunk f: k = 8 (f / 8 / (outer / 4)) + f % 8, four outer values from 4 (f / 8 % (outer / 4))
        quads = outer // 4
        where = f"const int q = (f >> 3) % {quads}, k = ((f >> 3) / {quads}) * 8 + (f & 7);"
        inside = f"k0 + k < kend && {tile['o0']} + q * 4 < {tile['osize']}"
        address = f"{tile['ptr']} + (k0 + k) * {tile['sk']} + {tile['o0']} + q * 4"
        store = f"""\
#pragma unroll
        for (int e = 0; e < 4; ++e) {{
          const int r = q * 4 + e;
          const unsigned at = (unsigned)(r * {ROW} + (((k >> 2) ^ (r & 7)) << 4) + (k & 3) * 4);
          optiml_sts4({name}_big + at, big[e]);
          optiml_sts4({name}_small + at, small[e]);
        }}"""
    loads = f"""\
#pragma unroll
      for (int l = 0; l < {per}; ++l) {{
        const int f = (int)threadIdx.x + l * {nthreads};
        {where}
        {name}v[l] = make_float4(0.f, 0.f, 0.f, 0.f);
        if ({guard}{inside}) {name}v[l] = *(const float4*)({address});
      }}
"""
    stores = f"""\
#pragma unroll
      for (int l = 0; l < {per}; ++l) {{
        const int f = (int)threadIdx.x + l * {nthreads};
        if ({guard.removesuffix(" && ") or "true"}) {{
        {where}
{split_float4(p, f"{name}v[l]", 8)}
{store}
        }}
      }}
"""
    return f"    float4 {name}v[{per}];\n" + loads, stores


def split_k_store(p: str) -> str:
    """The accumulator loop's element (:func:`optiml.templates.gemm.wgmma.accumulator_epilogue`): a partial
    sum into the workspace when K is split, else the epilogue (shared with the TMA 3xTF32 kernel)."""
    return f"""\
        if (n >= P.N) continue;
        if (P.splits > 1)  // a partial sum: {p}_splitk_sum adds the slices and applies the epilogue
          P.part[(split * P.batch * P.M + r) * P.N + n] = acc[4 * j + 2 * h + q];
        else
          {p}_epi1(P, r, n, acc[4 * j + 2 * h + q]);"""


def kernel(p: str, config: GroupConfig, a_k_major: bool, b_k_major: bool) -> str:
    """``{p}_tf32w_vec`` (launch with :func:`smem_bytes` of dynamic shared memory and :func:`threads`)."""
    bm, bn = int(config.get("bm")), int(config.get("bn"))
    nthreads = threads(config)
    a_tile = dict(o0="m0", osize="P.M", ptr="A", so="P.sam", sk="P.sak")
    b_tile = dict(o0="n0", osize="P.N", ptr="B", so="P.sbn", sk="P.sbk")
    load_a, store_a = _stage(p, "a", bm, a_k_major, nthreads, a_tile)
    load_b, store_b = _stage(p, "b", bn, b_k_major, nthreads, b_tile)
    a_bytes, b_bytes, stage = bm * ROW, bn * ROW, stage_bytes(bm, bn)
    regs = bn // 2
    slice_code = f"""\
    {{
      const unsigned a_big = s0 + (unsigned)buf * {stage}u, a_small = a_big + {a_bytes}u;
      const unsigned b_big = a_small + {a_bytes}u, b_small = b_big + {b_bytes}u;
{load_a}{load_b}{store_a}{store_b}    }}
"""
    store = split_k_store(p)
    layouts = f"A {'k' if a_k_major else 'm'}-major, B {'k' if b_k_major else 'n'}-major in memory"
    return f"""\
// 3xTF32 on warp-group MMAs: {bm}x{bn} tile per block, {bm // 64} warp group(s) of 64 rows, m64n{bn}k8 from
// 128-byte-swizzled big / small tiles split once when staged ({layouts}); {BK}-deep slices, two
// shared-memory stages, the next slice loaded, split and stored while the current one's MMAs run.
__global__ void __launch_bounds__({nthreads}) {p}_tf32w_vec(const {p}_prob P) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  const unsigned s0 = ((unsigned)__cvta_generic_to_shared({p}_smem) + {ALIGN - 1}u) & ~{ALIGN - 1}u;
  const int wg = (int)threadIdx.x >> 7, lane = (int)threadIdx.x & 31, warp = ((int)threadIdx.x >> 5) & 3;
{gemm_tf32.split_k_head(p, bm, bn)}  float acc[{regs}], part[{regs}];
#pragma unroll
  for (int i = 0; i < {regs}; ++i) acc[i] = part[i] = 0.f;
  const int64_t KT = (kend - kbeg + {BK - 1}) / {BK};
  if (KT > 0) {{
    const int buf = 0;
    const int64_t k0 = kbeg;
{slice_code}  }}
  optiml_proxy_fence();
  __syncthreads();
  for (int64_t kt = 0; kt < KT; ++kt) {{
{slice_mmas(p, bn, stage, a_bytes, b_bytes)}
    if (kt + 1 < KT) {{  // the other stage was read by slice kt - 1's MMAs, finished before the last barrier
      const int buf = (int)((kt + 1) & 1);
      const int64_t k0 = kbeg + (kt + 1) * {BK};
{slice_code}    }}
    optiml_wg_wait<0>();
#pragma unroll
    for (int i = 0; i < {regs}; ++i) acc[i] += part[i];
    optiml_proxy_fence();
    __syncthreads();
  }}
{gemm_wgmma.accumulator_epilogue(bn, store)}}}
"""
