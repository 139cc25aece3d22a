"""Permute kernels: ``out = x.permute(perm).contiguous()`` for any rank and any permutation.

Sizes are read at run time, so the host code first *collapses* the permutation with the actual
sizes: size-1 dims are dropped and input dims that stay adjacent and in order under the
permutation are merged (NCHW → NHWC becomes ``[N, C, HW] → (0, 2, 1)``). Then:

* the collapsed permutation keeps the innermost input dim innermost ("copy rows"): a gather
  kernel whose reads and writes are both contiguous runs of the innermost dim;
* otherwise the input's innermost dim ``A`` and the output's innermost dim ``B`` are transposed
  through a shared-memory tile (``tile × (tile + 1)`` against bank conflicts): the block reads
  rows of the tile along ``A`` and writes columns along ``B``, both coalesced. Every other
  collapsed dim is a batch dim that the block decodes from its index, so *every* permutation
  that moves the innermost dim is a batched transpose (not only "two innermost groups with the
  batch outside");
* skinny transposes (``size B < 8`` or ``size A < 4``, where a tile would be mostly empty while the
  gather's reads stay nearly contiguous) and grids too large for 32-bit block indices use the
  gather kernel.

Variants: ``tiled`` (knobs ``tile`` ∈ {32, 64}, ``block_rows`` ∈ {4, 8}; a block has
``tile * block_rows`` threads, each moving ``tile / block_rows`` elements) and ``naive_gather``
(one thread per output element computing its source index; knob ``threads``), the fallback.
Index decoding uses multiply-shift division by run-time invariant divisors (32-bit when the
tensor has fewer than 2^31 elements, 64-bit otherwise). Without fused loaders / storers, elements
move in their storage type (an int64 permute is exact whatever the compute type).

Helpers shared with the pool template: kernels receive a by-value ``<prefix>_io`` holding the ABI
descriptors and the operand pointers *evaluated in host code* (an operand expression may use host
locals such as the assembler's workspace offsets), and device code renders its loads and stores
through :func:`device_context`, whose operands are kernel-local pointers.

Default rule: ``tiled(tile=32, block_rows=8)``.
"""

from __future__ import annotations

from optiml.templates.base import DeviceFacts, GroupConfig, KernelCode, RenderContext, Space, TemplateError
from optiml.templates.descriptors import compact_descriptors
from optiml.templates.group import Group, PermuteSpec, find_node
from optiml.templates.kernel_io import (
    device_context,
    fast_div_code,
    io_bind,
    io_counts,
    io_fill_host,
    io_struct_code,
    launch_check,
)

#: Elements each thread moves in the tiled variant's gather fallback (copy rows, tiny transposes).
COPY_ELEMENTS_PER_THREAD = 4
#: A transpose whose output-innermost side (B) or input-innermost side (A) is below these uses the
#: gather kernel: a tile would be mostly empty, while the gather's warps still read few sectors (a
#: warp's 32 outputs span 32 / B runs of B rows; with A tiny, the strided reads share their lines).
MIN_TRANSPOSE_B = 8
MIN_TRANSPOSE_A = 4


# -- the template ---------------------------------------------------------------------------------
class PermuteTemplate:
    """``x.permute(perm).contiguous()``; see the module docstring for the kernels and the default rule."""

    name = "permute"

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        return Space(
            knobs={
                "tiled": {"tile": (32, 64), "block_rows": (4, 8)},
                "naive_gather": {"threads": (256, 512)},
            }
        )

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        return GroupConfig.of("tiled", tile=32, block_rows=8)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        return [
            self.default(group, facts),
            GroupConfig.of("tiled", tile=64, block_rows=8),
            GroupConfig.of("naive_gather", threads=256),
        ]

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"permute: {reason}")
        node = find_node(group, ("permute",))
        src = node.inputs[0] if node is not None else group.inputs[0]
        ndim = group.graph.type(src).ndim
        given = group.spec.perm if isinstance(group.spec, PermuteSpec) else None
        perm = tuple(int(d) for d in (given if given is not None else node.attr("perm") if node is not None else ()))
        if sorted(perm) != list(range(ndim)):
            raise TemplateError(f"permute: perm {perm} is not a permutation of {ndim} dims")
        if not ctx.inputs or not ctx.outputs:
            raise TemplateError("permute: needs one input and one output")
        if ndim > 8:
            raise TemplateError(f"permute: rank {ndim} > OPTIML_MAX_DIMS")
        p = ctx.prefix
        rank = max(ndim, 1)
        # A plain copy moves elements in their storage type (exact for any dtype); fused element-wise
        # code computes in the compute type.
        fused = ctx.loaders is not None or ctx.storers is not None
        dctx = device_context(ctx, None if fused else ctx.inputs[0].ctype)
        sizes = [f"(int64_t)({ctx.dim(src, d)})" for d in range(ndim)] or ["(int64_t)1"]
        perm_c = ", ".join(str(d) for d in perm) or "0"
        if config.variant == "tiled":
            tile, rows = int(config.get("tile")), int(config.get("block_rows"))
            threads, ept = tile * rows, COPY_ELEMENTS_PER_THREAD
        else:
            tile, rows = 0, 0
            threads, ept = int(config.get("threads")), 1
        kernels = [_gather_code(p, dctx, threads, ept)]
        if tile:
            kernels.append(_transpose_code(p, dctx, tile, rows, max(rank - 2, 1)))
        kernel_code, used = compact_descriptors("\n".join(kernels))
        device = [
            f"// ---- {p}: permute {perm} {config.label()} ----",
            io_struct_code(p, used, ctx),
            fast_div_code(p),
            _collapse_code(p),
            kernel_code,
            _launcher_code(p, rank, threads, ept, tile, rows),
        ]
        host = [
            f"{{  // {p}: permute {perm} {config.label()}",
            *io_fill_host(p, io_counts(group), used, ctx),
            f"  const int64_t {p}_sizes[{rank}] = {{{', '.join(sizes)}}};",
            f"  static const int {p}_perm[{rank}] = {{{perm_c}}};",
            f"  const int {p}_err = {p}_launch({p}_sizes, {p}_perm, {p}_args, stream);",
            f"  if ({p}_err != 0) return {p}_err;",
            "}",
        ]
        return KernelCode(device="\n".join(device), host="\n".join(host) + "\n")


def _collapse_code(p: str) -> str:
    return f"""\
// Drops size-1 dims and merges input dims that stay adjacent and in order under the permutation.
// Returns the collapsed rank m >= 1; csz[0..m) are the collapsed input sizes (input order) and
// output dim k of the collapsed problem is input dim cperm[k].
static int {p}_collapse(const int64_t* sz, const int* perm, int n, int64_t* csz, int* cperm) {{
  int newidx[8], q[8], gs[8], ge[8];
  int64_t ksz[8];
  int nk = 0, nq = 0, ng = 0;
  for (int d = 0; d < n; ++d) {{
    newidx[d] = sz[d] != 1 ? nk : -1;
    if (sz[d] != 1) ksz[nk++] = sz[d];
  }}
  for (int k = 0; k < n; ++k)
    if (newidx[perm[k]] >= 0) q[nq++] = newidx[perm[k]];
  for (int k = 0; k < nq; ++k) {{
    if (ng > 0 && q[k] == ge[ng - 1] + 1) {{
      ge[ng - 1] = q[k];
    }} else {{
      gs[ng] = ge[ng] = q[k];
      ++ng;
    }}
  }}
  for (int g = 0; g < ng; ++g) {{
    int rank = 0;
    for (int h = 0; h < ng; ++h) rank += gs[h] < gs[g];
    int64_t s = 1;
    for (int d = gs[g]; d <= ge[g]; ++d) s *= ksz[d];
    cperm[g] = rank;
    csz[rank] = s;
  }}
  if (ng == 0) {{
    csz[0] = 1;
    cperm[0] = 0;
    ng = 1;
  }}
  return ng;
}}
"""


def _gather_code(p: str, ctx: RenderContext, threads: int, ept: int) -> str:
    ct = ctx.compute_type
    load = ctx.load(0, "(int64_t)src[j]")
    store = ctx.store(0, "(int64_t)q[j]", "v[j]")
    return f"""\
// One output element per (thread, j): decode the output coordinates, read the source element.
// All loads of a thread are issued before its stores (the operands may not be __restrict__).
template <typename U, int M> struct {p}_gparams {{
  {p}_fdiv<U> div[M];  // output dim sizes (collapsed), outermost first
  U sstride[M];        // input stride of each output dim
  U total;
}};
template <typename U, int M>
__global__ void __launch_bounds__({threads}) {p}_gather(const {p}_io args, const {p}_gparams<U, M> P) {{
{io_bind(ctx)}  const U tile = (U)({threads} * {ept});
  for (U base = (U)blockIdx.x * tile; base < P.total; base += (U)gridDim.x * tile) {{
    U q[{ept}], src[{ept}];
    {ct} v[{ept}];
#pragma unroll
    for (int j = 0; j < {ept}; ++j) {{
      q[j] = base + (U)(j * {threads}) + (U)threadIdx.x;
      U rest = q[j], s = 0;
#pragma unroll
      for (int k = M - 1; k > 0; --k) {{
        const U next = P.div[k].div(rest);
        s += (rest - next * P.div[k].d) * P.sstride[k];
        rest = next;
      }}
      src[j] = s + rest * P.sstride[0];
      if (q[j] < P.total) v[j] = {load};
    }}
#pragma unroll
    for (int j = 0; j < {ept}; ++j) {{
      if (q[j] < P.total) {{ {store} }}
    }}
  }}
}}
"""


def _transpose_code(p: str, ctx: RenderContext, tile: int, rows: int, max_batch: int) -> str:
    ct = ctx.compute_type
    load = ctx.load(0, "in_base + i * P.in_sB + ja")
    store = ctx.store(0, "out_base + jb * P.out_sA + ib", f"{p}_tile[tx][ty + k]")
    return f"""\
// Batched transpose of input dims (B, A) -> output dims (A, B), A = input innermost, B = output innermost.
// A block stages a {tile}x{tile} tile (padded to {tile + 1} columns: conflict-free column reads), reading
// rows along A and writing rows along B: both sides coalesced. Tails are masked.
struct {p}_tparams {{
  int64_t SA, SB, in_sB, out_sA;  // sizes of A and B, input stride of B, output stride of A
  {p}_fdiv<uint32_t> tiles_a, tiles_b;
  uint32_t nblocks;
  int nb;  // batch dims (every other collapsed dim)
  {p}_fdiv<uint32_t> bdiv[{max_batch}];
  int64_t bin[{max_batch}], bout[{max_batch}];
}};
__global__ void __launch_bounds__({tile * rows}) {p}_transpose(const {p}_io args, const {p}_tparams P) {{
{io_bind(ctx)}  __shared__ {ct} {p}_tile[{tile}][{tile + 1}];
  const int tx = (int)threadIdx.x % {tile}, ty = (int)threadIdx.x / {tile};
  for (uint32_t blk = blockIdx.x; blk < P.nblocks; blk += gridDim.x) {{
    uint32_t r = blk;
    uint32_t next = P.tiles_a.div(r);
    const int64_t a0 = (int64_t)(r - next * P.tiles_a.d) * {tile};
    r = next;
    next = P.tiles_b.div(r);
    const int64_t b0 = (int64_t)(r - next * P.tiles_b.d) * {tile};
    r = next;
    int64_t in_base = 0, out_base = 0;
#pragma unroll
    for (int k = 0; k < {max_batch}; ++k) {{
      if (k < P.nb) {{
        next = P.bdiv[k].div(r);
        const int64_t c = (int64_t)(r - next * P.bdiv[k].d);
        in_base += c * P.bin[k];
        out_base += c * P.bout[k];
        r = next;
      }}
    }}
    const int64_t ja = a0 + tx;
#pragma unroll
    for (int k = 0; k < {tile}; k += {rows}) {{
      const int64_t i = b0 + ty + k;
      if (i < P.SB && ja < P.SA) {p}_tile[ty + k][tx] = {load};
    }}
    __syncthreads();
    const int64_t ib = b0 + tx;
#pragma unroll
    for (int k = 0; k < {tile}; k += {rows}) {{
      const int64_t jb = a0 + ty + k;
      if (ib < P.SB && jb < P.SA) {{ {store} }}
    }}
    __syncthreads();
  }}
}}
"""


def _launcher_code(p: str, rank: int, threads: int, ept: int, tile: int, rows: int) -> str:
    cases = "\n".join(
        f"    case {m}: return {p}_gather_m<U, {m}>(osz, sst, total, args, stream);" for m in range(1, rank + 1)
    )
    transpose = ""
    if tile:
        transpose = f"""\
  if (cperm[m - 1] != m - 1) {{  // the innermost dim moves: a batched transpose of (B, A)
    const int A = m - 1, B = cperm[m - 1];
    int kA = 0;
    for (int k = 0; k < m; ++k)
      if (cperm[k] == A) kA = k;
    const int64_t SA = csz[A], SB = csz[B];
    const int64_t ta = (SA + {tile - 1}) / {tile}, tb = (SB + {tile - 1}) / {tile};
    const int64_t nblocks = ta * tb * (total / (SA * SB));
    if (SA >= {MIN_TRANSPOSE_A} && SB >= {MIN_TRANSPOSE_B} && nblocks < 2147483647) {{
      {p}_tparams P;
      P.SA = SA;
      P.SB = SB;
      P.in_sB = ist[B];
      P.out_sA = ost[kA];
      {p}_fdiv_init(P.tiles_a, (uint64_t)ta);
      {p}_fdiv_init(P.tiles_b, (uint64_t)tb);
      P.nblocks = (uint32_t)nblocks;
      P.nb = 0;
      for (int i = m - 1; i >= 0; --i) {{  // batch dims, the innermost input dim decoded first
        if (i == A || i == B) continue;
        int k = 0;
        while (cperm[k] != i) ++k;
        {p}_fdiv_init(P.bdiv[P.nb], (uint64_t)csz[i]);
        P.bin[P.nb] = ist[i];
        P.bout[P.nb] = ost[k];
        ++P.nb;
      }}
      {p}_transpose<<<(unsigned)nblocks, {tile * rows}, 0, stream>>>(args, P);
      {launch_check()}
      return 0;
    }}
  }}
"""
    return f"""\
template <typename U, int M>
static int {p}_gather_m(const int64_t* osz, const int64_t* sst, int64_t total, const {p}_io& args,
                        cudaStream_t stream) {{
  {p}_gparams<U, M> P;
  for (int k = 0; k < M; ++k) {{
    {p}_fdiv_init(P.div[k], (uint64_t)osz[k]);
    P.sstride[k] = (U)sst[k];
  }}
  P.total = (U)total;
  int64_t blocks = (total + {threads * ept - 1}) / {threads * ept};
  if (blocks > 2147483647) blocks = 2147483647;
  {p}_gather<U, M><<<(unsigned)blocks, {threads}, 0, stream>>>(args, P);
  {launch_check()}
  return 0;
}}
template <typename U>
static int {p}_gather_any(int m, const int64_t* osz, const int64_t* sst, int64_t total, const {p}_io& args,
                          cudaStream_t stream) {{
  switch (m) {{
{cases}
    default: return -3;
  }}
}}
// Collapses the permutation for these sizes and launches the kernel that fits it.
static int {p}_launch(const int64_t* sizes, const int* perm, const {p}_io& args, cudaStream_t stream) {{
  int64_t csz[8], ist[8], osz[8], ost[8], sst[8];
  int cperm[8];
  for (int d = 0; d < {rank}; ++d)
    if (sizes[d] < 0) return -3;
  const int m = {p}_collapse(sizes, perm, {rank}, csz, cperm);
  int64_t total = 1;
  for (int d = 0; d < m; ++d) total *= csz[d];
  if (total == 0) return 0;
  ist[m - 1] = 1;
  for (int d = m - 2; d >= 0; --d) ist[d] = ist[d + 1] * csz[d + 1];
  for (int k = 0; k < m; ++k) {{
    osz[k] = csz[cperm[k]];
    sst[k] = ist[cperm[k]];
  }}
  ost[m - 1] = 1;
  for (int k = m - 2; k >= 0; --k) ost[k] = ost[k + 1] * osz[k + 1];
{transpose}  if (total < 2147483648LL) return {p}_gather_any<uint32_t>(m, osz, sst, total, args, stream);
  return {p}_gather_any<uint64_t>(m, osz, sst, total, args, stream);
}}
"""
