"""The fused element-wise epilogue of a product group (GEMM and conv): C code applied to each output element.

Both product templates fuse the element-wise nodes after their product (``matmul`` or ``conv``) into
its store (the planner's rule, :mod:`optiml.templates.plan`). :class:`Epilogue` renders them: the
problem struct's leaf, output and constant fields, the host code filling them, and the device
functions ``{p}_epi1`` / ``{p}_epi2`` / ``{p}_epi4`` that finish one, two or four output elements
from the accumulator. A GEMM indexes its values by ``(r, n)``; a conv (``has_n`` false) by the
output's linear index alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from optiml.graph.ir import Graph, Node
from optiml.graph.ops import TRIANGULAR
from optiml.graph.sizes import SizeResolver
from optiml.templates.base import (
    RenderContext,
    TemplateError,
    c_type,
    from_compute,
    to_compute,
)
from optiml.templates.cexpr import arith_type, literal, pointwise
from optiml.templates.group import Group, ProductSpec


class Product(Protocol):
    """What the epilogue asks of a product group's problem (:class:`~optiml.templates.gemm.problem.Problem`,
    :class:`~optiml.templates.conv.conv.ConvProblem`)."""

    @property
    def out(self) -> int:
        """The product's value id (the accumulator, ``acc``)."""
        ...

    @property
    def has_n(self) -> bool:
        """Values are indexed by ``(r, n)`` (a GEMM's columns); false: by the output's linear index (conv)."""
        ...


@dataclass
class LeafUse:
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

    def __init__(self, group: Group, problem: Product, ctx: RenderContext, sizes: SizeResolver | None) -> None:
        self.group, self.p, self.ctx, self.sizes = group, problem, ctx, sizes
        self.g: Graph = group.graph
        self.graphs = sizes.graphs if sizes is not None else [self.g]
        self.nodes = [self.g.nodes[i] for i in group.nodes[1:]]
        self.inside = {o for i in group.nodes for o in self.g.nodes[i].outputs}
        self.aliases = dict(group.spec_of(ProductSpec).aliases)
        self.recomputable = set(group.spec_of(ProductSpec).recomputable)
        self.leaves: list[LeafUse] = []
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

    def _leaf(self, vid: int, frame: int) -> LeafUse:
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
        use = LeafUse(len(self.leaves), vid, frame, slot, self.g.type(vid).dtype, kind, col, axis)
        self.leaves.append(use)
        return use

    def _offset(self, leaf: LeafUse) -> str:
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

    def _axis_index(self, leaf: LeafUse) -> str:
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
    def row_dims(self, leaf: LeafUse) -> int:
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
