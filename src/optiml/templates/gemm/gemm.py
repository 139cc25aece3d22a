"""GEMM template: matmul / bmm / mv / linear / addmm with a fused element-wise epilogue.

A GEMM group (:mod:`optiml.templates.plan`) is one canonical ``matmul`` node — ``torch.matmul``
semantics over stored operands, attrs ``trans_a`` / ``trans_b`` (an operand's last two dims are
swapped in memory) and ``batch`` (output batch dims; each operand's own batch dims broadcast into
them, right-aligned, so a broadcast batch reads the same matrix again with stride 0) — followed
by the element-wise nodes fused into its store. Every size is read at run time: the host code
derives ``M, N, K``, the operand strides and the batch strides from the operands' ABI shapes.

Variants (structural choices):

* ``simt`` (float32 tasks): register-tiled SGEMM in exact fp32 (``fmaf``, no TF32). A block of
  ``(bm/tm)·(bn/tn)`` threads computes a ``bm × bn`` tile, each thread a ``tm × tn`` sub-tile held
  in registers; ``bk``-deep slices of A and B are staged in shared memory, k-major (A transposed on
  the way in when it is k-contiguous, padded against bank conflicts), double buffered: the next
  slice's global loads are in flight (in registers) while the current one is multiplied, one
  barrier per slice. A thread's rows and columns are groups of 4 spread a quarter-tile apart, so
  its shared-memory reads are conflict-free 16-byte loads. Global loads are 16 bytes when the host
  sees 16-byte-aligned operands whose contiguous dims and strides are multiples of 4, else the
  scalar build of the same kernel runs (odd ``M``, ``N``, ``K``, offset views; it copies the next
  slice straight to shared memory after the multiply, no prefetch registers). Blocks walk the
  tiles in groups of 8 tile-rows (L2 reuse); batches are decoded from the block index.
* ``mma`` (float16 / bfloat16 tasks): tensor cores through ``mma.sync.m16n8k16`` (inline PTX)
  with fp32 accumulation. ``wm × wn`` warps per block, each owning a ``(bm/wm) × (bn/wn)`` warp
  tile of 16×8 MMA tiles. The 16-byte build (:mod:`optiml.templates.gemm.mma`) is a ``stages``-deep
  ``cp.async`` pipeline into dynamic shared memory with ``ldmatrix`` fragment loads (``.trans`` for
  an operand whose contiguous dim is not k); the scalar build keeps A as ``[m][k]`` and B as
  ``[n][k]`` in static shared memory, double buffered through registers, on a tile shrunk to fit.
* ``wgmma`` (fp16 / bf16 on sm_90a, A k-major): Hopper warp-group MMA from 128-byte-swizzled shared
  memory through descriptors (:mod:`optiml.templates.gemm.wgmma`); the scalar ``mma`` build when the
  operands do not allow 16-byte copies.
* ``wgmma_tma`` (the same products): the same MMAs fed by TMA copies from a producer warp group through
  mbarrier rings, no block-wide barrier in the k loop (:mod:`optiml.templates.gemm.wgmma_tma`); a batch
  runs the ``wgmma`` kernel of the same tile, unaligned operands the scalar ``mma`` build.
* ``tf32x3`` (float32 tasks, sm_80 and newer): each fp32 value split into two TF32 parts, three
  ``mma.sync.m16n8k8`` per tile (small terms first), each ``bk`` slice summed into a zeroed partial
  and added in fp32: fp32 accuracy on tensor cores (:mod:`optiml.templates.gemm.tf32`). A variant like
  any other: kept only where it verifies under the task's tolerance. A single product with an odd
  contiguous dim pads that operand into the workspace first; K is split as for ``simt``.
* ``tf32x3_wgmma`` (float32 on sm_90a, A k-major): the same 3xTF32 arithmetic on Hopper warp-group
  MMAs, each operand split once when its slice is staged into 128-byte-swizzled big / small tiles
  (:mod:`optiml.templates.gemm.tf32_wgmma`); the ``tf32x3`` 4-byte build of the same tile when the
  operands do not allow 16-byte loads. A seed, not the rule: on the suite the ``mma.sync`` kernel
  measured faster once its split took two integer operations (compute_quality_suite.json).
* ``tf32x3_tma`` (float32 on sm_90a, A k-major): the same arithmetic fed by TMA copies of the raw fp32
  slices from a producer warp group; the consumers split A into registers (the MMA reads A from
  registers) and B once into shared big / small tiles (:mod:`optiml.templates.gemm.tf32_tma`). A
  batch, or operands TMA cannot address, run the ``tf32x3`` builds of the same tile.
* ``gemv`` (any float dtype; the rule for ``min(M, N) <= 16``): the small side (``J``, ``rows`` of it
  per pass) against the big side (``I``). When the big operand is k-contiguous (``x @ W.T`` with a
  small batch, ``A @ v``) one to all of a block's warps own one big index, each over one part of its
  k range (more warps while the blocks would give the SMs fewer than four rounds of resident blocks:
  a last partial round idles SMs), its lanes stride over k (16-byte loads when aligned, up to four in
  flight a lane), a shuffle tree sums each of the ``rows`` dot products and the parts are added in
  order through shared memory; otherwise a thread owns one
  big index and walks k (coalesced across the warp). With too few blocks to fill the GPU, K is split
  into slices whose partial sums go to the workspace and a second kernel adds them in slice order
  (deterministic) and applies the epilogue.

The epilogue runs on each output element in fp32 (``cexpr.pointwise``) before the one rounding to
the stored dtype: the product, bias-like leaves (a leaf of shape ``[N]`` is read at ``n``, one equal
to the output at the output's index, others through strides derived at run time, size-1 dims
broadcast), constants and values recomputed from inputs. Every group output (the product itself,
or any fused value a later kernel reads) is stored at the output's linear index; fp32 outputs use
16-byte stores when aligned. Half-precision code is emitted only for half tasks (the fp32-strict
screening rule rejects it otherwise).

The planner's rule (:meth:`GemmTemplate.default`) on the primary (first) shape set:
``min(M, N) <= 16`` → ``gemv`` (``rows`` = the small side rounded up to a power of two, at most 16);
else float32 on sm_90a with A k-major, a single product → ``tf32x3_tma`` with 4 stages, the first of
128×128, 128×64, 64×64 whose tiles cover every SM, else 64×64 when K is long enough to split; other
float32 → ``tf32x3`` 64×128×32 on 2×2 warps, 4 stages, when TF32 MMAs exist, both operands'
contiguous dims are multiples of 4 (or it is a single product, whose odd operand is padded) and its
tiles cover every SM, else ``simt`` 64×64×16 / 8×8 when
there are at least four 64×64 tiles per SM, 128×128×8 / 8×8 when the 128×128 tiles cover every SM,
128×64×8 / 8×8 when those do, else 64×64×8 / 8×4; half with A k-major on sm_90a → ``wgmma_tma`` (a
single product) or ``wgmma`` (a batch) with 4 stages, the first of 128×256, 128×128, 64×128 whose tiles
cover every SM, else 64×64; other half
products → ``mma`` 128×128×64 on 2×2 warps, 3 stages, when its tiles cover every SM, else 64×64×32
on 2×2, 4 stages (the choices are the fastest measured by ``benchmarks/gemm_sweep.py`` on the H200).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optiml.graph.ir import Graph, Node
from optiml.graph.ops import TRIANGULAR
from optiml.graph.sizes import SizeResolver
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    RenderContext,
    Space,
    TemplateError,
    c_type,
    from_compute,
    to_compute,
)
from optiml.templates.cexpr import arith_type, literal, pointwise
from optiml.templates.gemm import mma as gemm_mma
from optiml.templates.gemm import tf32 as gemm_tf32
from optiml.templates.gemm import tf32_tma as gemm_tf32_tma
from optiml.templates.gemm import tf32_wgmma as gemm_tf32_wgmma
from optiml.templates.gemm import wgmma as gemm_wgmma
from optiml.templates.gemm import wgmma_tma as gemm_wgmma_tma

SIMT_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (32, 64, 128),
    "bn": (32, 64, 128),
    "bk": (8, 16, 32),
    "tm": (4, 8),
    "tn": (4, 8),
}
MMA_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "bk": (32, 64),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
    "stages": (2, 3, 4),
}
WGMMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128, 256), "stages": (2, 3, 4)}
WGMMA_TMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128, 192, 256), "stages": (3, 4, 5, 6)}
TF32_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "bk": (16, 32),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
    "stages": (2, 3, 4),
}
TF32_WGMMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128)}
TF32_TMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128), "stages": (2, 3, 4)}
#: the fastest tf32x3 tile at 4096^3 (a @ b), within 1.5 % of the best for a.T @ b (H200, gemm_sweep_tf32x3.json)
TF32_DEFAULT = GroupConfig.of("tf32x3", bm=64, bn=128, bk=32, wm=2, wn=2, stages=4)
GEMV_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (128, 256), "rows": (1, 2, 4, 8, 16)}
HALF = ("float16", "bfloat16")
SMALL_SIDE = 16  # min(M, N) at most this: the gemv variant is the rule
STATIC_SMEM = 48 * 1024  # static shared memory per block (no opt-in)
GROUP_M = 8  # tile-rows per group in the block order (L2 reuse of B's tiles)
SPLIT_MIN_K = 256  # each split-K slice covers at least this many k
MAX_SPLITS = 32
MAX_LOADS = 8  # 16-byte global loads per thread per slice and operand (registers of the prefetch)
MAX_BATCH_DIMS = 8


@dataclass(frozen=True)
class Traced:
    """The product's sizes at one shape set."""

    batch: int
    m: int
    n: int
    k: int


def _pipeline_head(
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


def _prod(values: tuple[int, ...]) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Problem:
    """The matmul node of a GEMM group: operands, layouts, batch dims and traced sizes."""

    def __init__(self, group: Any, graphs: list[Graph] | None = None) -> None:
        g = group.graph
        if not group.nodes or g.nodes[group.nodes[0]].op != "matmul":
            raise TemplateError(f"gemm: {group.describe()} does not start with a matmul")
        self.node: Node = g.nodes[group.nodes[0]]
        self.a, self.b = self.node.inputs[0], self.node.inputs[1]
        self.out = self.node.outputs[0]
        self.ra, self.rb = g.type(self.a).ndim, g.type(self.b).ndim
        self.trans_a = bool(self.node.attr("trans_a", False)) and self.ra >= 2
        self.trans_b = bool(self.node.attr("trans_b", False)) and self.rb >= 2
        self.nb = int(self.node.attr("batch", 0))
        self.dtype = g.type(self.a).dtype
        if g.type(self.b).dtype != self.dtype:
            raise TemplateError(f"gemm: operands of {g.type(self.a).dtype} and {g.type(self.b).dtype}")
        if self.dtype not in ("float32", *HALF):
            raise TemplateError(f"gemm: no template for {self.dtype} matrices")
        if self.nb > MAX_BATCH_DIMS:
            raise TemplateError(f"gemm: {self.nb} batch dims")
        self.has_n = self.rb >= 2
        # In memory a vector A is a 1 x K row (k-contiguous), a vector B an N=1 column read like B^T.
        self.a_k_major = not self.trans_a  # A's contiguous dim is k
        self.b_k_major = self.trans_b or self.rb == 1  # B's contiguous dim is k
        self.traced = [self._traced(gr) for gr in (graphs or [g])]

    def _traced(self, g: Graph) -> Traced:
        sa, sb, so = g.type(self.a).shape, g.type(self.b).shape, g.type(self.out).shape
        if self.ra >= 2:
            m, k = (sa[-1], sa[-2]) if self.trans_a else (sa[-2], sa[-1])
        else:
            m, k = 1, sa[0]
        n = (sb[-2] if self.trans_b else sb[-1]) if self.rb >= 2 else 1
        return Traced(_prod(so[: self.nb]), m, n, k)

    @property
    def primary(self) -> Traced:
        return self.traced[0]

    def vector_friendly(self) -> bool:
        """At the primary shape, both operands' contiguous dims are multiples of 4 (16-byte fp32 copies)."""
        t = self.primary
        return (t.k if self.a_k_major else t.m) % 4 == 0 and (t.k if self.b_k_major else t.n) % 4 == 0


# -- the epilogue ------------------------------------------------------------------------------------
@dataclass
class _LeafUse:
    slot: int  # index among the struct's leaves
    vid: int  # the leaf value (its shape broadcasts into the frame)
    frame: int  # the value whose shape the leaf is right-aligned to
    input: int  # index in ctx.inputs
    dtype: str
    kind: str  # "full" | "none" | "single" | "axis" | "general": how its row offset is computed
    col: bool  # varies along n
    axis: int = -1  # "axis": the one row dim of the frame the leaf varies along (a per-channel vector)


class Epilogue:
    """C code of the fused element-wise tail, applied to one output element ``(r, n)``.

    ``r`` is the output row (batch index * M + m), ``n`` the column; the product is ``acc``.
    """

    def __init__(self, group: Any, problem: Problem, ctx: RenderContext, sizes: SizeResolver | None) -> None:
        self.group, self.p, self.ctx, self.sizes = group, problem, ctx, sizes
        self.g: Graph = group.graph
        self.graphs = sizes.graphs if sizes is not None else [self.g]
        self.nodes = [self.g.nodes[i] for i in group.nodes[1:]]
        self.inside = {o for i in group.nodes for o in self.g.nodes[i].outputs}
        self.aliases = dict(group.spec.get("aliases", ()))
        self.recomputable = set(group.spec.get("recomputable", ()))
        self.leaves: list[_LeafUse] = []
        self.consts: list[tuple[int, str]] = []
        self.lines: list[str] = []
        self.names: dict[int, str] = {problem.out: "acc"}
        self._cache: dict[tuple[int, int], str] = {}
        self._axes: dict[tuple[Any, int], str] = {}
        for node in self.nodes:
            if node.op == "view":
                continue
            out = node.outputs[0]
            args = [self._expr(i, out) for i in node.inputs]
            types = [arith_type(self.g.type(i).dtype) for i in node.inputs]
            ctype = arith_type(self.g.type(out).dtype)
            if node.op in TRIANGULAR:
                expr = self._triangular(node, args[0], ctype)
            else:
                expr = pointwise(node, args, types, ctype)
            self.lines.append(f"const {ctype} e{out} = {expr};")
            self.names[out] = f"e{out}"
        self.outputs: list[tuple[int, str]] = []  # (output index, C value)
        for k, vid in enumerate(group.outputs):
            name = self.names.get(self._storage(vid))
            if name is None:
                raise TemplateError(f"gemm: output value {vid} is not computed by the kernel")
            self.outputs.append((k, name))

    def _triangular(self, node: Node, x: str, ctype: str) -> str:
        """``triu``/``tril`` of the product's own matrices: element (m, n) of output row r = batch * M + m."""
        out = node.outputs[0]
        if not self.p.has_n or any(g.type(out).shape[-2:] != g.type(self.p.out).shape[-2:] for g in self.graphs):
            raise TemplateError(f"gemm: {node.op} of a value whose last two dims are not the product's (M, N)")
        diagonal = int(node.attr("diagonal", 0))
        keep = ">=" if node.op == "triu" else "<="
        return f"((n - (r % P.M)) {keep} (int64_t)({diagonal}) ? ({x}) : ({ctype})0)"

    def _storage(self, vid: int) -> int:
        while vid in self.aliases:
            vid = self.aliases[vid]
        return vid

    def _varies(self, vid: int) -> bool:
        return len({g.value(vid).const for g in self.graphs}) > 1

    def _expr(self, vid: int, frame: int) -> str:
        value = self.g.value(vid)
        ctype = arith_type(value.type.dtype)
        if value.is_const:
            if self._varies(vid):
                if self.sizes is None:
                    raise TemplateError("gemm: a size-derived constant needs the size resolver")
                if vid not in [c for c, _ in self.consts]:
                    values = tuple(float(g.value(vid).const) for g in self.graphs)  # type: ignore[arg-type]
                    try:
                        self.consts.append((vid, self.sizes.constant(values)))
                    except ValueError as exc:
                        raise TemplateError(f"gemm: {exc}") from None
                return f"(({ctype})P.sc{vid})"
            return literal(value.const, ctype)  # type: ignore[arg-type]
        base = self._storage(vid)
        if base in self.names:
            return self.names[base]
        key = (vid, frame)
        if key in self._cache:
            return self._cache[key]
        producer = self.g.producer(vid)
        if vid in self.recomputable and producer is not None and vid not in self.inside:
            if producer.op == "view":
                raise TemplateError("gemm: a reshaped recomputed value in the epilogue")
            args = [self._expr(i, frame) for i in producer.inputs]
            types = [arith_type(self.g.type(i).dtype) for i in producer.inputs]
            expr = pointwise(producer, args, types, ctype)
        else:
            leaf = self._leaf(vid, frame)
            ptr = f"P.l{leaf.slot}"
            expr = to_compute(f"{ptr}[{self._offset(leaf)}]", leaf.dtype)
        name = f"x{len(self._cache)}"
        self.lines.append(f"const {ctype} {name} = {expr};")
        self._cache[key] = name
        return name

    def _present(self, vid: int) -> tuple[bool, ...]:
        shapes = [g.type(vid).shape for g in self.graphs]
        return tuple(any(s[d] != 1 for s in shapes) for d in range(len(shapes[0])))

    def _leaf(self, vid: int, frame: int) -> _LeafUse:
        slot = None
        for k, v in enumerate(self.group.inputs):
            if v == vid:
                slot = k
                break
        if slot is None:
            for k, v in enumerate(self.group.inputs):
                if self._storage(v) == self._storage(vid):
                    slot = k
                    break
        if slot is None:
            raise TemplateError(f"gemm: epilogue leaf {vid} is not an input of the kernel")
        rl, rf = self.g.type(vid).ndim, self.g.type(frame).ndim
        if rl > rf:
            raise TemplateError(f"gemm: epilogue leaf {vid} has more dims than the output")
        present = self._present(vid)
        has_n = self.p.has_n
        row_dims = rf - (1 if has_n else 0)
        col = has_n and rl >= 1 and present[-1]
        varying_rows = [rf - rl + i for i in range(rl) if rf - rl + i < row_dims and present[i]]
        full = rl == rf and all(g.type(vid).shape == g.type(frame).shape for g in self.graphs)
        axis = -1
        if full:
            kind = "full"
        elif not varying_rows:
            kind = "none"
        elif row_dims == 1:
            kind = "single"
        elif len(varying_rows) == 1:
            kind, axis = "axis", varying_rows[0]
        else:
            kind = "general"
        use = _LeafUse(len(self.leaves), vid, frame, slot, self.g.type(vid).dtype, kind, col, axis)
        self.leaves.append(use)
        return use

    def _offset(self, leaf: _LeafUse) -> str:
        k = leaf.slot
        col = f" + n * P.lcs{k}" if leaf.col else ""
        if leaf.kind == "full":
            return "r * P.N + n"
        if leaf.kind == "none":
            return f"(int64_t)0{col}"
        if leaf.kind == "single":
            return f"r * P.lst{k}[0]{col}"
        if leaf.kind == "axis":
            return f"{self._axis_index(leaf)} * P.lst{k}[{leaf.axis}]{col}"
        return f"{self.ctx.prefix}_roff{k}(P, r){col}"

    def _axis_index(self, leaf: _LeafUse) -> str:
        """The name of row ``r``'s index along ``leaf``'s axis, computed once per (frame, axis): a divide
        and a modulo by the frame's sizes (``lsz``), where the general offset takes one of each per dim.
        Frames of one shape (at every shape set) share it."""
        key = (tuple(g.type(leaf.frame).shape for g in self.graphs), leaf.axis)
        if key not in self._axes:
            k, rd = leaf.slot, self.row_dims(leaf)
            inner = " * ".join(f"P.lsz{k}[{d}]" for d in range(leaf.axis + 1, rd)) or "(int64_t)1"
            name = f"ax{len(self._axes)}"
            self.lines.append(f"const int64_t {name} = {self.ctx.prefix}_axis(r, {inner}, P.lsz{k}[{leaf.axis}]);")
            self._axes[key] = name
        return self._axes[key]

    # -- code --------------------------------------------------------------------------------------
    def row_dims(self, leaf: _LeafUse) -> int:
        return max(self.g.type(leaf.frame).ndim - (1 if self.p.has_n else 0), 1)

    def fields(self) -> list[str]:
        lines = []
        for leaf in self.leaves:
            k, rd = leaf.slot, self.row_dims(leaf)
            lines.append(f"  const {c_type(leaf.dtype)}* l{k};")
            lines.append(f"  int64_t lcs{k}, lsz{k}[{rd}], lst{k}[{rd}];")
        for k, vid in enumerate(self.group.outputs):
            lines.append(f"  {c_type(self.g.type(vid).dtype)}* o{k};")
        for vid, _ in self.consts:
            lines.append(f"  double sc{vid};")
        return lines

    def host(self, p: str) -> list[str]:
        """Statements filling the leaves', outputs' and constants' fields of ``P``."""
        ctx, lines = self.ctx, []
        for leaf in self.leaves:
            k, rd = leaf.slot, self.row_dims(leaf)
            rl, rf = self.g.type(leaf.vid).ndim, self.g.type(leaf.frame).ndim
            lines.append(f"  P.l{k} = {ctx.inp(leaf.input).ptr};")
            lines.append(f"  P.lcs{k} = 0;")
            lines.append(
                f"  for (int {p}_d = 0; {p}_d < {rd}; ++{p}_d) {{ P.lsz{k}[{p}_d] = 1; P.lst{k}[{p}_d] = 0; }}"
            )
            for d in range(min(rd, rf)):
                if not (self.p.has_n and d == rf - 1):
                    lines.append(f"  P.lsz{k}[{d}] = {ctx.dim(leaf.frame, d)};")
            lines.append("  {")
            lines.append("    int64_t st = 1;")
            for i in range(rl - 1, -1, -1):
                d = rf - rl + i
                size = f"(int64_t)({ctx.dim(leaf.vid, i)})"
                if self.p.has_n and d == rf - 1:
                    lines.append(f"    P.lcs{k} = {size} == 1 ? 0 : st;")
                else:
                    lines.append(f"    P.lst{k}[{d}] = {size} == 1 ? 0 : st;")
                lines.append(f"    st *= {size};")
            lines.append("  }")
        for k, _ in enumerate(self.group.outputs):
            lines.append(f"  P.o{k} = {ctx.out(k).ptr};")
        for vid, expr in self.consts:
            lines.append(f"  P.sc{vid} = (double)({expr});")
        return lines

    def vector_outputs(self) -> bool:
        return bool(self.group.outputs) and all(self.g.type(v).dtype == "float32" for v in self.group.outputs)

    def device(self, p: str) -> str:
        parts = []
        if self._axes:
            parts.append(
                f"// (r / inner) % size, in 32 bits where the operands fit (a 64-bit division is ~4x the work).\n"
                f"__device__ __forceinline__ int64_t {p}_axis(int64_t r, int64_t inner, int64_t size) {{\n"
                "  if ((((uint64_t)r | (uint64_t)inner | (uint64_t)size) >> 32) == 0)\n"
                "    return (int64_t)(((uint32_t)r / (uint32_t)inner) % (uint32_t)size);\n"
                "  return (r / inner) % size;\n"
                "}\n"
            )
        for leaf in self.leaves:
            if leaf.kind != "general":
                continue
            k, rd = leaf.slot, self.row_dims(leaf)
            parts.append(
                f"__device__ __forceinline__ int64_t {p}_roff{k}(const {p}_prob& P, int64_t r) {{\n"
                "  int64_t off = 0;\n"
                "#pragma unroll\n"
                f"  for (int d = {rd - 1}; d > 0; --d) {{\n"
                f"    const int64_t c = r % P.lsz{k}[d];\n"
                f"    r /= P.lsz{k}[d];\n"
                f"    off += c * P.lst{k}[d];\n"
                "  }\n"
                f"  return off + r * P.lst{k}[0];\n"
                "}\n"
            )
        body = "\n".join("  " + line for line in self.lines)
        stores = "\n".join(
            f"  P.o{k}[r * P.N + n] = {from_compute(name, self.g.type(self.group.outputs[k]).dtype)};"
            for k, name in self.outputs
        )
        parts.append(
            f"// The fused epilogue of output element (r, n), r = batch * M + m; acc is the product.\n"
            f"__device__ __forceinline__ void {p}_epi1(const {p}_prob& P, const int64_t r, const int64_t n, "
            f"const float acc) {{\n{body}\n{stores}\n}}\n"
        )
        out_types = [c_type(self.g.type(self.group.outputs[k]).dtype) for k, _ in self.outputs]
        pairs = []
        for q in range(2):
            assigns = "\n".join(
                f"    v{k}.v[{q}] = {from_compute(name, self.g.type(self.group.outputs[k]).dtype)};"
                for k, name in self.outputs
            )
            inner = "\n".join("    " + line for line in self.lines)
            head = f"    const int64_t n = n0 + {q};\n    const float acc = a{q};\n    (void)n;"
            pairs.append(f"  {{\n{head}\n{inner}\n{assigns}\n  }}")
        pair_decls = "\n".join(f"  {p}_pair<{t}> v{k};" for (k, _), t in zip(self.outputs, out_types, strict=True))
        pair_stores = "\n".join(
            f"  *({p}_pair<{t}>*)&P.o{k}[r * P.N + n0] = v{k};"
            for (k, _), t in zip(self.outputs, out_types, strict=True)
        )
        parts.append(
            "// Two consecutive columns, each output's pair stored as one word (outputs 16-byte aligned, N even:\n"
            "// host-checked, P.pair_out): half the store instructions of two epi1 calls.\n"
            f"template <typename T>\nstruct {p}_pair {{\n  alignas(2 * sizeof(T)) T v[2];\n}};\n"
            f"__device__ __forceinline__ void {p}_epi2(const {p}_prob& P, const int64_t r, const int64_t n0, "
            "const float a0, const float a1) {\n"
            f"{pair_decls}\n" + "\n".join(pairs) + f"\n{pair_stores}\n}}\n"
        )
        if self.vector_outputs():
            blocks = []
            for q in range(4):
                assigns = "\n".join(f"    v{k}[{q}] = (float)({name});" for k, name in self.outputs)
                inner = "\n".join("    " + line for line in self.lines)
                head = f"    const int64_t n = n0 + {q};\n    const float acc = a{q};\n    (void)n;"
                blocks.append(f"  {{\n{head}\n{inner}\n{assigns}\n  }}")
            decls = "\n".join(f"  float v{k}[4];" for k, _ in self.outputs)
            vstores = "\n".join(
                f"  *(float4*)&P.o{k}[r * P.N + n0] = make_float4(v{k}[0], v{k}[1], v{k}[2], v{k}[3]);"
                for k, _ in self.outputs
            )
            parts.append(
                "// Four consecutive columns, stored 16 bytes at a time (outputs aligned, N % 4 == 0: host-checked).\n"
                f"__device__ __forceinline__ void {p}_epi4(const {p}_prob& P, const int64_t r, const int64_t n0, "
                "const float a0, const float a1, const float a2, const float a3) {\n"
                f"{decls}\n" + "\n".join(blocks) + f"\n{vstores}\n}}\n"
            )
        return "\n".join(parts)


# -- shared kernel pieces ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Tile:
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


def _chunk_index(threads: int, row: int, width: int, guard: bool) -> str:
    """C statements: chunk ``f`` of this thread's ``l``-th load, its tile row ``o`` and column ``i``."""
    head = f"      const int f = (int)threadIdx.x + l * {threads};\n"
    if threads % row == 0:  # the same column for every l: rows a fixed step apart
        return (head if guard else "") + (
            f"      const int o = (int)threadIdx.x / {row} + l * {threads // row}, "
            f"i = ((int)threadIdx.x % {row}) * {width};"
        )
    return head + f"      const int o = f / {row}, i = (f % {row}) * {width};"


def _load_code(t: _Tile, threads: int, width: int, vtype: str, zero: str, ptr: str) -> tuple[str, str]:
    """(load into registers, store into shared memory at ``buf``) for tile ``t``.

    With ``width == 1`` (the scalar kernels) the first part is empty and the second loads and stores
    each element directly (no prefetch registers: the scalar fallback trades latency for registers)."""
    chunks = t.outer * t.inner // width
    per = _cdiv(chunks, threads)
    guard = chunks % threads != 0
    row = t.inner // width
    r = f"r{t.name}"
    index = _chunk_index(threads, row, width, guard)
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


def _loads_per_thread(outer: int, inner: int, threads: int, width: int) -> int:
    return _cdiv(outer * inner // width, threads)


def _common_code(p: str, nb: int) -> str:
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


def _prob_struct(p: str, ctype: str, nb: int, epi: Epilogue) -> str:
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


# -- simt (fp32) -------------------------------------------------------------------------------------
def _simt_kernel(p: str, cfg: GroupConfig, prob: Problem, vec: bool, epi: Epilogue) -> str:
    bm, bn, bk, tm, tn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    tx, ty = bn // tn, bm // tm
    threads = tx * ty
    rm, rn = tm // 4, tn // 4
    pad_a = 4 if prob.a_k_major else 0  # A staged transposed: pad the rows against bank conflicts
    pad_b = 4 if prob.b_k_major else 0
    width = 4 if vec else 1
    vtype, zero = ("float4", "make_float4(0.f, 0.f, 0.f, 0.f)") if vec else ("float", "0.f")
    if prob.a_k_major:  # k is bounded by the end of this block's split-K slice
        ta = _Tile("a", bm, bk, "m0", "k0", "P.M", "kend", "P.sam", "As[{buf}][{i}][{o}]", False)
    else:
        ta = _Tile("a", bk, bm, "k0", "m0", "kend", "P.M", "P.sak", "As[{buf}][{o}][{i}]", True)
    if prob.b_k_major:
        tb = _Tile("b", bn, bk, "n0", "k0", "P.N", "kend", "P.sbn", "Bs[{buf}][{i}][{o}]", False)
    else:
        tb = _Tile("b", bk, bn, "k0", "n0", "kend", "P.N", "P.sbk", "Bs[{buf}][{o}][{i}]", True)
    load_a, store_a = _load_code(ta, threads, width, vtype, zero, "A")
    load_b, store_b = _load_code(tb, threads, width, vtype, zero, "B")
    la = _loads_per_thread(ta.outer, ta.inner, threads, width)
    lb = _loads_per_thread(tb.outer, tb.inner, threads, width)
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
{_pipeline_head(regs, bk, load_a, load_b, store_a, store_b, "kbeg", "(kend - kbeg)")}#pragma unroll
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


def _launch_terms(p: str, prob: Problem, epi: Epilogue) -> gemm_mma.LaunchTerms:
    """C terms of a tiled launch: each operand's leading stride and contiguous length, and the
    statements setting ``P.vec_out`` and ``P.pair_out``."""
    a_ld, a_len = ("P.sam", "P.K") if prob.a_k_major else ("P.sak", "P.M")
    b_ld, b_len = ("P.sbn", "P.K") if prob.b_k_major else ("P.sbk", "P.N")
    outs = " && ".join(f"{p}_aligned(P.o{k})" for k, _ in enumerate(epi.group.outputs)) or "true"
    flags = f"P.vec_out = (P.N % 4 == 0 && {outs}) ? 1 : 0;" if epi.vector_outputs() else "P.vec_out = 0;"
    flags += f"\n  P.pair_out = (P.N % 2 == 0 && {outs}) ? 1 : 0;"
    return gemm_mma.LaunchTerms(a_ld, a_len, b_ld, b_len, flags)


def _simt_launch(p: str, prob: Problem, cfg: GroupConfig, facts: DeviceFacts, epi: Epilogue) -> str:
    """``{p}_launch`` of the ``simt`` kernels, and ``{p}_ws_bytes``: with fewer tiles than twice the
    SMs and a long K, K is split into slices (each a multiple of ``bk``) whose partial sums go to the
    workspace, added in slice order by ``{p}_splitk_sum``."""
    bm, bn, bk, tm, tn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    threads = (bm // tm) * (bn // tn)
    terms = _launch_terms(p, prob, epi)
    a_ld, a_len, b_ld, b_len = terms.a_ld, terms.a_len, terms.b_ld, terms.b_len
    return f"""\
{_split_plan(p, bm, bn, bk, facts)}static int {p}_launch({p}_prob& P, char* ws, cudaStream_t stream) {{
  if (P.M <= 0 || P.N <= 0 || P.batch <= 0) return 0;
{_split_setup(p, bm, bn, bk)}
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


def _split_plan(p: str, bm: int, bn: int, bk: int, facts: DeviceFacts) -> str:
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


def _split_setup(p: str, bm: int, bn: int, bk: int) -> str:
    """Launch statements: the tile grid, the split of K (``{p}_splits``) and ``blocks``."""
    return f"""\
  P.tiles_m = (P.M + {bm - 1}) / {bm};
  P.tiles_n = (P.N + {bn - 1}) / {bn};
  P.splits = {p}_splits(P.M, P.N, P.K, P.batch);
  P.kslice = P.splits > 1 ? ((P.K + P.splits - 1) / P.splits + {bk - 1}) / {bk} * {bk} : (P.K > 0 ? P.K : 1);
  P.part = (float*)ws;
  const int64_t blocks = P.batch * P.tiles_m * P.tiles_n * P.splits;
  if (blocks > 2147483647LL) return -4;"""


# -- mma (fp16 / bf16 tensor cores) ------------------------------------------------------------------
def _mma_helper(p: str, dtype: str) -> str:
    kind = "bf16" if dtype == "bfloat16" else "f16"
    return f"""\
// D = A . B + D for one 16x8x16 tile (A row-major, B column-major fragments; fp32 accumulation). Not
// volatile: a pure register operation the compiler may schedule freely.
__device__ __forceinline__ void {p}_mma(float* c, const unsigned* a, const unsigned* b) {{
  asm("mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, "
               "{{%8, %9}}, {{%0, %1, %2, %3}};\\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}}
"""


def _mma_kernel(p: str, cfg: GroupConfig, prob: Problem, vec: bool, epi: Epilogue) -> str:
    bm, bn, bk, wm, wn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    threads = wm * wn * 32
    wtm, wtn = bm // wm, bn // wn
    mi, ni = wtm // 16, wtn // 8
    width = 8 if vec else 1
    vtype, zero = ("uint4", "make_uint4(0u, 0u, 0u, 0u)") if vec else ("unsigned short", "(unsigned short)0")
    pitch = bk + 8
    if prob.a_k_major:
        ta = _Tile("a", bm, bk, "m0", "k0", "P.M", "P.K", "P.sam", "As[{buf}][{o}][{i}]", True)
    else:
        ta = _Tile("a", bk, bm, "k0", "m0", "P.K", "P.M", "P.sak", "As[{buf}][{i}][{o}]", False)
    if prob.b_k_major:
        tb = _Tile("b", bn, bk, "n0", "k0", "P.N", "P.K", "P.sbn", "Bs[{buf}][{o}][{i}]", True)
    else:
        tb = _Tile("b", bk, bn, "k0", "n0", "P.K", "P.N", "P.sbk", "Bs[{buf}][{i}][{o}]", False)
    load_a, store_a = _load_code(ta, threads, width, vtype, zero, "A")
    load_b, store_b = _load_code(tb, threads, width, vtype, zero, "B")
    la = _loads_per_thread(ta.outer, ta.inner, threads, width)
    lb = _loads_per_thread(tb.outer, tb.inner, threads, width)
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
{_pipeline_head(regs, bk, load_a, load_b, store_a, store_b)}{_mma_slice(p, bk, mi, ni, wtm, wtn)}    if (kt + 1 < KT) {{
      buf ^= 1;
{store_a}
{store_b}
    }}
    __syncthreads();
  }}
{gemm_mma.fragment_epilogue(mi, ni, wtm, "const int64_t r = z * P.M + m;", gemm_mma.store_element(p, wtn))}}}
"""


def _mma_slice(p: str, bk: int, mi: int, ni: int, wtm: int, wtn: int) -> str:
    """The scalar mma kernels' multiply of one ``bk``-deep slice: 32-bit fragment loads from shared
    ``As[buf][m][k]`` / ``Bs[buf][n][k]`` and ``mi x ni`` mma tiles per warp (shared with conv)."""
    return f"""\
#pragma unroll
    for (int ks = 0; ks < {bk}; ks += 16) {{
      unsigned fa[{mi}][4], fb[{ni}][2];
#pragma unroll
      for (int i = 0; i < {mi}; ++i) {{
        const int row = wy * {wtm} + i * 16 + g;
        fa[i][0] = *(const unsigned*)&As[buf][row][ks + 2 * t4];
        fa[i][1] = *(const unsigned*)&As[buf][row + 8][ks + 2 * t4];
        fa[i][2] = *(const unsigned*)&As[buf][row][ks + 8 + 2 * t4];
        fa[i][3] = *(const unsigned*)&As[buf][row + 8][ks + 8 + 2 * t4];
      }}
#pragma unroll
      for (int j = 0; j < {ni}; ++j) {{
        const int col = wx * {wtn} + j * 8 + g;
        fb[j][0] = *(const unsigned*)&Bs[buf][col][ks + 2 * t4];
        fb[j][1] = *(const unsigned*)&Bs[buf][col][ks + 8 + 2 * t4];
      }}
#pragma unroll
      for (int i = 0; i < {mi}; ++i)
#pragma unroll
        for (int j = 0; j < {ni}; ++j) {p}_mma(acc[i][j], fa[i], fb[j]);
    }}
"""


# -- gemv (skinny products) --------------------------------------------------------------------------
def _splitk_code(p: str) -> str:
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


def _gemv_code(p: str, cfg: GroupConfig, prob: Problem, facts: DeviceFacts) -> str:
    threads, rows = int(cfg.get("threads")), int(cfg.get("rows"))
    warps = threads // 32
    resident_blocks = facts.resident_blocks(threads)
    ctype = c_type(prob.dtype)

    def load(expr: str) -> str:
        return to_compute(expr, prob.dtype)

    vec_dot = ""
    if prob.dtype == "float32":
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
{_splitk_code(p)}// Slices of K when the blocks would not fill the GPU ({facts.sm_count} SMs): 1 = no split.
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


def _tf32_units(p: str, config: GroupConfig, prob: Problem, epi: Epilogue, facts: DeviceFacts) -> list[str]:
    """Device code of the 3xTF32 variants: the 16-byte build (``mma.sync``, the warp-group kernel of
    ``tf32x3_wgmma``, or the TMA kernel of ``tf32x3_tma`` ahead of the ``mma.sync`` one), the ``mma.sync``
    4-byte build of the same block tile, split-K, padding, launch."""
    tiles = config if config.variant == "tf32x3" else gemm_tf32_wgmma.fallback_config(config)
    bm, bn, bk = (int(tiles.get(k)) for k in ("bm", "bn", "bk"))
    units = [gemm_mma.helpers(p), gemm_tf32.helpers(p)]
    vec_build, first = None, ""
    if config.variant == "tf32x3_wgmma":
        units += [
            gemm_wgmma.descriptor_helper(p),
            gemm_wgmma.fence_helpers(p),
            gemm_tf32_wgmma.helpers(p, bn),
            gemm_tf32_wgmma.kernel(p, config, prob.a_k_major, prob.b_k_major),
        ]
        vec_build = (f"{p}_tf32w_vec", gemm_tf32_wgmma.threads(config), gemm_tf32_wgmma.smem_bytes(bm, bn))
    elif config.variant == "tf32x3_tma":  # tried first; the mma.sync 16-byte build stays for what TMA cannot take
        units += [
            gemm_wgmma.descriptor_helper(p),
            gemm_wgmma.fence_helpers(p),
            gemm_wgmma_tma.helpers(p, prob.dtype),
            gemm_tf32_tma.helpers(p, bn),
            gemm_tf32_tma.kernel(p, config, prob.b_k_major),
        ]
        first = gemm_tf32_tma.tma_launch(p, config, prob.b_k_major)
    if vec_build is None:
        units.append(gemm_tf32.kernel(p, tiles, prob.a_k_major, prob.b_k_major, vec=True))
    split_setup = _split_setup(p, bm, bn, bk)
    return [
        *units,
        gemm_tf32.kernel(p, tiles, prob.a_k_major, prob.b_k_major, vec=False),
        _splitk_code(p),
        _split_plan(p, bm, bn, bk, facts),
        gemm_tf32.padding(p, prob.a_k_major, prob.b_k_major),
        gemm_tf32.launch(
            p,
            tiles,
            prob.a_k_major,
            prob.b_k_major,
            _launch_terms(p, prob, epi),
            split_setup,
            vec_build=vec_build,
            first=first,
        ),
    ]


# -- the template ------------------------------------------------------------------------------------
def _simt_check(config: GroupConfig) -> str | None:
    bm, bn, bk, tm, tn = (int(config.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    threads = (bm // tm) * (bn // tn)
    if threads % 32 or not 32 <= threads <= 256:
        return f"{config.label()}: {threads} threads per block (a multiple of 32, 32 to 256)"
    smem = 2 * bk * (bm + 4 + bn + 4) * 4
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    for outer, inner in ((bm, bk), (bk, bn)):
        if _loads_per_thread(outer, inner, threads, 4) > MAX_LOADS:
            return f"{config.label()}: more than {MAX_LOADS} 16-byte loads per thread and slice (registers)"
    return None


def _mma_check(config: GroupConfig) -> str | None:
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    grid = gemm_mma.warp_grid_problem(config)
    if grid is not None:
        return grid
    threads = wm * wn * 32
    tiles = (bm // wm // 16) * (bn // wn // 8)
    if tiles > 16:
        return f"{config.label()}: {tiles} mma tiles per warp ({tiles * 4} accumulators: registers spill)"
    smem = 2 * (bm + bn) * (bk + 8) * 2
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    for outer, inner in ((bm, bk), (bn, bk)):
        if _loads_per_thread(outer, inner, threads, 8) > MAX_LOADS:
            return f"{config.label()}: more than {MAX_LOADS} 16-byte loads per thread and slice (registers)"
    return None


def _space_check(config: GroupConfig) -> str | None:
    if config.variant == "simt":
        return _simt_check(config)
    if config.variant == "mma":
        return gemm_mma.check(config)
    if config.variant == "wgmma":
        return gemm_wgmma.check(config)
    if config.variant == "wgmma_tma":
        return gemm_wgmma_tma.check(config) or gemm_wgmma.check(config)
    if config.variant == "tf32x3":
        return gemm_tf32.check(config)
    if config.variant == "tf32x3_wgmma":
        return gemm_tf32_wgmma.check(config)
    if config.variant == "tf32x3_tma":
        return gemm_tf32_tma.check(config)
    return None


def tf32_wgmma_seed(b_k_major: bool) -> GroupConfig:
    """The warp-group 3xTF32 seed for A k-major (a seed, not the rule: the mma.sync kernel measured
    faster on the suite): 64x64 when B is k-major too (``x @ W.T``), 128x128 when B is transposed on
    its way into shared memory (``a @ b``), the fastest of each in gemm_sweep_tf32x3_wgmma.json."""
    return GroupConfig.of("tf32x3_wgmma", bm=64 if b_k_major else 128, bn=64 if b_k_major else 128)


def tensor_cores_take_tf32(facts: DeviceFacts) -> bool:
    """TF32 ``mma.sync`` needs sm_80 or newer."""
    digits = "".join(ch for ch in facts.arch if ch.isdigit())
    return bool(digits) and int(digits) >= 80


class GemmTemplate:
    """matmul + fused element-wise epilogue (see the module docstring for variants and the rule)."""

    name = "gemm"

    def __init__(self, sizes: SizeResolver | None = None) -> None:
        self.sizes = sizes

    def _problem(self, group: Any) -> Problem:
        return Problem(group, self.sizes.graphs if self.sizes is not None else None)

    def space(self, group: Any, facts: DeviceFacts) -> Space:
        prob = self._problem(group)
        knobs: dict[str, dict[str, tuple[Any, ...]]] = {}
        if prob.dtype in HALF:
            knobs["mma"] = dict(MMA_KNOBS)
            if prob.a_k_major and facts.arch == "sm_90a":  # warp-group MMA: Hopper, A read k-major
                knobs["wgmma"] = dict(WGMMA_KNOBS)
                knobs["wgmma_tma"] = dict(WGMMA_TMA_KNOBS)
        else:
            knobs["simt"] = dict(SIMT_KNOBS)
            if tensor_cores_take_tf32(facts):
                knobs["tf32x3"] = dict(TF32_KNOBS)
            if facts.arch == "sm_90a":  # TF32 warp-group MMA: Hopper
                knobs["tf32x3_wgmma"] = dict(TF32_WGMMA_KNOBS)
                if prob.a_k_major:  # A's fragments are read from a k-major raw slice
                    knobs["tf32x3_tma"] = dict(TF32_TMA_KNOBS)
        knobs["gemv"] = dict(GEMV_KNOBS)
        return Space(knobs=knobs, check=_space_check)

    def default(self, group: Any, facts: DeviceFacts) -> GroupConfig:
        """min(M, N) <= 16 → gemv; fp32 → simt by tile coverage; half → mma (module docstring)."""
        prob = self._problem(group)
        t = prob.primary
        small = min(t.m, t.n)
        if small <= SMALL_SIDE:
            rows = next(r for r in GEMV_KNOBS["rows"] if r >= small)
            return GroupConfig.of("gemv", threads=256, rows=rows)
        sms = max(1, facts.sm_count)
        if prob.dtype in HALF and prob.a_k_major and facts.arch == "sm_90a":
            # TMA copies and a producer warp group: 0.87-0.88x cuBLAS at 4096^3 where the cp.async kernel of the
            # same tile reaches 0.60-0.69x (gemm_sweep_wgmma_tma.json); a batch runs the latter, so it is named
            variant = "wgmma_tma" if t.batch == 1 else "wgmma"
            for bm, bn in ((128, 256), (128, 128), (64, 128)):
                if t.batch * _cdiv(t.m, bm) * _cdiv(t.n, bn) >= sms:
                    return GroupConfig.of(variant, bm=bm, bn=bn, stages=4)
            return GroupConfig.of(variant, bm=64, bn=64, stages=4)
        if prob.dtype in HALF:
            if t.batch * _cdiv(t.m, 128) * _cdiv(t.n, 128) >= sms:  # best at 4096^3 on the H200 (gemm_sweep)
                return GroupConfig.of("mma", bm=128, bn=128, bk=64, wm=2, wn=2, stages=3)
            return GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=4)
        if facts.arch == "sm_90a" and prob.a_k_major and t.batch == 1:
            # 3xTF32 fed by TMA: 1.82-1.98x exact-fp32 cuBLAS at 4096^3 where the mma.sync kernel reaches 1.16x
            # (gemm_sweep_tf32x3_tma.json); a single product (an odd operand is padded first)
            for bm, bn in ((128, 128), (128, 64), (64, 64)):
                if _cdiv(t.m, bm) * _cdiv(t.n, bn) >= sms:
                    return GroupConfig.of("tf32x3_tma", bm=bm, bn=bn, stages=4)
            if t.k >= 2 * SPLIT_MIN_K:  # few tiles, a long K: split-K fills the GPU
                return GroupConfig.of("tf32x3_tma", bm=64, bn=64, stages=4)
        if (
            tensor_cores_take_tf32(facts)
            and (prob.vector_friendly() or t.batch == 1)  # a single product pads an odd operand
            and t.batch * _cdiv(t.m, 64) * _cdiv(t.n, 128) >= sms
        ):
            return TF32_DEFAULT  # 1.04-1.06x cuBLAS SGEMM at 4096^3 on the H200 (gemm_sweep_tf32x3.json)
        if t.batch * _cdiv(t.m, 64) * _cdiv(t.n, 64) >= 4 * sms:  # best at 4096^3 on the H200 (gemm_sweep)
            return GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8)
        if t.batch * _cdiv(t.m, 128) * _cdiv(t.n, 128) >= sms:
            return GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)
        if t.batch * _cdiv(t.m, 128) * _cdiv(t.n, 64) >= sms:
            return GroupConfig.of("simt", bm=128, bn=64, bk=8, tm=8, tn=8)
        return GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)

    def seeds(self, group: Any, facts: DeviceFacts) -> list[GroupConfig]:
        prob = self._problem(group)
        first = self.default(group, facts)
        if prob.dtype in HALF:
            wgmma = "wgmma" in self.space(group, facts).variants
            tma = wgmma and prob.primary.batch == 1  # a batch runs the wgmma kernel of a TMA configuration
            tiled = [
                *([GroupConfig.of("wgmma_tma", bm=128, bn=256, stages=4)] if tma else []),
                *([GroupConfig.of("wgmma_tma", bm=128, bn=128, stages=4)] if tma else []),
                *([GroupConfig.of("wgmma", bm=128, bn=256, stages=4)] if wgmma else []),
                *([GroupConfig.of("wgmma", bm=128, bn=128, stages=4)] if wgmma and not tma else []),
                *([GroupConfig.of("wgmma", bm=64, bn=64, stages=4)] if wgmma else []),
                GroupConfig.of("mma", bm=128, bn=128, bk=64, wm=2, wn=2, stages=3),
                GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=2, stages=4),
                GroupConfig.of("mma", bm=128, bn=256, bk=32, wm=2, wn=4, stages=3),
                GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=4),
            ]
        else:
            variants = self.space(group, facts).variants
            tf32 = "tf32x3" in variants
            tma = "tf32x3_tma" in variants and prob.primary.batch == 1
            tiled = [
                *([GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=4)] if tma else []),
                *([TF32_DEFAULT, GroupConfig.of("tf32x3", bm=128, bn=64, bk=32, wm=2, wn=2, stages=2)] if tf32 else []),
                *([tf32_wgmma_seed(prob.b_k_major)] if "tf32x3_wgmma" in variants and prob.a_k_major else []),
                GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8),
                GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8),
                GroupConfig.of("simt", bm=128, bn=64, bk=16, tm=8, tn=8),
                GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4),
                GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=4, tn=4),
            ]
        if first.variant == "gemv":
            rows = int(first.get("rows"))
            others = [GroupConfig.of("gemv", threads=128, rows=rows)]
            if rows > 1:
                others.append(GroupConfig.of("gemv", threads=256, rows=rows // 2))
            others.append(tiled[-1])
        else:
            others = tiled
        seeds = [first]
        for config in others:
            if config not in seeds:
                seeds.append(config)
        return seeds[:4]

    def render(self, group: Any, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"gemm: {reason}")
        if ctx.loaders is not None or ctx.storers is not None:
            raise TemplateError("gemm: fused loaders / storers are not supported (the epilogue is the group's)")
        prob = self._problem(group)
        p = ctx.prefix
        epi = Epilogue(group, prob, ctx, self.sizes)
        ctype = c_type(prob.dtype)
        device = [
            f"// ---- {p}: {group.describe()} {config.label()} ----",
            _prob_struct(p, ctype, prob.nb, epi),
            _common_code(p, prob.nb),
            epi.device(p),
        ]
        includes: tuple[str, ...] = ()
        if prob.dtype == "bfloat16":
            includes = ("<cuda_bf16.h>",)
        elif prob.dtype == "float16":
            includes = ("<cuda_fp16.h>",)
        workspace = "0"
        if config.variant == "simt":
            device += [
                _simt_kernel(p, config, prob, True, epi),
                _simt_kernel(p, config, prob, False, epi),
                _splitk_code(p),
                _simt_launch(p, prob, config, ctx.facts, epi),
            ]
        elif config.variant == "mma":
            fallback = gemm_mma.fallback_config(config)
            if (why := _mma_check(fallback)) is not None:
                raise TemplateError(f"gemm: scalar fallback {why}")
            device += [
                _mma_helper(p, prob.dtype),
                gemm_mma.helpers(p),
                gemm_mma.kernel(p, config, prob.a_k_major, prob.b_k_major),
                _mma_kernel(p, fallback, prob, False, epi),
                gemm_mma.launch(p, config, fallback, prob.a_k_major, prob.b_k_major, _launch_terms(p, prob, epi)),
            ]
        elif config.variant == "wgmma":
            fallback = gemm_mma.fallback_config(config)
            if (why := _mma_check(fallback)) is not None:
                raise TemplateError(f"gemm: scalar fallback {why}")
            device += [
                _mma_helper(p, prob.dtype),
                gemm_mma.helpers(p),
                gemm_wgmma.helpers(p, prob.dtype, int(config.get("bn")), prob.b_k_major),
                gemm_wgmma.kernel(p, config, prob.b_k_major),
                _mma_kernel(p, fallback, prob, False, epi),
                gemm_wgmma.launch(p, config, fallback, _launch_terms(p, prob, epi)),
            ]
        elif config.variant == "wgmma_tma":
            fallback = gemm_mma.fallback_config(config)
            if (why := _mma_check(fallback)) is not None:
                raise TemplateError(f"gemm: scalar fallback {why}")
            includes += ('"optiml_tma.h"',)
            device += [
                _mma_helper(p, prob.dtype),
                gemm_mma.helpers(p),
                gemm_wgmma.helpers(p, prob.dtype, int(config.get("bn")), prob.b_k_major),
                gemm_wgmma_tma.helpers(p, prob.dtype),
                gemm_wgmma.kernel(p, config, prob.b_k_major),
                gemm_wgmma_tma.kernel(p, config, prob.b_k_major),
                _mma_kernel(p, fallback, prob, False, epi),
                gemm_wgmma_tma.launch(p, config, fallback, prob.b_k_major, _launch_terms(p, prob, epi)),
            ]
        elif config.variant in ("tf32x3", "tf32x3_wgmma", "tf32x3_tma"):
            if config.variant == "tf32x3_tma":
                includes += ('"optiml_tma.h"',)
            device += _tf32_units(p, config, prob, epi, ctx.facts)
        else:
            device.append(_gemv_code(p, config, prob, ctx.facts))
        host = [f"{{  // {p}: {group.describe()} {config.label()}", f"  {p}_prob P = {{}};"]
        host += self._shape_host(p, group, prob, ctx)
        host += epi.host(p)
        host += [
            f"  const int {p}_err = {p}_launch(P, {ctx.workspace}, stream);",
            f"  if ({p}_err != 0) return {p}_err;",
            "}",
        ]
        if config.variant in ("gemv", "simt", "tf32x3", "tf32x3_wgmma", "tf32x3_tma"):
            m, n, k, batch = self._size_exprs(prob, ctx)
            workspace = f"{p}_ws_bytes({m}, {n}, {k}, {batch})"
            if config.variant.startswith("tf32x3"):  # the partial sums, then the padded copies (256-byte aligned)
                workspace = (
                    f"{p}_round256({p}_ws_bytes({m}, {n}, {k}, {batch})) + {p}_pad_bytes({m}, {n}, {k}, {batch})"
                )
        return KernelCode(
            device="\n".join(device), host="\n".join(host) + "\n", workspace_bytes=workspace, includes=includes
        )

    # -- host code: sizes and strides from the operands' shapes -----------------------------------------
    @staticmethod
    def _dims(vid: int, rank: int, ctx: RenderContext) -> list[str]:
        return [f"(int64_t)({ctx.dim(vid, d)})" for d in range(rank)]

    def _size_exprs(self, prob: Problem, ctx: RenderContext) -> tuple[str, str, str, str]:
        """C expressions of M, N, K and the batch count over the operands' dims (inputs only)."""
        da, db = self._dims(prob.a, prob.ra, ctx), self._dims(prob.b, prob.rb, ctx)
        if prob.ra >= 2:
            m, k = (da[-1], da[-2]) if prob.trans_a else (da[-2], da[-1])
        else:
            m, k = "(int64_t)1", da[0]
        n = (db[-2] if prob.trans_b else db[-1]) if prob.rb >= 2 else "(int64_t)1"
        terms = []
        for d in range(prob.nb):
            sa, sb = self._batch_dim(da, prob.ra, prob.nb, d), self._batch_dim(db, prob.rb, prob.nb, d)
            terms.append(f"({sa} != 1 ? {sa} : {sb})")
        batch = "(" + " * ".join(["(int64_t)1", *terms]) + ")"
        return m, n, k, batch

    @staticmethod
    def _batch_dim(dims: list[str], rank: int, nb: int, d: int) -> str:
        own = max(rank - 2, 0)
        i = d - (nb - own)
        return dims[i] if i >= 0 else "(int64_t)1"

    def _shape_host(self, p: str, group: Any, prob: Problem, ctx: RenderContext) -> list[str]:
        ia, ib = self._slot(group, prob.a), self._slot(group, prob.b)
        m, n, k, batch = self._size_exprs(prob, ctx)
        da, db = self._dims(prob.a, prob.ra, ctx), self._dims(prob.b, prob.rb, ctx)
        lines = [
            f"  P.a = {ctx.inp(ia).ptr};",
            f"  P.b = {ctx.inp(ib).ptr};",
            f"  P.M = {m};",
            f"  P.N = {n};",
            f"  P.K = {k};",
            f"  P.batch = {batch};",
        ]
        # A(m, k): row-major [M][K] (or a 1 x K vector), transposed [K][M]; B(k, n): [K][N], [N][K], or a vector.
        lines += ["  P.sam = 1;", "  P.sak = P.M;"] if prob.trans_a else ["  P.sam = P.K;", "  P.sak = 1;"]
        if prob.b_k_major:
            lines += ["  P.sbk = 1;", "  P.sbn = P.K;"]
        else:
            lines += ["  P.sbk = P.N;", "  P.sbn = 1;"]
        lines.append(f"  for (int {p}_d = 0; {p}_d < {p}_nbd; ++{p}_d) {{")
        lines.append(f"    P.bsz[{p}_d] = 1; P.bsa[{p}_d] = 0; P.bsb[{p}_d] = 0;")
        lines.append("  }")
        for name, dims, rank in (("bsa", da, prob.ra), ("bsb", db, prob.rb)):
            own = max(rank - 2, 0)
            if not own:
                continue
            lines.append("  {")
            lines.append("    int64_t st = " + " * ".join(dims[own:]) + ";")
            for i in range(own - 1, -1, -1):
                d = i + prob.nb - own
                lines.append(f"    P.{name}[{d}] = {dims[i]} == 1 ? 0 : st;")
                lines.append(f"    st *= {dims[i]};")
            lines.append("  }")
        for d in range(prob.nb):
            sa, sb = self._batch_dim(da, prob.ra, prob.nb, d), self._batch_dim(db, prob.rb, prob.nb, d)
            lines.append(f"  P.bsz[{d}] = {sa} != 1 ? {sa} : {sb};")
        return lines

    @staticmethod
    def _slot(group: Any, vid: int) -> int:
        for k, v in enumerate(group.inputs):
            if v == vid:
                return k
        raise TemplateError(f"gemm: operand {vid} is not an input of the kernel")
