"""Kernel pieces the GEMM variants share: tile loads, the problem struct, block order, split-K."""

from __future__ import annotations

from dataclasses import dataclass

from optiml.templates.base import (
    DeviceFacts,
)
from optiml.templates.gemm import mma as gemm_mma
from optiml.templates.gemm.problem import Problem, cdiv
from optiml.templates.product.epilogue import Epilogue

STATIC_SMEM = 48 * 1024  # static shared memory per block (no opt-in)
GROUP_M = 8  # tile-rows per group in the block order (L2 reuse of B's tiles)
SPLIT_MIN_K = 256  # each split-K slice covers at least this many k
MAX_SPLITS = 32
MAX_LOADS = 8  # 16-byte global loads per thread per slice and operand (registers of the prefetch)


def pipeline_head(
    regs: str, bk: int, load_a: str, load_b: str, store_a: str, store_b: str, k_begin: str = "0", k_len: str = "P.K"
) -> str:
    """The double-buffered K loop's start, shared by the SIMT and mma kernels: stage slice 0, then in
    each step issue the next slice's global loads before computing on the current one. The loop
    covers ``k_len`` values of k from ``k_begin`` (a split-K slice, or all of K)."""
    return f"""{regs}  const int64_t KT = ({k_len} + {bk - 1}) / {bk};
  int64_t k0 = {k_begin};
  int buf = 0;
  {{
{load_a}
{load_b}
{store_a}
{store_b}
  }}
  __syncthreads();
  for (int64_t kt = 0; kt < KT; ++kt) {{
    buf = (int)(kt & 1);
    if (kt + 1 < KT) {{
      k0 = {k_begin} + (kt + 1) * {bk};
{load_a}
{load_b}
    }}
"""


# -- shared kernel pieces ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Tile:
    """One operand's block tile: ``outer`` rows along its strided dim, ``inner`` along its contiguous one."""

    name: str  # "a" | "b"
    outer: int
    inner: int
    o_base: str
    i_base: str
    o_size: str
    i_size: str
    o_stride: str
    smem: str  # where element (o, i) goes: a format string with {buf}, {o}, {i}
    direct: bool  # smem's contiguous dim is the operand's contiguous dim (16-byte stores)


def chunk_index(threads: int, row: int, width: int, guard: bool) -> str:
    """C statements: chunk ``f`` of this thread's ``l``-th load, its tile row ``o`` and column ``i``."""
    head = f"      const int f = (int)threadIdx.x + l * {threads};\n"
    if threads % row == 0:  # the same column for every l: rows a fixed step apart
        return (head if guard else "") + (
            f"      const int o = (int)threadIdx.x / {row} + l * {threads // row}, "
            f"i = ((int)threadIdx.x % {row}) * {width};"
        )
    return head + f"      const int o = f / {row}, i = (f % {row}) * {width};"


def load_code(t: Tile, threads: int, width: int, vtype: str, zero: str, ptr: str) -> tuple[str, str]:
    """(load into registers, store into shared memory at ``buf``) for tile ``t``.

    With ``width == 1`` (the scalar kernels) the first part is empty and the second loads and stores
    each element directly (no prefetch registers: the scalar fallback trades latency for registers)."""
    chunks = t.outer * t.inner // width
    per = cdiv(chunks, threads)
    guard = chunks % threads != 0
    row = t.inner // width
    r = f"r{t.name}"
    index = chunk_index(threads, row, width, guard)
    fetch = [
        f"      const int64_t go = {t.o_base} + o, gi = {t.i_base} + i;",
        f"      const bool ok = {'f < ' + str(chunks) + ' && ' if guard else ''}go < {t.o_size} && gi < {t.i_size};",
        f"      const {vtype} v = ok ? *(const {vtype}*)({ptr} + go * {t.o_stride} + gi) : {zero};",
    ]
    if width == 1:
        copy = ["#pragma unroll", f"    for (int l = 0; l < {per}; ++l) {{", index, *fetch]
        if guard:
            copy.append(f"      if (f < {chunks})")
        copy += ["      " + t.smem.format(buf="buf", o="o", i="i") + " = v;", "    }"]
        return "", "\n".join(copy)
    load = ["#pragma unroll", f"    for (int l = 0; l < {per}; ++l) {{", index, *fetch, f"      {r}[l] = v;", "    }"]
    store = ["#pragma unroll", f"    for (int l = 0; l < {per}; ++l) {{", index]
    if guard:
        store.append(f"      if (f < {chunks}) {{")
    if t.direct:
        store.append(f"      *({vtype}*)&" + t.smem.format(buf="buf", o="o", i="i") + f" = {r}[l];")
    elif vtype == "float4":
        for q, comp in enumerate("xyzw"):
            store.append("      " + t.smem.format(buf="buf", o="o", i=f"i + {q}") + f" = {r}[l].{comp};")
    else:  # uint4 of 8 halves (bits)
        for q in range(8):
            comp = "xyzw"[q // 2]
            bits = f"({r}[l].{comp} >> 16)" if q % 2 else f"({r}[l].{comp} & 0xffffu)"
            store.append("      " + t.smem.format(buf="buf", o="o", i=f"i + {q}") + f" = (unsigned short){bits};")
    if guard:
        store.append("      }")
    store.append("    }")
    return "\n".join(load), "\n".join(store)


def loads_per_thread(outer: int, inner: int, threads: int, width: int) -> int:
    return cdiv(outer * inner // width, threads)


def common_code(p: str, nb: int) -> str:
    nbd = max(nb, 1)
    return f"""\
// Block -> (batch z, tile-row, tile-column): tiles in groups of {GROUP_M} tile-rows, column by column
// inside a group, so consecutive blocks share B's tiles in L2. 32-bit: the host keeps grids below 2^31.
__device__ __forceinline__ void {p}_tile(int64_t tiles_m, int64_t tiles_n, int64_t& z, int64_t& tm, int64_t& tn) {{
  const uint32_t ntm = (uint32_t)tiles_m, ntn = (uint32_t)tiles_n, per = ntm * ntn;
  uint32_t t = blockIdx.x;
  const uint32_t zz = t / per;
  t -= zz * per;
  const uint32_t width = {GROUP_M}u * ntn;
  const uint32_t first = (t / width) * {GROUP_M}u;
  const uint32_t rows = ntm - first < {GROUP_M}u ? ntm - first : {GROUP_M}u;
  z = zz;
  tm = first + (t % width) % rows;
  tn = (t % width) / rows;
}}
// Element offsets of batch z in two operands (broadcast batch dims have stride 0).
__device__ __forceinline__ void {p}_offsets(const int64_t* bsz, const int64_t* s1, const int64_t* s2, int64_t z,
                                             int64_t& o1, int64_t& o2) {{
  o1 = 0;
  o2 = 0;
  uint32_t zz = (uint32_t)z;
#pragma unroll
  for (int d = {nb - 1}; d >= 0; --d) {{
    const uint32_t c = zz % (uint32_t)bsz[d];
    zz /= (uint32_t)bsz[d];
    o1 += (int64_t)c * s1[d];
    o2 += (int64_t)c * s2[d];
  }}
  (void)bsz; (void)s1; (void)s2; (void)zz;
}}
static inline bool {p}_aligned(const void* ptr) {{ return ((uintptr_t)ptr & 15) == 0; }}
static inline bool {p}_strides_ok(const int64_t* s, int n, int64_t w) {{
  for (int d = 0; d < n; ++d)
    if (s[d] % w) return false;
  return true;
}}
static const int {p}_nbd = {nbd};
"""


def prob_struct(p: str, ctype: str, nb: int, epi: Epilogue) -> str:
    nbd = max(nb, 1)
    fields = "\n".join(epi.fields())
    return f"""\
struct {p}_prob {{
  const {ctype}* a;
  const {ctype}* b;
  int64_t M, N, K, batch;          // C[batch][M][N] = A[batch][M][K] . B[batch][K][N]
  int64_t sam, sak, sbk, sbn;      // element strides of A(m, k) and B(k, n)
  int64_t bsz[{nbd}], bsa[{nbd}], bsb[{nbd}];  // batch dims and the operands' strides along them
  int64_t tiles_m, tiles_n;
  int vec_out;                     // every output 16-byte aligned and N % 4 == 0
  int pair_out;                    // every output 16-byte aligned and N even
  // skinny products (gemv): the small side J against the big side I
  const {ctype}* big;
  const {ctype}* small;
  int64_t I, J, sbi, sbkk, ssj, ssk, bbig[{nbd}], bsmall[{nbd}];
  int small_is_m, vec;
  int wpi;                         // gemv: warps per big index, each summing one part of its k range
  int64_t splits, kslice;
  float* part;                     // split-K partial sums [splits][batch * M][N]
{fields}
}};
"""


def launch_terms(p: str, prob: Problem, epi: Epilogue) -> gemm_mma.LaunchTerms:
    """C terms of a tiled launch: each operand's leading stride and contiguous length, and the
    statements setting ``P.vec_out`` and ``P.pair_out``."""
    a_ld, a_len = ("P.sam", "P.K") if prob.a_k_major else ("P.sak", "P.M")
    b_ld, b_len = ("P.sbn", "P.K") if prob.b_k_major else ("P.sbk", "P.N")
    outs = " && ".join(f"{p}_aligned(P.o{k})" for k, _ in enumerate(epi.group.outputs)) or "true"
    flags = f"P.vec_out = (P.N % 4 == 0 && {outs}) ? 1 : 0;" if epi.vector_outputs() else "P.vec_out = 0;"
    flags += f"\n  P.pair_out = (P.N % 2 == 0 && {outs}) ? 1 : 0;"
    return gemm_mma.LaunchTerms(a_ld, a_len, b_ld, b_len, flags)


def split_plan(p: str, bm: int, bn: int, bk: int, facts: DeviceFacts) -> str:
    """``{p}_splits`` and ``{p}_ws_bytes`` of a ``bm x bn`` tiled kernel: with fewer tiles than twice
    the SMs and a long K, K is split into slices (multiples of ``bk``) summed in the workspace."""
    return f"""\
// Slices of K ({facts.sm_count} SMs): 1 = no split.
static int64_t {p}_splits(int64_t M, int64_t N, int64_t K, int64_t batch) {{
  const int64_t tiles = batch * ((M + {bm - 1}) / {bm}) * ((N + {bn - 1}) / {bn});
  const int64_t want = {2 * facts.sm_count};
  if (tiles >= want || K < {2 * SPLIT_MIN_K}) return 1;
  int64_t s = (want + tiles - 1) / tiles;
  if (s > K / {SPLIT_MIN_K}) s = K / {SPLIT_MIN_K};
  if (s > {MAX_SPLITS}) s = {MAX_SPLITS};
  if (s < 1) return 1;
  const int64_t kslice = ((K + s - 1) / s + {bk - 1}) / {bk} * {bk};
  return (K + kslice - 1) / kslice;
}}
static size_t {p}_ws_bytes(int64_t M, int64_t N, int64_t K, int64_t batch) {{
  if (M <= 0 || N <= 0 || batch <= 0) return 0;
  const int64_t s = {p}_splits(M, N, K, batch);
  return s > 1 ? (size_t)s * (size_t)(batch * M * N) * sizeof(float) : 0;
}}
"""


def split_setup(p: str, bm: int, bn: int, bk: int) -> str:
    """Launch statements: the tile grid, the split of K (``{p}_splits``) and ``blocks``."""
    return f"""\
  P.tiles_m = (P.M + {bm - 1}) / {bm};
  P.tiles_n = (P.N + {bn - 1}) / {bn};
  P.splits = {p}_splits(P.M, P.N, P.K, P.batch);
  P.kslice = P.splits > 1 ? ((P.K + P.splits - 1) / P.splits + {bk - 1}) / {bk} * {bk} : (P.K > 0 ? P.K : 1);
  P.part = (float*)ws;
  const int64_t blocks = P.batch * P.tiles_m * P.tiles_n * P.splits;
  if (blocks > 2147483647LL) return -4;"""


def splitk_code(p: str) -> str:
    """The split-K reduction kernel and its launch, shared by the ``gemv``, ``simt`` and ``tf32x3`` variants."""
    return f"""\
// Split-K: adds the slices' partial sums in slice order (deterministic), then the epilogue.
__global__ void __launch_bounds__(256) {p}_splitk_sum(const {p}_prob P) {{
  const int64_t total = P.batch * P.M * P.N;
  const int64_t e = (int64_t)blockIdx.x * 256 + (int64_t)threadIdx.x;
  if (e >= total) return;
  float v = 0.f;
  for (int64_t s = 0; s < P.splits; ++s) v += P.part[s * total + e];
  {p}_epi1(P, e / P.N, e % P.N, v);
}}
static int {p}_splitk_launch(const {p}_prob& P, cudaStream_t stream) {{
  const int64_t sum_blocks = (P.batch * P.M * P.N + 255) / 256;
  if (sum_blocks > 2147483647LL) return -4;
  {p}_splitk_sum<<<(unsigned)sum_blocks, 256, 0, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""
