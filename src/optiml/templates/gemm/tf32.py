"""The 3xTF32 tensor-core GEMM kernel (float32 in, float32 out, fp32 accuracy) of the GEMM template.

The ``tf32x3`` variant. Each fp32 operand value ``x`` is split in registers into ``big = tf32(x)``
(round to nearest, 10-bit mantissa) and ``small = tf32(x - big)``; the product is accumulated in fp32
as ``a_small·b_big + a_big·b_small + a_big·b_big`` on ``mma.sync.m16n8k8.tf32`` (the small terms
first; ``a_small·b_small`` is below fp32's rounding). Each product keeps ~21 mantissa bits, so the
products are as accurate as fp32's, not a TF32 downgrade; the template still offers it as a
variant that must verify under the task's tolerance like any other candidate. The MMA unit's own
additions are less exact than fp32's round-to-nearest: accumulating all of K=4096 inside MMAs left a
maximum error of 0.011 against cuBLAS (2.9e-5 of the largest output; the SIMT kernel: 0) on the
H200 (benchmarks/results/gemm_sweep_tf32x3_first.json), past a 1e-2 atol. So each ``bk``-deep slice is
summed by MMAs into a zeroed partial, and the partials are added to the accumulators in fp32.

Tiles arrive by a ``stages``-deep ``cp.async`` pipeline into dynamic shared memory, each operand in
its own memory order: ``[m][k]`` / ``[n][k]`` rows padded by 4 floats when k is contiguous, ``[k][m]``
/ ``[k][n]`` rows padded by 8 otherwise, so that a warp's fragment loads (lane ``l`` reads row
``l / 4`` and column ``l % 4`` of an 8x4 block, or its transpose) hit 32 distinct banks. The 16-byte
build copies four floats at a time; the 4-byte build (unaligned views, batched products with odd
sizes) the same tiles one float at a time, so every shape takes the tensor-core path; a single
product with an odd contiguous dim pads that operand first (:func:`padding`) and runs the 16-byte
build. Copies past the matrix edge are
zero-filled. ``wm × wn`` warps each own a ``(bm/wm) × (bn/wn)`` warp tile of 16x8 MMA tiles; the
epilogue is the GEMM group's (``{p}_epi1``). With too few tiles to fill the GPU and a long K, K is
split as for the ``simt`` variant: each block sums one slice, the partial sums go to the workspace,
and the GEMM template's split-K kernel adds them in slice order (deterministic) before the epilogue.
"""

from __future__ import annotations

from typing import Any

from optiml.templates.base import GroupConfig
from optiml.templates.gemm.mma import LaunchTerms, fragment_epilogue, warp_grid_problem, zeroed_accumulators

MAX_SMEM = 227 * 1024  # dynamic shared memory per block with the opt-in
PAD_K = 4  # floats of padding on a row whose contiguous dim is k
PAD_MN = 8  # ... and on a row whose contiguous dim is m or n
#: Per thread: a 64x64 warp tile (128 accumulators) spills with the split fragments (ptxas, sm_90a)
MAX_ACCUMULATORS = 64


def _pitch(k_major: bool, outer: int, bk: int) -> tuple[int, int]:
    """(rows, floats per row) of one stage of an operand tile ``outer`` (m or n) by ``bk``."""
    return (outer, bk + PAD_K) if k_major else (bk, outer + PAD_MN)


def smem_bytes(bm: int, bn: int, bk: int, stages: int, a_k_major: bool, b_k_major: bool) -> int:
    rows_a, pitch_a = _pitch(a_k_major, bm, bk)
    rows_b, pitch_b = _pitch(b_k_major, bn, bk)
    return stages * (rows_a * pitch_a + rows_b * pitch_b) * 4


def check(config: GroupConfig) -> str | None:
    """Why ``config`` is illegal for the tf32x3 kernel, or None."""
    bm, bn, bk, wm, wn, stages = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn", "stages"))
    grid = warp_grid_problem(config)
    if grid is not None:
        return grid
    if bm % 32 or bn % 32:
        return f"{config.label()}: warp tile {bm}/{wm} x {bn}/{wn} is not a whole number of 16x8 mma tiles"
    threads = wm * wn * 32
    accumulators = (bm // wm) * (bn // wn) // 32
    if accumulators > MAX_ACCUMULATORS:
        return f"{config.label()}: {accumulators} accumulators per thread (registers spill)"
    for outer in (bm, bn):
        if (outer * bk // 4) % threads:
            return f"{config.label()}: a {outer}x{bk} tile is not a whole number of 16-byte copies per thread"
    worst = max(smem_bytes(bm, bn, bk, stages, ak, bk_) for ak in (True, False) for bk_ in (True, False))
    if worst > MAX_SMEM:
        return f"{config.label()}: {worst} B of shared memory (at most {MAX_SMEM})"
    return None


def _copy(p: str, outer: int, inner: int, threads: int, width: int, tile: dict[str, Any], smem: str) -> str:
    """cp.async statements staging one ``outer x inner`` tile (inner contiguous in memory and in shared
    memory) into ``smem``'s current stage, ``width`` floats per copy."""
    per_row = inner // width
    per = outer * inner // width // threads
    copy = "optiml_cp16" if width == 4 else "optiml_cp4"
    return f"""\
#pragma unroll
      for (int l = 0; l < {per}; ++l) {{
        const int f = (int)threadIdx.x + l * {threads};
        const int o = f / {per_row}, i = (f % {per_row}) * {width};
        const int64_t go = {tile["o0"]} + o, gi = {tile["i0"]} + i;
        const bool ok = go < {tile["osize"]} && gi < {tile["isize"]};
        {copy}({smem} + (unsigned)((stage * {outer} + o) * {inner + tile["pad"]} + i) * 4u,
               {tile["ptr"]} + (ok ? go * {tile["stride"]} + gi : 0), ok);
      }}
"""


def split_k_head(p: str, bm: int, bn: int, operands: bool = True) -> str:
    """Device statements of a tiled fp32 GEMM kernel's block (SIMT, 3xTF32 and its warp-group forms): its
    batch ``z``, tile origin ``m0``, ``n0``, split-K slice ``split`` and k range ``[kbeg, kend)``, and
    (``operands``; a kernel fed by TMA reads them through its tensor maps) the operands ``A``, ``B`` of its
    batch."""
    offsets = f"  {p}_offsets(P.bsz, P.bsa, P.bsb, z, oa, ob);\n" if operands else ""
    pointers = "  const float* __restrict__ A = P.a + oa;\n  const float* __restrict__ B = P.b + ob;\n"
    return f"""\
  int64_t z, tmi, tni{", oa, ob" if operands else ""};
  {p}_tile(P.tiles_m, P.tiles_n, z, tmi, tni);
  const int64_t split = z / P.batch;  // the split-K slice (0 without a split)
  z -= split * P.batch;
{offsets}  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const int64_t kbeg = split * P.kslice, kend = kbeg + P.kslice < P.K ? kbeg + P.kslice : P.K;
{pointers if operands else ""}"""


def kernel(p: str, config: GroupConfig, a_k_major: bool, b_k_major: bool, vec: bool) -> str:
    """``{p}_tf32_vec`` (16-byte copies) or ``{p}_tf32_any`` (4-byte copies); launch with :func:`smem_bytes`."""
    bm, bn, bk, wm, wn, stages = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn", "stages"))
    threads = wm * wn * 32
    wtm, wtn = bm // wm, bn // wn
    mi, ni = wtm // 16, wtn // 8
    width = 4 if vec else 1
    rows_a, pitch_a = _pitch(a_k_major, bm, bk)
    _, pitch_b = _pitch(b_k_major, bn, bk)
    if a_k_major:  # A(m, k) at [m][k]
        tile_a: dict[str, Any] = dict(o0="m0", i0="k0", osize="P.M", isize="kend", stride="P.sam", ptr="A", pad=PAD_K)
        copy_a = _copy(p, bm, bk, threads, width, tile_a, "sa")
        a_at = f"As[(cur * {bm} + ({{m}})) * {pitch_a} + ({{k}})]"
    else:  # [k][m]
        tile_a = dict(o0="k0", i0="m0", osize="kend", isize="P.M", stride="P.sak", ptr="A", pad=PAD_MN)
        copy_a = _copy(p, bk, bm, threads, width, tile_a, "sa")
        a_at = f"As[(cur * {bk} + ({{k}})) * {pitch_a} + ({{m}})]"
    if b_k_major:  # B(k, n) at [n][k]
        tile_b: dict[str, Any] = dict(o0="n0", i0="k0", osize="P.N", isize="kend", stride="P.sbn", ptr="B", pad=PAD_K)
        copy_b = _copy(p, bn, bk, threads, width, tile_b, "sb")
        b_at = f"Bs[(cur * {bn} + ({{n}})) * {pitch_b} + ({{k}})]"
    else:  # [k][n]
        tile_b = dict(o0="k0", i0="n0", osize="kend", isize="P.N", stride="P.sbk", ptr="B", pad=PAD_MN)
        copy_b = _copy(p, bk, bn, threads, width, tile_b, "sb")
        b_at = f"Bs[(cur * {bk} + ({{k}})) * {pitch_b} + ({{n}})]"
    a_stage = rows_a * pitch_a
    store = f"""\
          const int64_t n = n0 + wx * {wtn} + j * 8 + 2 * t4 + q;
          if (n >= P.N) continue;
          if (P.splits > 1)  // a partial sum: {p}_splitk_sum adds the slices and applies the epilogue
            P.part[(split * P.batch * P.M + r) * P.N + n] = acc[i][j][2 * h + q];
          else
            {p}_epi1(P, r, n, acc[i][j][2 * h + q]);"""
    name = f"{p}_tf32_{'vec' if vec else 'any'}"
    return f"""\
// 3xTF32: {bm}x{bn} tile per block on {wm}x{wn} warps ({wtm}x{wtn} each: {mi}x{ni} m16n8k8 tiles, three MMAs
// per tile and k8 step), {bk}-deep slices in a {stages}-stage cp.async pipeline of {4 * width}-byte copies.
__global__ void __launch_bounds__({threads}) {name}(const {p}_prob P) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  float* As = (float*){p}_smem;
  float* Bs = As + {stages * a_stage};
  const unsigned sa = (unsigned)__cvta_generic_to_shared(As), sb = (unsigned)__cvta_generic_to_shared(Bs);
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3, wy = warp / {wn}, wx = warp % {wn};
{split_k_head(p, bm, bn)}{zeroed_accumulators(mi, ni)}
  const int64_t KT = (kend - kbeg + {bk - 1}) / {bk};
#pragma unroll
  for (int s = 0; s < {stages - 1}; ++s) {{
    if (s < KT) {{
      const int stage = s;
      const int64_t k0 = kbeg + (int64_t)s * {bk};
{copy_a}{copy_b}    }}
    optiml_cp_commit();
  }}
  for (int64_t kt = 0; kt < KT; ++kt) {{
    optiml_cp_wait<{stages - 2}>();
    __syncthreads();  // slice kt has landed; every warp is done with slice kt - 1, whose stage refills now
    {{
      const int64_t next = kt + {stages - 1};
      if (next < KT) {{
        const int stage = (int)(next % {stages});
        const int64_t k0 = kbeg + next * {bk};
{copy_a}{copy_b}      }}
      optiml_cp_commit();
    }}
    const int cur = (int)(kt % {stages});
{slice_code(p, bk, mi, ni, wtm, wtn, a_at, b_at)}  }}
  optiml_cp_wait<0>();
{fragment_epilogue(mi, ni, wtm, "const int64_t r = z * P.M + m;", store)}}}
"""


def slice_code(
    p: str, bk: int, mi: int, ni: int, wtm: int, wtn: int, a_at: str, b_at: str, single: bool = False
) -> str:
    """One ``bk``-deep slice's multiply for a warp's ``mi x ni`` tiles, summed into a zeroed partial and
    added to ``acc`` in fp32. ``a_at`` / ``b_at`` are shared-memory element expressions with ``{m}``,
    ``{n}`` and ``{k}`` placeholders (shared with the convolution template's tf32x3 kernel). ``single``:
    1xTF32 instead (the convolution template's ``tf32`` variant, at PyTorch's default precision): each operand
    rounded to TF32 to nearest, one MMA a k-step straight into ``acc``."""
    row = f"wy * {wtm} + i * 16 + g"
    col = f"wx * {wtn} + j * 8 + g"
    a_places = ((row, "ks + t4"), (f"{row} + 8", "ks + t4"), (row, "ks + t4 + 4"), (f"{row} + 8", "ks + t4 + 4"))
    if single:
        return _single_slice(bk, mi, ni, col, a_places, a_at, b_at)
    fa = "\n".join(
        f"        optiml_split({a_at.format(m=m, k=k)}, ab[{q}], as_[{q}]);" for q, (m, k) in enumerate(a_places)
    )
    fb = "\n".join(
        f"        optiml_split({b_at.format(n=col, k=k)}, bb[j][{q}], bs[j][{q}]);"
        for q, k in enumerate(("ks + t4", "ks + t4 + 4"))
    )
    return f"""\
    float part[{mi}][{ni}][4];  // this slice's sum: the MMA unit's own additions stay few (see the docstring)
#pragma unroll
    for (int i = 0; i < {mi}; ++i)
#pragma unroll
      for (int j = 0; j < {ni}; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) part[i][j][q] = 0.f;
#pragma unroll
    for (int ks = 0; ks < {bk}; ks += 8) {{
      unsigned bb[{ni}][2], bs[{ni}][2];  // B's fragments split once; A's one row of tiles at a time
#pragma unroll
      for (int j = 0; j < {ni}; ++j) {{
{fb}
      }}
#pragma unroll
      for (int i = 0; i < {mi}; ++i) {{
        unsigned ab[4], as_[4];
{fa}
#pragma unroll
        for (int j = 0; j < {ni}; ++j) {{
          optiml_mma8(part[i][j], as_, bb[j]);
          optiml_mma8(part[i][j], ab, bs[j]);
          optiml_mma8(part[i][j], ab, bb[j]);
        }}
      }}
    }}
#pragma unroll
    for (int i = 0; i < {mi}; ++i)
#pragma unroll
      for (int j = 0; j < {ni}; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] += part[i][j][q];
"""


def _single_slice(
    bk: int, mi: int, ni: int, col: str, a_places: tuple[tuple[str, str], ...], a_at: str, b_at: str
) -> str:
    """:func:`slice_code`'s 1xTF32 form: fragments rounded to TF32 (to nearest, NaN kept), one MMA a k-step."""
    fa = "\n".join(
        f"        ab[{q}] = __float_as_uint(optiml_round_tf32({a_at.format(m=m, k=k)}));"
        for q, (m, k) in enumerate(a_places)
    )
    fb = "\n".join(
        f"        bb[j][{q}] = __float_as_uint(optiml_round_tf32({b_at.format(n=col, k=k)}));"
        for q, k in enumerate(("ks + t4", "ks + t4 + 4"))
    )
    return f"""\
#pragma unroll
    for (int ks = 0; ks < {bk}; ks += 8) {{
      unsigned bb[{ni}][2];  // B's fragments rounded once; A's one row of tiles at a time
#pragma unroll
      for (int j = 0; j < {ni}; ++j) {{
{fb}
      }}
#pragma unroll
      for (int i = 0; i < {mi}; ++i) {{
        unsigned ab[4];
{fa}
#pragma unroll
        for (int j = 0; j < {ni}; ++j) optiml_mma8(acc[i][j], ab, bb[j]);
      }}
    }}
"""


def padding(p: str, a_k_major: bool, b_k_major: bool) -> str:
    """``{p}_pad_bytes`` and ``{p}_pad_copy``: a single product (batch 1) whose operand has an odd
    contiguous dim is copied, its rows padded with zeros to a multiple of 4 floats, into the workspace
    behind the split-K partial sums, so the 16-byte build runs (zeros past k add nothing; rows past m
    or n are never stored). The copy reads each element once: ~1 % of an odd 8205x5921x2949 product."""
    a_rows, a_len = ("M", "K") if a_k_major else ("K", "M")
    b_rows, b_len = ("N", "K") if b_k_major else ("K", "N")
    return f"""\
static inline int64_t {p}_pad4(int64_t v) {{ return (v + 3) / 4 * 4; }}
static inline size_t {p}_round256(size_t v) {{ return (v + 255) / 256 * 256; }}
// Workspace for the padded copies (256-byte aligned, after the partial sums); 0: no operand is padded.
static size_t {p}_pad_bytes(int64_t M, int64_t N, int64_t K, int64_t batch) {{
  if (batch != 1 || M <= 0 || N <= 0 || K <= 0) return 0;
  size_t bytes = 0;
  if ({a_len} % 4) bytes += {p}_round256((size_t){a_rows} * (size_t){p}_pad4({a_len}) * sizeof(float));
  if ({b_len} % 4) bytes += {p}_round256((size_t){b_rows} * (size_t){p}_pad4({b_len}) * sizeof(float));
  return bytes ? bytes + 256 : 0;
}}
// dst[r][c] = src[r * ld + c] for c < cols, 0 up to cols4: rows over blockIdx.y (grid-stride), columns over x.
__global__ void __launch_bounds__(256) {p}_pad_copy(const float* __restrict__ src, float* __restrict__ dst,
                                                   int64_t rows, int64_t cols, int64_t ld, int64_t cols4) {{
  const int64_t c = (int64_t)blockIdx.x * 256 + (int64_t)threadIdx.x;
  if (c >= cols4) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) dst[r * cols4 + c] = c < cols ? src[r * ld + c] : 0.f;
}}
static int {p}_pad_operand(const float*& ptr, int64_t& ld, int64_t rows, int64_t cols, char*& at,
                           cudaStream_t stream) {{
  const int64_t cols4 = {p}_pad4(cols);
  const dim3 grid((unsigned)((cols4 + 255) / 256), (unsigned)(rows < 65535 ? rows : 65535));
  {p}_pad_copy<<<grid, 256, 0, stream>>>(ptr, (float*)at, rows, cols, ld, cols4);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  ptr = (const float*)at;
  ld = cols4;
  at += {p}_round256((size_t)rows * (size_t)cols4 * sizeof(float));
  return 0;
}}
"""


def launch(
    p: str,
    config: GroupConfig,
    a_k_major: bool,
    b_k_major: bool,
    terms: LaunchTerms,
    split_setup: str,
    vec_build: tuple[str, int, int] | None = None,
    first: str = "",
) -> str:
    """``{p}_launch``: the 16-byte build when both operands allow 16-byte copies (after :func:`padding`
    where one has an odd contiguous dim), else the 4-byte one; ``split_setup`` (the GEMM template's)
    sets the grid and the split of K, whose partial sums ``{p}_splitk_launch`` adds. ``vec_build``
    (kernel, threads, dynamic shared memory) replaces the 16-byte build with another kernel of the
    same block tile (the warp-group one); ``first``: host statements tried before it once ``vec`` is
    known, which return when they launch (the TMA kernel)."""
    bm, bn, bk, wm, wn, stages = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn", "stages"))
    smem = smem_bytes(bm, bn, bk, stages, a_k_major, b_k_major)
    a_ld, a_len, b_ld, b_len = terms.a_ld, terms.a_len, terms.b_ld, terms.b_len
    vec_kernel, vec_threads, vec_smem = vec_build or (f"{p}_tf32_vec", wm * wn * 32, smem)
    a_rows = "P.M" if a_k_major else "P.K"
    b_rows = "P.N" if b_k_major else "P.K"
    return f"""\
static int {p}_launch({p}_prob& P, char* ws, cudaStream_t stream) {{
  if (P.M <= 0 || P.N <= 0 || P.batch <= 0) return 0;
  {terms.out_flags}
{split_setup}
  const bool pad = {p}_pad_bytes(P.M, P.N, P.K, P.batch) != 0;
  if (pad) {{  // an odd contiguous dim: padded copies in the workspace
    char* at = ws + {p}_round256({p}_ws_bytes(P.M, P.N, P.K, P.batch));
    if ({a_len} % 4) {{
      const int e = {p}_pad_operand(P.a, {a_ld}, {a_rows}, {a_len}, at, stream);
      if (e != 0) return e;
    }}
    if ({b_len} % 4) {{
      const int e = {p}_pad_operand(P.b, {b_ld}, {b_rows}, {b_len}, at, stream);
      if (e != 0) return e;
    }}
  }}
  const bool padded_a = pad && {a_len} % 4, padded_b = pad && {b_len} % 4;
  const bool vec = {p}_aligned(P.a) && {p}_aligned(P.b) && {a_ld} % 4 == 0 && ({a_len} % 4 == 0 || padded_a) &&
                   {b_ld} % 4 == 0 && ({b_len} % 4 == 0 || padded_b) && {p}_strides_ok(P.bsa, {p}_nbd, 4) &&
                   {p}_strides_ok(P.bsb, {p}_nbd, 4);
{first}  // every call (about a microsecond): no state kept across calls
  const auto kernel = vec ? {vec_kernel} : {p}_tf32_any;
  const int threads = vec ? {vec_threads} : {wm * wn * 32}, smem = vec ? {vec_smem} : {smem};
  {{
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return (int)e;
  }}
  kernel<<<(unsigned)blocks, threads, smem, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return P.splits > 1 ? {p}_splitk_launch(P, stream) : 0;
}}
"""
