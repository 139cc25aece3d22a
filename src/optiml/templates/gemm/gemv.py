"""The ``gemv`` variant of the GEMM template: skinny products (``min(M, N) <= 16``)."""

from __future__ import annotations

from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    c_type,
    to_compute,
)
from optiml.templates.gemm.common import (
    MAX_SPLITS,
    SPLIT_MIN_K,
    splitk_code,
)
from optiml.templates.gemm.problem import Problem


def gemv_code(p: str, cfg: GroupConfig, prob: Problem, facts: DeviceFacts) -> str:
    """Device and host code of the ``gemv`` variant: the block decomposition, the two kernels (``dot`` where
    the big operand is k-contiguous, ``axpy`` where it is contiguous along the big side), split-K and the
    launch that chooses between them at run time."""
    threads, rows = int(cfg.get("threads")), int(cfg.get("rows"))
    return (
        _indexing(p, rows)
        + _dot_kernel(p, threads, rows, prob)
        + _axpy_kernel(p, threads, rows, prob)
        + splitk_code(p)
        + _split_plan(p, threads, rows, facts)
        + _launch(p, threads, rows, prob, facts)
    )


def _indexing(p: str, rows: int) -> str:
    """``{p}_finish`` (an output, or a split-K partial) and ``{p}_skinny_block`` (a block's coordinates)."""
    return f"""\
// Output (m, n) of small index j and big index i; split-K slice s writes a partial sum instead.
__device__ __forceinline__ void {p}_finish(const {p}_prob& P, int64_t z, int64_t i, int64_t j, int64_t s, float v) {{
  const int64_t m = P.small_is_m ? j : i, n = P.small_is_m ? i : j;
  const int64_t r = z * P.M + m;
  if (P.splits == 1)
    {p}_epi1(P, r, n, v);
  else
    P.part[(s * P.batch * P.M + r) * P.N + n] = v;
}}
// Block -> (batch z, small-side chunk jc, k slice s, big-side block ib).
__device__ __forceinline__ void {p}_skinny_block(const {p}_prob& P, int64_t per_block, int64_t& z, int64_t& jc,
                                                  int64_t& s, int64_t& ib) {{
  uint32_t bid = blockIdx.x;  // 32-bit: the host keeps grids below 2^31
  const uint32_t nib = (uint32_t)((P.I + per_block - 1) / per_block), ns = (uint32_t)P.splits;
  const uint32_t njc = (uint32_t)((P.J + {rows - 1}) / {rows});
  ib = bid % nib;
  bid /= nib;
  s = bid % ns;
  bid /= ns;
  jc = bid % njc;
  z = bid / njc;
}}
"""


def _vec_dot(rows: int, dtype: str) -> str:
    """The fp32 dot kernel's 16-byte path (``P.vec``), ahead of its scalar loop; empty for other dtypes."""
    vec_dot = ""
    if dtype == "float32":
        # 16-byte loads of the big operand in flight per lane: four with one or two outputs a lane, two
        # with four (more would spill with eight or sixteen)
        depth = 4 if rows <= 2 else 2 if rows <= 4 else 1
        deep = ""
        if depth > 1:
            deep = f"""\
    for (; k + {128 * (depth - 1)} < k_hi; k += {128 * depth}) {{
      float4 x[{depth}];
#pragma unroll
      for (int u = 0; u < {depth}; ++u) x[u] = *(const float4*)(big + k + 128 * u);
#pragma unroll
      for (int jj = 0; jj < {rows}; ++jj) {{
        if (j0 + jj < P.J) {{
#pragma unroll
          for (int u = 0; u < {depth}; ++u) {{
            const float4 y = *(const float4*)(sm + jj * P.ssj + k + 128 * u);
            acc[jj] = fmaf(x[u].x, y.x, acc[jj]);
            acc[jj] = fmaf(x[u].y, y.y, acc[jj]);
            acc[jj] = fmaf(x[u].z, y.z, acc[jj]);
            acc[jj] = fmaf(x[u].w, y.w, acc[jj]);
          }}
        }}
      }}
    }}
"""
        vec_dot = f"""\
  if (P.vec) {{
    int64_t k = k_lo + lane * 4;
{deep}    for (; k < k_hi; k += 128) {{
      const float4 x = *(const float4*)(big + k);
#pragma unroll
      for (int jj = 0; jj < {rows}; ++jj) {{
        if (j0 + jj < P.J) {{
          const float4 y = *(const float4*)(sm + jj * P.ssj + k);
          acc[jj] = fmaf(x.x, y.x, acc[jj]);
          acc[jj] = fmaf(x.y, y.y, acc[jj]);
          acc[jj] = fmaf(x.z, y.z, acc[jj]);
          acc[jj] = fmaf(x.w, y.w, acc[jj]);
        }}
      }}
    }}
  }} else
"""
    return vec_dot


def _dot_kernel(p: str, threads: int, rows: int, prob: Problem) -> str:
    """``{p}_dot``: warps over big indices, lanes over k, parts of a long k range added through shared memory."""
    warps, ctype = threads // 32, c_type(prob.dtype)
    vec_dot = _vec_dot(rows, prob.dtype)

    def load(expr: str) -> str:
        return to_compute(expr, prob.dtype)

    return f"""\
// The big operand is k-contiguous: P.wpi warps per big index, each over one part of the k range (lanes
// over k), a shuffle tree per output, the parts added in order through shared memory.
__global__ void __launch_bounds__({threads}) {p}_dot(const {p}_prob P) {{
  __shared__ float parts[{warps}][{rows}];
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5, part = warp % P.wpi;
  int64_t z, jc, s, ib, obig, osm;
  {p}_skinny_block(P, {warps} / P.wpi, z, jc, s, ib);
  const int64_t i = ib * ({warps} / P.wpi) + warp / P.wpi;
  const bool live = i < P.I;  // no early return: the parts meet at a barrier
  {p}_offsets(P.bsz, P.bbig, P.bsmall, z, obig, osm);
  const int64_t j0 = jc * {rows};
  const {ctype}* __restrict__ big = P.big + obig + (live ? i : 0) * P.sbi;
  const {ctype}* __restrict__ sm = P.small + osm + j0 * P.ssj;
  const int64_t s_lo = s * P.kslice, s_hi = s_lo + P.kslice < P.K ? s_lo + P.kslice : P.K;
  const int64_t chunk = ((s_hi - s_lo + P.wpi - 1) / P.wpi + 127) / 128 * 128;  // parts start 16-byte aligned
  const int64_t k_lo = live ? s_lo + part * chunk : s_hi, k_hi = k_lo + chunk < s_hi ? k_lo + chunk : s_hi;
  float acc[{rows}];
#pragma unroll
  for (int jj = 0; jj < {rows}; ++jj) acc[jj] = 0.f;
{vec_dot}  {{
    for (int64_t k = k_lo + lane; k < k_hi; k += 32) {{
      const float x = {load("big[k]")};
#pragma unroll
      for (int jj = 0; jj < {rows}; ++jj)
        if (j0 + jj < P.J) acc[jj] = fmaf(x, {load("sm[jj * P.ssj + k * P.ssk]")}, acc[jj]);
    }}
  }}
  float v = acc[0];
#pragma unroll
  for (int jj = 0; jj < {rows}; ++jj) {{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[jj] += __shfl_xor_sync(0xffffffffu, acc[jj], o);
    if (lane == jj) v = acc[jj];
  }}
  if (P.wpi > 1) {{
    if (lane < {rows}) parts[warp][lane] = v;
    __syncthreads();
    if (part != 0) return;
    for (int q = 1; q < P.wpi; ++q) v += lane < {rows} ? parts[warp + q][lane] : 0.f;
  }}
  if (live && lane < {rows} && j0 + lane < P.J) {p}_finish(P, z, i, j0 + lane, s, v);
}}
"""


def _axpy_kernel(p: str, threads: int, rows: int, prob: Problem) -> str:
    """``{p}_axpy``: a thread per big index walks k (the big operand is contiguous along the big side)."""
    ctype = c_type(prob.dtype)

    def load(expr: str) -> str:
        return to_compute(expr, prob.dtype)

    return f"""\
// The big operand is contiguous along the big side: a thread per big index walks k (coalesced).
__global__ void __launch_bounds__({threads}) {p}_axpy(const {p}_prob P) {{
  int64_t z, jc, s, ib, obig, osm;
  {p}_skinny_block(P, {threads}, z, jc, s, ib);
  const int64_t i = ib * {threads} + (int64_t)threadIdx.x;
  if (i >= P.I) return;
  {p}_offsets(P.bsz, P.bbig, P.bsmall, z, obig, osm);
  const int64_t j0 = jc * {rows};
  const {ctype}* __restrict__ big = P.big + obig + i * P.sbi;
  const {ctype}* __restrict__ sm = P.small + osm + j0 * P.ssj;
  const int64_t k_lo = s * P.kslice, k_hi = k_lo + P.kslice < P.K ? k_lo + P.kslice : P.K;
  float acc[{rows}];
#pragma unroll
  for (int jj = 0; jj < {rows}; ++jj) acc[jj] = 0.f;
#pragma unroll {4 if rows <= 4 else 1}
  for (int64_t k = k_lo; k < k_hi; ++k) {{
    const float x = {load("big[k * P.sbkk]")};
    const {ctype}* __restrict__ smk = sm + k * P.ssk;
#pragma unroll
    for (int jj = 0; jj < {rows}; ++jj)
      if (j0 + jj < P.J) acc[jj] = fmaf(x, {load("smk[jj * P.ssj]")}, acc[jj]);
  }}
#pragma unroll
  for (int jj = 0; jj < {rows}; ++jj)
    if (j0 + jj < P.J) {p}_finish(P, z, i, j0 + jj, s, acc[jj]);
}}
"""


def _split_plan(p: str, threads: int, rows: int, facts: DeviceFacts) -> str:
    """``{p}_splits`` (slices of K while the blocks would not fill the GPU) and ``{p}_ws_bytes``."""
    return f"""\
// Slices of K when the blocks would not fill the GPU ({facts.sm_count} SMs): 1 = no split.
static int64_t {p}_splits(int64_t I, int64_t J, int64_t K, int64_t batch, int64_t per_block) {{
  const int64_t blocks = batch * ((J + {rows - 1}) / {rows}) * ((I + per_block - 1) / per_block);
  const int64_t want = {2 * facts.sm_count};
  if (blocks >= want || K < {2 * SPLIT_MIN_K}) return 1;
  int64_t s = (want + blocks - 1) / blocks;
  if (s > K / {SPLIT_MIN_K}) s = K / {SPLIT_MIN_K};
  if (s > {MAX_SPLITS}) s = {MAX_SPLITS};
  return s < 1 ? 1 : s;
}}
// Workspace of the partial sums: the most slices any layout takes (a thread per big index: fewest blocks).
static size_t {p}_ws_bytes(int64_t M, int64_t N, int64_t K, int64_t batch) {{
  if (M <= 0 || N <= 0 || batch <= 0) return 0;
  const int64_t s = {p}_splits(M <= N ? N : M, M <= N ? M : N, K, batch, {threads});
  return s > 1 ? (size_t)s * (size_t)(batch * M * N) * sizeof(float) : 0;
}}
"""


def _launch(p: str, threads: int, rows: int, prob: Problem, facts: DeviceFacts) -> str:
    """``{p}_launch``: the big / small sides, warps per big index, the split, the kernel for the layout."""
    warps, resident_blocks = threads // 32, facts.resident_blocks(threads)
    return f"""\
static int {p}_launch({p}_prob& P, char* ws, cudaStream_t stream) {{
  if (P.M <= 0 || P.N <= 0 || P.batch <= 0) return 0;
  P.small_is_m = P.M <= P.N ? 1 : 0;
  if (P.small_is_m) {{
    P.I = P.N; P.J = P.M; P.big = P.b; P.small = P.a;
    P.sbi = P.sbn; P.sbkk = P.sbk; P.ssj = P.sam; P.ssk = P.sak;
    for (int d = 0; d < {p}_nbd; ++d) {{ P.bbig[d] = P.bsb[d]; P.bsmall[d] = P.bsa[d]; }}
  }} else {{
    P.I = P.M; P.J = P.N; P.big = P.a; P.small = P.b;
    P.sbi = P.sam; P.sbkk = P.sak; P.ssj = P.sbn; P.ssk = P.sbk;
    for (int d = 0; d < {p}_nbd; ++d) {{ P.bbig[d] = P.bsa[d]; P.bsmall[d] = P.bsb[d]; }}
  }}
  const bool dot = P.sbkk == 1 || P.K == 1;
  // Warps per big index: split each dot product's k range over more warps while the blocks would not
  // give every SM four rounds of resident blocks (a last partial round idles SMs) and each part keeps
  // at least 512 terms.
  const int64_t njc = (P.J + {rows - 1}) / {rows}, resident = {resident_blocks};
  P.wpi = 1;
  while (dot && P.wpi < {warps} && P.K / (2 * P.wpi) >= 512 &&
         P.batch * njc * ((P.I + {warps} / P.wpi - 1) / ({warps} / P.wpi)) < 4 * resident)
    P.wpi *= 2;
  const int64_t per_block = dot ? {warps} / P.wpi : {threads};
  int64_t splits = {p}_splits(P.I, P.J, P.K, P.batch, per_block);
  int64_t kslice = P.K;
  if (splits > 1) {{
    kslice = ((P.K + splits - 1) / splits + 127) / 128 * 128;
    splits = (P.K + kslice - 1) / kslice;
  }}
  P.splits = splits;
  P.kslice = kslice > 0 ? kslice : 1;
  P.part = (float*)ws;
  P.vec = {"1" if prob.dtype == "float32" else "0"} && dot && P.ssk == 1 && P.K % 4 == 0 && P.sbi % 4 == 0 &&
          P.ssj % 4 == 0 && {p}_aligned(P.big) && {p}_aligned(P.small) && {p}_strides_ok(P.bbig, {p}_nbd, 4) &&
          {p}_strides_ok(P.bsmall, {p}_nbd, 4);
  const int64_t blocks = P.batch * njc * splits * ((P.I + per_block - 1) / per_block);
  if (blocks > 2147483647LL) return -4;
  if (dot)
    {p}_dot<<<(unsigned)blocks, {threads}, 0, stream>>>(P);
  else
    {p}_axpy<<<(unsigned)blocks, {threads}, 0, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return splits > 1 ? {p}_splitk_launch(P, stream) : 0;
}}
"""
