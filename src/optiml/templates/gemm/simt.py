"""The register-pipelined GEMM kernels: ``simt`` (fp32) and the scalar build of ``mma`` (fp16 / bf16)."""

from __future__ import annotations

from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
)
from optiml.templates.gemm import mma as gemm_mma
from optiml.templates.gemm import tf32 as gemm_tf32
from optiml.templates.gemm.common import (
    Tile,
    launch_terms,
    load_code,
    loads_per_thread,
    pipeline_head,
    split_plan,
    split_setup,
)
from optiml.templates.gemm.problem import Problem
from optiml.templates.product.epilogue import Epilogue
from optiml.templates.product.mma import mma_slice


# -- simt (fp32) -------------------------------------------------------------------------------------
def simt_kernel(p: str, cfg: GroupConfig, prob: Problem, vec: bool, epi: Epilogue) -> str:
    bm, bn, bk, tm, tn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    tx, ty = bn // tn, bm // tm
    threads = tx * ty
    rm, rn = tm // 4, tn // 4
    pad_a = 4 if prob.a_k_major else 0  # A staged transposed: pad the rows against bank conflicts
    pad_b = 4 if prob.b_k_major else 0
    width = 4 if vec else 1
    vtype, zero = ("float4", "make_float4(0.f, 0.f, 0.f, 0.f)") if vec else ("float", "0.f")
    if prob.a_k_major:  # k is bounded by the end of this block's split-K slice
        ta = Tile("a", bm, bk, "m0", "k0", "P.M", "kend", "P.sam", "As[{buf}][{i}][{o}]", False)
    else:
        ta = Tile("a", bk, bm, "k0", "m0", "kend", "P.M", "P.sak", "As[{buf}][{o}][{i}]", True)
    if prob.b_k_major:
        tb = Tile("b", bn, bk, "n0", "k0", "P.N", "kend", "P.sbn", "Bs[{buf}][{i}][{o}]", False)
    else:
        tb = Tile("b", bk, bn, "k0", "n0", "kend", "P.N", "P.sbk", "Bs[{buf}][{o}][{i}]", True)
    load_a, store_a = load_code(ta, threads, width, vtype, zero, "A")
    load_b, store_b = load_code(tb, threads, width, vtype, zero, "B")
    la = loads_per_thread(ta.outer, ta.inner, threads, width)
    lb = loads_per_thread(tb.outer, tb.inner, threads, width)
    regs = f"  {vtype} ra[{la}], rb[{lb}];\n" if vec else ""
    frag_a = "\n".join(
        f"      {{ const float4 v = *(const float4*)&As[buf][kk][{c * ty * 4} + ty * 4]; "
        f"fa[{c * 4}] = v.x; fa[{c * 4 + 1}] = v.y; fa[{c * 4 + 2}] = v.z; fa[{c * 4 + 3}] = v.w; }}"
        for c in range(rm)
    )
    frag_b = "\n".join(
        f"      {{ const float4 v = *(const float4*)&Bs[buf][kk][{c * tx * 4} + tx * 4]; "
        f"fb[{c * 4}] = v.x; fb[{c * 4 + 1}] = v.y; fb[{c * 4 + 2}] = v.z; fb[{c * 4 + 3}] = v.w; }}"
        for c in range(rn)
    )
    if epi.vector_outputs():
        store = (
            "        if (P.vec_out && n + 3 < P.N) {\n"
            f"          {p}_epi4(P, r, n, acc[i][c * 4], acc[i][c * 4 + 1], acc[i][c * 4 + 2], acc[i][c * 4 + 3]);\n"
            "          continue;\n"
            "        }\n"
        )
    else:
        store = ""
    name = f"{p}_simt_{'vec' if vec else 'any'}"
    return f"""\
// {bm}x{bn} tile per block, {tm}x{tn} per thread, {bk}-deep slices double buffered in shared memory;
// {"16-byte" if vec else "scalar"} global loads.
__global__ void __launch_bounds__({threads}) {name}(const {p}_prob P) {{
  __shared__ __align__(16) float As[2][{bk}][{bm + pad_a}];
  __shared__ __align__(16) float Bs[2][{bk}][{bn + pad_b}];
  const int tx = (int)threadIdx.x % {tx}, ty = (int)threadIdx.x / {tx};
{gemm_tf32.split_k_head(p, bm, bn)}  float acc[{tm}][{tn}];
#pragma unroll
  for (int i = 0; i < {tm}; ++i)
#pragma unroll
    for (int j = 0; j < {tn}; ++j) acc[i][j] = 0.f;
{pipeline_head(regs, bk, load_a, load_b, store_a, store_b, "kbeg", "(kend - kbeg)")}#pragma unroll
    for (int kk = 0; kk < {bk}; ++kk) {{
      float fa[{tm}], fb[{tn}];
{frag_a}
{frag_b}
#pragma unroll
      for (int i = 0; i < {tm}; ++i)
#pragma unroll
        for (int j = 0; j < {tn}; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
    }}
    if (kt + 1 < KT) {{
      buf ^= 1;
{store_a}
{store_b}
    }}
    __syncthreads();
  }}
#pragma unroll
  for (int i = 0; i < {tm}; ++i) {{
    const int64_t m = m0 + (i / 4) * {ty * 4} + ty * 4 + (i % 4);
    if (m >= P.M) continue;
    const int64_t r = z * P.M + m;
#pragma unroll
    for (int c = 0; c < {rn}; ++c) {{
      const int64_t n = n0 + c * {tx * 4} + tx * 4;
      if (P.splits > 1) {{  // a partial sum: {p}_splitk_sum adds the slices and applies the epilogue
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (n + q < P.N) P.part[(split * P.batch * P.M + r) * P.N + n + q] = acc[i][c * 4 + q];
        continue;
      }}
{store}#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (n + q < P.N) {p}_epi1(P, r, n + q, acc[i][c * 4 + q]);
    }}
  }}
}}
"""


def simt_launch(p: str, prob: Problem, cfg: GroupConfig, facts: DeviceFacts, epi: Epilogue) -> str:
    """``{p}_launch`` of the ``simt`` kernels, and ``{p}_ws_bytes``: with fewer tiles than twice the
    SMs and a long K, K is split into slices (each a multiple of ``bk``) whose partial sums go to the
    workspace, added in slice order by ``{p}_splitk_sum``."""
    bm, bn, bk, tm, tn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    threads = (bm // tm) * (bn // tn)
    terms = launch_terms(p, prob, epi)
    a_ld, a_len, b_ld, b_len = terms.a_ld, terms.a_len, terms.b_ld, terms.b_len
    return f"""\
{split_plan(p, bm, bn, bk, facts)}static int {p}_launch({p}_prob& P, char* ws, cudaStream_t stream) {{
  if (P.M <= 0 || P.N <= 0 || P.batch <= 0) return 0;
{split_setup(p, bm, bn, bk)}
  {terms.out_flags}
  const bool vec = {p}_aligned(P.a) && {p}_aligned(P.b) && {a_ld} % 4 == 0 && {a_len} % 4 == 0 &&
                   {b_ld} % 4 == 0 && {b_len} % 4 == 0 && {p}_strides_ok(P.bsa, {p}_nbd, 4) &&
                   {p}_strides_ok(P.bsb, {p}_nbd, 4);
  if (vec)
    {p}_simt_vec<<<(unsigned)blocks, {threads}, 0, stream>>>(P);
  else
    {p}_simt_any<<<(unsigned)blocks, {threads}, 0, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return P.splits > 1 ? {p}_splitk_launch(P, stream) : 0;
}}
"""


def mma_kernel(p: str, cfg: GroupConfig, prob: Problem, vec: bool, epi: Epilogue) -> str:
    bm, bn, bk, wm, wn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    threads = wm * wn * 32
    wtm, wtn = bm // wm, bn // wn
    mi, ni = wtm // 16, wtn // 8
    width = 8 if vec else 1
    vtype, zero = ("uint4", "make_uint4(0u, 0u, 0u, 0u)") if vec else ("unsigned short", "(unsigned short)0")
    pitch = bk + 8
    if prob.a_k_major:
        ta = Tile("a", bm, bk, "m0", "k0", "P.M", "P.K", "P.sam", "As[{buf}][{o}][{i}]", True)
    else:
        ta = Tile("a", bk, bm, "k0", "m0", "P.K", "P.M", "P.sak", "As[{buf}][{i}][{o}]", False)
    if prob.b_k_major:
        tb = Tile("b", bn, bk, "n0", "k0", "P.N", "P.K", "P.sbn", "Bs[{buf}][{o}][{i}]", True)
    else:
        tb = Tile("b", bk, bn, "k0", "n0", "P.K", "P.N", "P.sbk", "Bs[{buf}][{i}][{o}]", False)
    load_a, store_a = load_code(ta, threads, width, vtype, zero, "A")
    load_b, store_b = load_code(tb, threads, width, vtype, zero, "B")
    la = loads_per_thread(ta.outer, ta.inner, threads, width)
    lb = loads_per_thread(tb.outer, tb.inner, threads, width)
    regs = f"  {vtype} ra[{la}], rb[{lb}];\n" if vec else ""
    name = f"{p}_mma_{'vec' if vec else 'any'}"
    return f"""\
// {bm}x{bn} tile per block on {wm}x{wn} warps ({wtm}x{wtn} each: {mi}x{ni} mma tiles), {bk}-deep slices
// double buffered; {"16-byte" if vec else "scalar"} global loads. Shared memory holds raw 16-bit values,
// A as [m][k] and B as [n][k] (k contiguous, rows padded by 8: conflict-free fragment loads).
__global__ void __launch_bounds__({threads}) {name}(const {p}_prob P) {{
  __shared__ __align__(16) unsigned short As[2][{bm}][{pitch}];
  __shared__ __align__(16) unsigned short Bs[2][{bn}][{pitch}];
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3, wy = warp / {wn}, wx = warp % {wn};
  int64_t z, tmi, tni, oa, ob;
  {p}_tile(P.tiles_m, P.tiles_n, z, tmi, tni);
  {p}_offsets(P.bsz, P.bsa, P.bsb, z, oa, ob);
  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const unsigned short* __restrict__ A = (const unsigned short*)(P.a + oa);
  const unsigned short* __restrict__ B = (const unsigned short*)(P.b + ob);
{gemm_mma.zeroed_accumulators(mi, ni)}
{pipeline_head(regs, bk, load_a, load_b, store_a, store_b)}\
{mma_slice(prob.dtype, bk, mi, ni, wtm, wtn)}    if (kt + 1 < KT) {{
      buf ^= 1;
{store_a}
{store_b}
    }}
    __syncthreads();
  }}
{gemm_mma.fragment_epilogue(mi, ni, wtm, "const int64_t r = z * P.M + m;", gemm_mma.store_element(p, wtn))}}}
"""
