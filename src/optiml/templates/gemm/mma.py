"""The pipelined tensor-core GEMM kernel (fp16 / bf16, fp32 accumulation) of the GEMM template.

The 16-byte build of the ``mma`` variant: ``stages``-deep ``cp.async`` pipeline from global to
dynamic shared memory (the next ``stages - 1`` slices are in flight while one is multiplied; tiles
past the matrix edge are zero-filled by the copy), fragments read with ``ldmatrix`` — transposing
on the way (``.trans``) for an operand whose contiguous dim is not k, so ``a @ b`` needs no
transpose pass through registers — and ``mma.sync.m16n8k16``. Shared-memory rows are padded by 8
halves (16 bytes): the eight row addresses of one 8x8 ``ldmatrix`` then fall in distinct bank
groups. The epilogue is the GEMM group's (``{p}_epi1``), applied to each accumulator.

The scalar build (odd sizes, unaligned views) stays :func:`optiml.templates.gemm.simt.mma_kernel`
with a tile that fits static shared memory (:func:`fallback_config`).
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.templates.base import GroupConfig
from optiml.templates.ptx import mma_function

PAD = 8  # halves of padding per shared-memory row
MAX_SMEM = 227 * 1024  # dynamic shared memory per block with the opt-in


def smem_bytes(bm: int, bn: int, bk: int, stages: int, a_k_major: bool, b_k_major: bool) -> int:
    a = bm * (bk + PAD) if a_k_major else bk * (bm + PAD)
    b = bn * (bk + PAD) if b_k_major else bk * (bn + PAD)
    return stages * (a + b) * 2


def fallback_config(config: GroupConfig) -> GroupConfig:
    """The scalar build's tile: the configuration's, shrunk to fit 48 KiB of static shared memory."""
    bm, bn = min(int(config.get("bm")), 128), min(int(config.get("bn")), 128)
    wm = bm // 32  # 32-row warp tiles, at most 8 warps, at most 16 mma tiles per warp
    wn = max(1, min(bn // 32, 8 // wm))
    return GroupConfig.of("mma", bm=bm, bn=bn, bk=32, wm=wm, wn=wn)


def warp_grid_problem(config: GroupConfig) -> str | None:
    """What every ``mma.sync`` m16n8 kernel needs of its warp grid: whole 16x8 tiles per warp and 64 to 256
    threads (None: both hold)."""
    bm, bn, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "wm", "wn"))
    if bm % (16 * wm) or bn % (8 * wn):
        return f"{config.label()}: warp tile {bm}/{wm} x {bn}/{wn} is not a whole number of 16x8 mma tiles"
    threads = wm * wn * 32
    if not 64 <= threads <= 256:
        return f"{config.label()}: {threads} threads per block (64 to 256)"
    return None


def zeroed_accumulators(mi: int, ni: int) -> str:
    """Device statements: ``acc``, a warp's ``mi x ni`` m16n8 accumulator tiles (four floats a thread each), zeroed."""
    return f"""\
  float acc[{mi}][{ni}][4];
#pragma unroll
  for (int i = 0; i < {mi}; ++i)
#pragma unroll
    for (int j = 0; j < {ni}; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;"""


def check(config: GroupConfig) -> str | None:
    """Why the pipelined build of ``config`` is illegal, or None."""
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    stages = int(config.get("stages", 2))
    if bm % (16 * wm) or bn % (16 * wn):
        return f"{config.label()}: warp tile {bm}/{wm} x {bn}/{wn} is not a whole number of 16x16 tiles"
    threads = wm * wn * 32
    if not 64 <= threads <= 512:
        return f"{config.label()}: {threads} threads per block (64 to 512)"
    accumulators = (bm // wm) * (bn // wn) // 32
    if accumulators > 128:
        return f"{config.label()}: {accumulators} accumulators per thread (registers spill)"
    for outer, inner in ((bm, bk), (bn, bk)):
        if (outer * inner // 8) % threads:
            return f"{config.label()}: a {outer}x{inner} tile is not a whole number of 16-byte copies per thread"
    worst = max(smem_bytes(bm, bn, bk, stages, ak, bk_) for ak in (True, False) for bk_ in (True, False))
    if worst > MAX_SMEM:
        return f"{config.label()}: {worst} B of shared memory (at most {MAX_SMEM})"
    return None


def _copy(
    p: str,
    name: str,
    outer: int,
    inner: int,
    threads: int,
    o_base: str,
    i_base: str,
    o_size: str,
    i_size: str,
    stride: str,
    ptr: str,
    smem: str,
    pitch: int,
) -> str:
    """cp.async statements staging one ``outer x inner`` tile (inner contiguous) into ``smem``[stage]."""
    row = inner // 8
    per = outer * inner // 8 // threads
    return f"""\
#pragma unroll
    for (int l = 0; l < {per}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads};
      const int o = f / {row}, i = (f % {row}) * 8;
      const int64_t go = {o_base} + o, gi = {i_base} + i;
      const bool ok = go < {o_size} && gi < {i_size};
      const unsigned short* src = {ptr} + (ok ? go * {stride} + gi : 0);
      optiml_cp16({smem} + (unsigned)((stage * {outer} + o) * {pitch} + i) * 2u, src, ok);
    }}  // {name}
"""


def kernel(p: str, config: GroupConfig, a_k_major: bool, b_k_major: bool, dtype: str) -> str:
    """The ``{p}_mma_vec`` kernel for ``dtype`` operands (launch with :func:`launch`'s dynamic shared memory)."""
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    stages = int(config.get("stages", 2))
    threads = wm * wn * 32
    wtm, wtn = bm // wm, bn // wn
    mi, ni = wtm // 16, wtn // 8
    # A: [m][k] (k-major) or [k][m]; B: [n][k] (k-major) or [k][n]. Pitches in halves.
    if a_k_major:
        pa, a_outer = bk + PAD, bm
        copy_a = _copy(p, "A", bm, bk, threads, "m0", "k0", "P.M", "P.K", "P.sam", "A", "sa", pa)
        # ldmatrix.x4: lanes 0-15 rows 0-15 at k, lanes 16-31 rows 0-15 at k + 8 -> a0..a3
        a_addr = f"sa + (unsigned)((cur * {bm} + wy * {wtm} + i * 16 + (lane & 15)) * {pa} + ks + (lane >> 4) * 8) * 2u"
        a_op = "optiml_ldsm"
    else:
        pa, a_outer = bm + PAD, bk
        copy_a = _copy(p, "A", bk, bm, threads, "k0", "m0", "P.K", "P.M", "P.sak", "A", "sa", pa)
        # stored [k][m]: matrix j = lane / 8 is (m + (j & 1) * 8, k + (j >> 1) * 8), loaded transposed
        a_addr = (
            f"sa + (unsigned)((cur * {bk} + ks + (lane & 7) + (lane >> 4) * 8) * {pa} + wy * {wtm} + i * 16 + "
            "((lane >> 3) & 1) * 8) * 2u"
        )
        a_op = "optiml_ldsm_t"
    if b_k_major:
        pb = bk + PAD
        copy_b = _copy(p, "B", bn, bk, threads, "n0", "k0", "P.N", "P.K", "P.sbn", "B", "sb", pb)
        # matrices (n j*8.., k), (n j*8.., k+8), (n (j+1)*8.., k), (n (j+1)*8.., k+8) -> b[j][0..1], b[j+1][0..1]
        b_addr = (
            f"sb + (unsigned)((cur * {bn} + wx * {wtn} + j * 8 + (lane & 7) + (lane >> 4) * 8) * {pb} + ks + "
            "((lane >> 3) & 1) * 8) * 2u"
        )
        b_op = "optiml_ldsm"
    else:
        pb = bn + PAD
        copy_b = _copy(p, "B", bk, bn, threads, "k0", "n0", "P.K", "P.N", "P.sbk", "B", "sb", pb)
        # stored [k][n]: matrix q = lane / 8 covers k + (q & 1) * 8, n + (q >> 1) * 8, loaded transposed
        b_addr = (
            f"sb + (unsigned)((cur * {bk} + ks + (lane & 7) + ((lane >> 3) & 1) * 8) * {pb} + wx * {wtn} + j * 8 + "
            "(lane >> 4) * 8) * 2u"
        )
        b_op = "optiml_ldsm_t"
    a_stage = a_outer * pa
    return f"""\
// {bm}x{bn} tile per block on {wm}x{wn} warps ({wtm}x{wtn} each: {mi}x{ni} mma tiles), {bk}-deep slices in a
// {stages}-stage cp.async pipeline; ldmatrix fragments{" (A transposed)" if not a_k_major else ""}\
{" (B transposed)" if not b_k_major else ""}.
__global__ void __launch_bounds__({threads}) {p}_mma_vec(const {p}_prob P) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  const unsigned sa = (unsigned)__cvta_generic_to_shared({p}_smem);
  const unsigned sb = sa + {stages * a_stage * 2}u;
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3, wy = warp / {wn}, wx = warp % {wn};
  int64_t z, tmi, tni, oa, ob;
  {p}_tile(P.tiles_m, P.tiles_n, z, tmi, tni);
  {p}_offsets(P.bsz, P.bsa, P.bsb, z, oa, ob);
  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const unsigned short* __restrict__ A = (const unsigned short*)(P.a + oa);
  const unsigned short* __restrict__ B = (const unsigned short*)(P.b + ob);
{zeroed_accumulators(mi, ni)}
  const int64_t KT = (P.K + {bk - 1}) / {bk};
#pragma unroll
  for (int s = 0; s < {stages - 1}; ++s) {{
    if (s < KT) {{
      const int stage = s;
      const int64_t k0 = (int64_t)s * {bk};
{copy_a}{copy_b}    }}
    optiml_cp_commit();
  }}
  for (int64_t kt = 0; kt < KT; ++kt) {{
    optiml_cp_wait<{stages - 2}>();
    __syncthreads();
    {{
      const int64_t next = kt + {stages - 1};
      if (next < KT) {{
        const int stage = (int)(next % {stages});
        const int64_t k0 = next * {bk};
{copy_a}{copy_b}      }}
      optiml_cp_commit();
    }}
    const int cur = (int)(kt % {stages});
#pragma unroll
    for (int ks = 0; ks < {bk}; ks += 16) {{
      unsigned fa[{mi}][4], fb[{ni}][2];
#pragma unroll
      for (int i = 0; i < {mi}; ++i) {a_op}({a_addr}, fa[i]);
#pragma unroll
      for (int j = 0; j < {ni}; j += 2) {b_op}({b_addr}, &fb[j][0]);  // fb[j], fb[j + 1]: contiguous
#pragma unroll
      for (int i = 0; i < {mi}; ++i)
#pragma unroll
        for (int j = 0; j < {ni}; ++j) {mma_function(dtype)}(acc[i][j], fa[i], fb[j]);
    }}
  }}
  optiml_cp_wait<0>();
{fragment_epilogue(mi, ni, wtm, "const int64_t r = z * P.M + m;", store_element(p, wtn))}}}
"""


def fragment_epilogue(mi: int, ni: int, wtm: int, row: str, element: str) -> str:
    """Loops over a warp's ``mi x ni`` 16x8 accumulator tiles ``acc[i][j][4]`` (``mma.sync`` layout:
    lane ``(g, t4)`` holds rows ``g`` and ``g + 8``, columns ``2 t4`` and ``2 t4 + 1`` of each tile):
    ``row`` runs once per output row ``m`` (known to be below ``P.M``), ``element`` (indented for the
    innermost loop) once per accumulator ``acc[i][j][2 * h + q]``. Shared by every tensor-core kernel."""
    return f"""\
#pragma unroll
  for (int i = 0; i < {mi}; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {{
      const int64_t m = m0 + wy * {wtm} + i * 16 + g + 8 * h;
      if (m >= P.M) continue;
      {row}
#pragma unroll
      for (int j = 0; j < {ni}; ++j)
#pragma unroll
        for (int q = 0; q < 2; ++q) {{
{element}
        }}
    }}
"""


def store_element(p: str, wtn: int) -> str:
    """The GEMM kernels' ``element`` of :func:`fragment_epilogue`: accumulator ``(r, n)`` through the epilogue."""
    return f"""\
          const int64_t n = n0 + wx * {wtn} + j * 8 + 2 * t4 + q;
          if (n < P.N) {p}_epi1(P, r, n, acc[i][j][2 * h + q]);"""


def launch(
    p: str,
    config: GroupConfig,
    fallback: GroupConfig,
    a_k_major: bool,
    b_k_major: bool,
    terms: LaunchTerms,
) -> str:
    """``{p}_launch``: the pipelined kernel when both operands allow 16-byte copies, else the scalar one."""
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    smem = smem_bytes(bm, bn, bk, int(config.get("stages", 2)), a_k_major, b_k_major)
    return tensor_core_launch(p, f"{p}_mma_vec", bm, bn, wm * wn * 32, smem, fallback, terms)


@dataclass(frozen=True)
class LaunchTerms:
    """C terms of a tiled GEMM launch: each operand's leading stride and contiguous length, and the host
    statements setting the epilogue's vector-store flags (``P.vec_out``, ``P.pair_out``)."""

    a_ld: str
    a_len: str
    b_ld: str
    b_len: str
    out_flags: str


def tensor_core_launch(
    p: str,
    kernel: str,
    bm: int,
    bn: int,
    threads: int,
    smem: int,
    fallback: GroupConfig,
    terms: LaunchTerms,
    first: str = "",
) -> str:
    """``{p}_launch`` of a 16-byte tensor-core ``kernel`` (``bm x bn`` tiles, ``smem`` bytes of dynamic
    shared memory) with the scalar ``{p}_mma_any`` build of ``fallback`` for other operands; ``first``:
    host statements tried before ``kernel`` on 16-byte operands, which return when they launch."""
    fbm, fbn, fwm, fwn = (int(fallback.get(k)) for k in ("bm", "bn", "wm", "wn"))
    return f"""\
static int {p}_launch({p}_prob& P, char* ws, cudaStream_t stream) {{
  (void)ws;
  if (P.M <= 0 || P.N <= 0 || P.batch <= 0) return 0;
  {terms.out_flags}
  const bool vec = {p}_aligned(P.a) && {p}_aligned(P.b) && {terms.a_ld} % 8 == 0 && {terms.a_len} % 8 == 0 &&
                   {terms.b_ld} % 8 == 0 && {terms.b_len} % 8 == 0 && {p}_strides_ok(P.bsa, {p}_nbd, 8) &&
                   {p}_strides_ok(P.bsb, {p}_nbd, 8);
  const int64_t tile_m = vec ? {bm} : {fbm}, tile_n = vec ? {bn} : {fbn};
  P.tiles_m = (P.M + tile_m - 1) / tile_m;
  P.tiles_n = (P.N + tile_n - 1) / tile_n;
  const int64_t blocks = P.batch * P.tiles_m * P.tiles_n;
  if (blocks > 2147483647LL) return -4;
  if (vec) {{
{first}    // every call (about a microsecond): no state kept across calls
    const cudaError_t e = cudaFuncSetAttribute({kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});
    if (e != cudaSuccess) return (int)e;
    {kernel}<<<(unsigned)blocks, {threads}, {smem}, stream>>>(P);
  }} else {{
    {p}_mma_any<<<(unsigned)blocks, {fwm * fwn * 32}, 0, stream>>>(P);
  }}
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""
