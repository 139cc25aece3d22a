"""``cluster_row``: a long row held on chip, split over the blocks of a thread-block cluster (sm_90).

A row kernel whose row is read more than once (softmax: its statistics, then the output; a norm: its sum of
squares, then the scaled row) re-reads the row from memory for each pass once the row is too long for
registers — KernelBench's L2 norm over rows of 65 535 floats (256 KB), hundreds of rows in flight: three passes
over DRAM where one read and one write would do (56 % of the floor, measured). Here each of the cluster's
``cluster`` blocks takes a contiguous segment of the row into its shared memory in :data:`PIECES` bulk copies
(``cp.async.bulk``, the whole segment in flight at once, each piece on its own mbarrier so the first pass starts
as pieces land), every pass reads the segment from there, and each stage's partial results are combined across
the cluster through distributed shared memory (each block reads the others' partials after a cluster barrier, all
in rank order, so every block finishes with the same statistics). A cluster of one is a block a row with the row
in shared memory.

The row leaves once: DRAM traffic is one read of the input and one write of the output. A row that does not
fit (another shape at run time) runs the same kernel reading its segment from global memory on every pass
(``p.cached`` is 0): correct, as slow as the passes it re-reads.

Offered on sm_90 and later, for rows of one inner run (no flat two-run walk, no fused cat) read more than once;
the rule's choice where two blocks an SM hold the segments (:data:`SHARED_BY_TWO`), a seed where one does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from optiml.templates.base import DeviceFacts, KernelCode
from optiml.templates.ptx import INCLUDE as PTX_INCLUDE
from optiml.templates.row.rowprog import itemsize

if TYPE_CHECKING:
    from optiml.templates.row.reduce import Consume, Layout, _Renderer
    from optiml.templates.row.rowprog import Reduction, RowProgram, Scope

#: blocks a row's cluster (8: the portable limit)
CLUSTER_SIZES = (1, 2, 4, 8)
#: bytes of dynamic shared memory a block may take for its segments and partials: sm_90's opt-in limit (227 KB)
#: less 1 KB for the block reductions' static arrays
HELD_BYTES = 226 * 1024
#: segments two blocks an SM hold (one block loads while the other computes and stores): the rule's choice there —
#: level 1's 38/39 (rows of 65 535, 4 blocks of 64 KB) ran 7.34/7.13 ms against the row re-read's 12.78/13.52 ms;
#: held in one block an SM, 34_InstanceNorm (1 MB rows, 8 x 128 KB) gained 1.19x but 23_Softmax (1.5 MB rows,
#: 8 x 196 KB: its exponentials leave the SM's memory idle) lost 0.82x, so there it is a seed (H100, 147e79a,
#: template_sweep_cluster_*_h100_2026-12-07.json)
SHARED_BY_TWO = 100 * 1024
#: bytes of a reduction's partial slot (value, then the arg-index or running max 16 bytes on)
_SLOT = 32
#: bulk copies a segment arrives in, each on its own mbarrier: the first pass starts on a piece as soon as it lands
PIECES = 4


def offered(prog: RowProgram, lay: Layout, facts: DeviceFacts) -> bool:
    """Whether ``cluster_row`` suits the group: clusters exist (sm_90+), the row is one inner run with no fused
    cat, and it is read more than once (a reduction, then another reduction or the full outputs)."""
    arch = int("".join(ch for ch in facts.arch if ch.isdigit()) or 0)
    passes = prog.stages + (1 if prog.full_outputs() else 0)
    return arch >= 90 and not lay.r1 and not prog.cat_dims and bool(prog.reductions) and passes >= 2


def row_bytes(prog: RowProgram, length: int) -> int:
    """Bytes of one row over the leaves read along it (what a cluster holds)."""
    return length * sum(itemsize(leaf.dtype) for leaf in prog.full_leaves())


def cluster_for(prog: RowProgram, length: int, budget: int) -> int:
    """The fewest blocks of a cluster whose segments of a row of ``length`` take at most ``budget`` bytes each
    (:data:`SHARED_BY_TWO`, :data:`HELD_BYTES`); 0 where no cluster's do."""
    total = row_bytes(prog, length)
    for blocks in CLUSTER_SIZES:
        if -(-total // blocks) + 64 * len(prog.full_leaves()) <= budget:
            return blocks
    return 0


def render_cluster(r: _Renderer) -> KernelCode:
    """The ``cluster_row`` kernel of renderer ``r`` (its program, layout and configuration)."""
    pre, prog = r.pre, r.p
    blocks, threads = int(r.cfg.get("cluster", 1)), r.threads
    reds = list(prog.reductions)
    slot = {red.out: n * _SLOT for n, red in enumerate(reds)}
    row = r.row_scope()
    stats: dict[int, str] = {}
    body: list[str] = []
    for s in range(prog.stages):
        stage = r.stage(s)

        def consume(vals: list[str], j: int | None, stage: list[Reduction] = stage) -> list[str]:
            return [r.acc_update(red, v) for red, v in zip(stage, vals, strict=True)]

        body += [line for red in stage for line in r.acc_init(red)]
        body += _cluster_pass(r, [red.source for red in stage], row, stats, consume, first=s == 0)
        body += r.team_reduce(stage)
        body += _combine(r, stage, blocks, pre)
        for red in stage:
            body += r.finish(red, stats, row)
    if r.full_outs:
        body += _cluster_pass(r, list(r.full_outs), row, stats, r.store_full, stores=True)
    body += r.store_outer(row, stats, f"blockIdx.x % {blocks} == 0 && threadIdx.x == 0")
    body.append("optiml_cluster_sync();" if blocks > 1 else "__syncthreads();")

    dims = f"__cluster_dims__({blocks}, 1, 1) " if blocks > 1 else ""
    lines = [
        f"{r.template_head()}\n__global__ void {dims}__launch_bounds__({threads}) {pre}_kernel(const {pre}_P p) {{",
        f"  extern __shared__ __align__(16) unsigned char {pre}_smem[];",
        f"  const int64_t seg_lo = (int64_t)(blockIdx.x % {blocks}) * p.seg;",
        "  const int64_t lo = seg_lo < p.R ? seg_lo : p.R, hi = lo + p.seg < p.R ? lo + p.seg : p.R;",
        "  (void)hi;",
    ]
    for leaf in r.full_leaves:
        i, ctype = leaf.index, prog.leaf_ctype(leaf)
        lines.append(f"  {ctype}* s{i} = ({ctype}*)({pre}_smem + p.so{i}); int64_t h{i} = 0;")
    for red in reds:
        k, t = red.out, r.acc_type(red)
        lines.append(f"  {t}* x{k} = ({t}*)({pre}_smem + p.sx + {slot[k]});")
        second = r.second_accumulator(red)
        if second:
            lines.append(f"  {second[1]}* xi{k} = ({second[1]}*)({pre}_smem + p.sx + {slot[k] + 16});")
    lines += [
        f"  const unsigned bar = (unsigned)__cvta_generic_to_shared({pre}_smem + p.sbar);  // {PIECES}, 8 bytes apart",
        f"  if (threadIdx.x == 0) {{ for (int k = 0; k < {PIECES}; ++k) optiml_mbar_init(bar + 8 * k, 1); "
        "optiml_mbar_init_fence(); }",
        "  __syncthreads();",
        f"  unsigned phase = 0; const int64_t piece = ((p.seg + {PIECES - 1}) / {PIECES} + 15) / 16 * 16;",
        f"  for (int64_t row = (int64_t)(blockIdx.x / {blocks}); row < p.rows; "
        f"row += (int64_t)(gridDim.x / {blocks})) {{",
    ]
    lines += r.row_prologue()
    lines += ["if (p.cached) {", *_fill(r), "}"]
    lines += body
    lines.append("  }\n}")

    struct, fill = r.host_struct(
        ["int64_t seg, sx, sbar; int cached;", *(f"int64_t so{leaf.index};" for leaf in r.full_leaves)]
    )
    scratch = len(reds) * _SLOT + 8 * PIECES
    fill += [
        f"P.seg = ((P.R + {blocks} - 1) / {blocks} + 15) / 16 * 16;",
        f"int64_t {pre}_at = 0;",
    ]
    for leaf in r.full_leaves:
        size = f"(int64_t)sizeof({prog.leaf_ctype(leaf)})"
        fill.append(f"P.so{leaf.index} = {pre}_at; {pre}_at += ((P.seg + 16) * {size} + 15) / 16 * 16;")
    fill += [
        f"P.cached = {pre}_at + {scratch} <= {HELD_BYTES};",
        f"if (!P.cached) {pre}_at = 0;",
        f"P.sx = {pre}_at; P.sbar = {pre}_at + {len(reds) * _SLOT};",
        f"const int {pre}_smem_bytes = (int)({pre}_at + {scratch});",
        f"const int64_t {pre}_clusters = P.rows < 1 ? 1 : P.rows < 2147483647LL / {blocks} ? P.rows : "
        f"2147483647LL / {blocks};",
        f"const unsigned {pre}_grid = (unsigned)({pre}_clusters * {blocks});",
    ]
    host = "\n".join(fill) + "\n" + _launch(r, f"{pre}_kernel", f"{pre}_grid", f"{pre}_smem_bytes")
    return KernelCode(device=struct + "\n" + "\n".join(lines), host=host, includes=(PTX_INCLUDE,))


def _cluster_pass(
    r: _Renderer,
    targets: list,
    row: Scope,
    stats: dict[int, str],
    consume: Consume,
    stores: bool = False,
    first: bool = False,
) -> list[str]:
    """One pass over the block's segment [lo, hi): from shared memory where the row is held, else from global
    memory. Values that do not vary along the row come first (computed once for both). The ``first`` pass of a
    held row takes it piece by piece, each as its copies land."""
    start = len(row.lines)
    r.smem_reads = True
    if first:
        held = [
            f"for (int k = 0; k < {PIECES}; ++k) {{",
            "optiml_mbar_wait(bar + 8 * k, phase);",
            "const int64_t plo = lo + k * piece < hi ? lo + k * piece : hi;",
            f"const int64_t phi = k == {PIECES - 1} || plo + piece > hi ? hi : plo + piece;",
            *r.loops("plo", "phi", targets, row, stats, consume, stores),
            "}",
            "phase ^= 1u;",
        ]
    else:
        held = r.loops("lo", "hi", targets, row, stats, consume, stores)
    r.smem_reads = False
    direct = r.loops("lo", "hi", targets, row, stats, consume, stores)
    needed = row.lines[start:]
    del row.lines[start:]
    return [*needed, "if (p.cached) {", *held, "} else {", *direct, "}"]


def _fill(r: _Renderer) -> list[str]:
    """The block's segment of each leaf read along the row into shared memory: the 16-byte-aligned middle of a
    contiguous leaf in :data:`PIECES` bulk copies, piece ``k`` of every leaf on mbarrier ``k``, the ragged ends
    (and strided or broadcast leaves) by the threads before a barrier. Element ``e`` lands at
    ``s{i}[e - lo + h{i}]``: ``h{i}`` keeps shared memory's alignment that of global memory, so packs read from
    either are aligned alike. Piece ``k`` of a leaf starts ``head{i} + k * piece`` elements in (16-byte aligned),
    so elements ``[k * piece, (k + 1) * piece)`` of the segment have all landed once mbarriers 0 to ``k`` have."""
    prog, threads = r.p, r.threads
    out: list[str] = []
    copies: list[str] = []
    for leaf in r.full_leaves:
        i, ctype = leaf.index, prog.leaf_ctype(leaf)
        out += [
            f"const {ctype}* g{i} = p.l{i} + b_l{i}; int64_t head{i} = 0, body{i} = 0;",
            f"if (p.l{i}_r2 == 1) {{",
            f"  const unsigned mis = (unsigned)((uintptr_t)(g{i} + lo) & 15u); h{i} = mis / sizeof({ctype});",
            f"  head{i} = mis ? (16 - mis) / sizeof({ctype}) : 0; if (head{i} > hi - lo) head{i} = hi - lo;",
            f"  body{i} = (hi - lo - head{i}) * (int64_t)sizeof({ctype}) / 16 * 16 / (int64_t)sizeof({ctype});",
            "} else { h" + str(i) + " = 0; }",
        ]
        size = f"(int64_t)sizeof({ctype})"
        copies += [
            f"const int64_t at{i} = k * piece < body{i} ? k * piece : body{i};",
            f"const int64_t n{i} = k == {PIECES - 1} || at{i} + piece > body{i} ? body{i} - at{i} : piece;",
            f"bytes += n{i} * {size};",
        ]
        issue = (
            f"if (n{i} > 0) optiml_bulk_load((unsigned)__cvta_generic_to_shared(s{i} + h{i} + head{i} + at{i}), "
            f"g{i} + lo + head{i} + at{i}, (unsigned)(n{i} * {size}), bar + 8 * k);"
        )
        copies.append(issue)
    out += [
        "if (threadIdx.x == 0) {",
        "  optiml_proxy_fence();  // the last row's reads of the segment before the copies overwrite it",
        f"  for (int k = 0; k < {PIECES}; ++k) {{",
        "    int64_t bytes = 0;",
        *(f"    {c}" for c in copies if not c.startswith("if (")),
        "    optiml_mbar_expect(bar + 8 * k, (unsigned)bytes);",
        *(f"    {c}" for c in copies if c.startswith("if (")),
        "  }",
        "}",
    ]
    for leaf in r.full_leaves:
        i = leaf.index
        out += [
            f"if (p.l{i}_r2 == 1) {{",
            f"  for (int64_t j = threadIdx.x; j < head{i}; j += {threads}) s{i}[h{i} + j] = g{i}[lo + j];",
            f"  for (int64_t j = head{i} + body{i} + threadIdx.x; j < hi - lo; j += {threads}) "
            f"s{i}[h{i} + j] = g{i}[lo + j];",
            "} else {",
            f"  for (int64_t j = threadIdx.x; j < hi - lo; j += {threads}) s{i}[j] = g{i}[(lo + j) * p.l{i}_r2];",
            "}",
        ]
    out.append("__syncthreads();  // the ends the threads copied (the first pass waits for the pieces)")
    return out


def _combine(r: _Renderer, stage: list[Reduction], blocks: int, pre: str) -> list[str]:
    """The stage's block results (every thread holds its block's) combined over the cluster: each block's
    thread 0 publishes its partials, and after a cluster barrier every thread merges all of them, rank 0 first."""
    if blocks == 1:
        return []
    out = ["if (threadIdx.x == 0) {"]
    for red in stage:
        k = red.out
        second = r.second_accumulator(red)
        out.append(f"  x{k}[0] = a{k};" + (f" xi{k}[0] = {second[0]}{k};" if second else ""))
    out += ["}", "optiml_cluster_sync();"]
    for red in stage:
        k = red.out
        second = r.second_accumulator(red)
        first = f"a{k} = *optiml_cluster_map(x{k}, 0u);"
        if second:
            first += f" {second[0]}{k} = *optiml_cluster_map(xi{k}, 0u);"
        value, extra = f"*optiml_cluster_map(x{k}, q)", f"*optiml_cluster_map(xi{k}, q)" if second else ""
        out += [first, f"for (unsigned q = 1; q < {blocks}u; ++q) {{ {r.merge(red, value, extra)} }}"]
    return out


def _launch(r: _Renderer, kernel: str, grid: str, smem: str) -> str:
    """Both instantiations allowed the dynamic shared memory, then the vector launch where alignment allows."""
    call = f"<<<{grid}, {r.threads}, {smem}, stream>>>(P);"
    widths = [r.vec, 1] if r.vec > 1 else [1]
    allow = "\n".join(
        f"if (cudaFuncSetAttribute({kernel}<{v}>, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem}) != "
        "cudaSuccess) return -3;"
        for v in widths
    )
    launch = f"if ({r.vec_ok()}) {kernel}<{r.vec}>{call}\nelse {kernel}<1>{call}" if r.vec > 1 else f"{kernel}<1>{call}"
    return (
        "{\n"
        + allow
        + "\n"
        + launch
        + "\nconst cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e;\n}"
    )
