"""A row group's computation, analysed for code generation.

The kernel's *domain* is a shape ``S`` whose dims are split into reduced dims (the "row", indexed
by ``r``) and kept dims (one row per kept index). Every value in the group is either FULL (it
varies along the row) or OUTER (one value per row: statistics, per-row inputs, gathers). Leaves
are stored tensors (inputs, or values an earlier kernel materialized), each read through its own
strides on the domain: a broadcast dim has stride 0, so ``x[M, N] * w[N] + b[M, 1]`` is three
leaves with three stride patterns, all computed at run time from the ABI shapes.

A ``cat`` of values the kernel can compute anywhere (its parts are stored tensors, slices of them, or
element-wise results of those) is computed in place too: an element at coordinate ``c`` along the
cat's domain dim takes the part whose range holds ``c`` and evaluates it with every leaf read ``c``
minus the part's offset along that dim (``x * cos + cat(-x2, x1) * sin``: one pass over ``x``). The
renderer supplies that coordinate (:attr:`Scope.coord`) and the shifted reads (:attr:`Scope.shifted`);
the dim is a kept dim or the first of its run of the row, so a shift moves one index.

Reductions run in *stages*: a reduction whose input needs the result of another (softmax's sum
needs its max) runs in a later pass over the row. :meth:`RowProgram.emit` writes the C code of
any set of values for one element, given how to read each leaf in that context (a register, a
global load at ``r``, or at a gathered index).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise

from optiml.graph.ir import Graph, Node
from optiml.graph.ops import op_class
from optiml.graph.sizes import SizeResolver
from optiml.templates.base import TemplateError, c_type, to_compute
from optiml.templates.cexpr import arith_type, literal, pointwise
from optiml.templates.group import Group, RowSpec

DMap = tuple[int, ...]  # for each dim of a value, the domain dim it runs along (-1: a broadcast size-1 dim)

#: an element-wise row shorter than this (a warp's lanes) at some shape set is widened where it can be
SHORT_ROW = 32
REDUCE_IDENTITY = {"sum": 0, "mean": 0, "prod": 1, "amax": "-inf", "amin": "inf", "any": False, "all": True}


@dataclass(frozen=True)
class Leaf:
    """A stored tensor as the group reads it: its storage, the (view) value giving its shape, its domain map."""

    index: int
    storage: int
    view: int
    dmap: DMap
    present: tuple[bool, ...]  # per value dim: does it vary (size != 1 at some shape set)?
    dtype: str
    #: a slice read in place (plan.strided): its slice node (dim, start; its input is the source)
    slice_node: Node | None = None
    #: domain dims a run of dims may not reach across from the dim before: this leaf's elements are
    #: not adjacent there (a slice's rows lie apart in its source)
    breaks: frozenset[int] = frozenset()

    def domain_dims(self) -> set[int]:
        return {m for m, p in zip(self.dmap, self.present, strict=True) if p and m >= 0}


@dataclass
class Reduction:
    node: Node
    stage: int
    source: tuple[int, DMap]  # the FULL value reduced
    kind: str  # sum, mean, prod, amax, amin, argmax, argmin, any, all; "sumsq", "sumexp" (below)
    #: "sumsq": the node reduces ``(x - mean(x))²`` (a sum or a mean of it), computed in the same pass as that
    #: mean (``partner``) from the sums of ``x`` and ``x²``: a variance costs no pass of its own over the row.
    #: "sumexp": the node sums ``exp(x - c)``, ``c`` (``shift``) a per-row value computed from ``amax(x)`` alone
    #: (that max, or logsumexp's guard of it), online in the same pass as that max (``partner``): softmax's
    #: denominator costs no pass of its own over the row
    partner: Reduction | None = None
    shift: int = -1

    @property
    def out(self) -> int:
        return self.node.outputs[0]

    @property
    def is_arg(self) -> bool:
        return self.kind in ("argmax", "argmin")


@dataclass
class Scope:
    """Where emitted C statements go, with the variables already computed there."""

    leaf: Callable[[Leaf], str]
    lines: list[str] = field(default_factory=list)
    names: dict[tuple[int, DMap], str] = field(default_factory=dict)
    parent: Scope | None = None  # a scope whose variables are visible here
    outer: Scope | None = None  # where values that do not vary along the row are computed
    tag: str = "t"
    #: the current element's index along a domain dim (a C expression; a fused cat's dims only)
    coord: Callable[[int], str] | None = None
    #: how to read a leaf with the element's index along domain dim ``m`` moved into a cat's part
    shifted: Callable[[Leaf, int, CatPart], str] | None = None

    def lookup(self, key: tuple[int, DMap]) -> str | None:
        scope: Scope | None = self
        while scope is not None:
            if key in scope.names:
                return scope.names[key]
            scope = scope.parent
        return None


@dataclass(frozen=True)
class CatPart:
    """Part ``k`` of the fused cat computed by node ``cat``: its leaves are read at the element's index
    along the cat's dim lowered by :attr:`offset` (where the part starts; a kernel parameter)."""

    cat: int
    k: int

    @property
    def offset(self) -> str:
        return f"p.cat{self.cat}[{self.k}]"

    @property
    def end(self) -> str:
        """Where the next part starts (the cat's length after the last)."""
        return f"p.cat{self.cat}[{self.k + 1}]"


@dataclass(frozen=True)
class _ShiftedRead:
    """Reads a leaf with the element's index along domain dim ``m`` moved into ``part``."""

    shifted: Callable[[Leaf, int, CatPart], str]
    m: int
    part: CatPart

    def __call__(self, leaf: Leaf) -> str:
        return self.shifted(leaf, self.m, self.part)


class RowProgram:
    def __init__(self, group: Group, sizes: SizeResolver, graphs: list[Graph], online: bool = False) -> None:
        self.group = group
        self.online = online  # sum exp(x - max) in the max's pass ("sumexp"): for kernels that read the row anew
        self.g = group.graph
        self.graphs = graphs
        self.sizes = sizes
        spec = group.spec_of(RowSpec)
        self.shape: tuple[int, ...] = tuple(spec.shape)
        self.n = len(self.shape)
        self.recomputable = set(spec.recomputable)
        self.aliases = dict(spec.aliases)
        self.strided = dict(spec.strided)
        self.nodes = [self.g.nodes[i] for i in group.nodes]
        self.inside = {o for n in self.nodes for o in n.outputs}
        self.frames: dict[int, DMap] = {}
        self.leaves: list[Leaf] = []
        self._leaf_index: dict[tuple[int, DMap], int] = {}
        self.reductions: list[Reduction] = []
        self.gathers: list[Node] = []
        self.cat_dims: set[int] = set()  # domain dims fused cats run along (see the module docstring)
        self.cats: dict[int, Node] = {}  # node index → a fused cat (its parts' offsets are kernel parameters)
        self.cat_domain_dim: dict[int, int] = {}  # node index → the domain dim that fused cat runs along
        self.anchor = self._anchor()
        dims = tuple(spec.dims)
        self._assign_frames()
        self.rdims = dims if dims else self._pointwise_row_dims()
        self.kdims = tuple(d for d in range(self.n) if d not in self.rdims)
        self._kinds: dict[tuple[int, DMap], bool] = {}
        self._stage_of: dict[tuple[int, DMap], int] = {}
        self._find_reductions()
        self.outputs = [(o, self.frames[o]) for o in group.outputs]

    # -- structure -------------------------------------------------------------------------------
    def _anchor(self) -> int:
        for node in self.nodes:
            if node.op in ("sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "any", "all", "gather"):
                return node.inputs[0]
        for node in self.nodes:
            for o in node.outputs:
                if self.g.type(o).shape == self.shape:
                    return o
        raise TemplateError(f"{self.group.describe()}: no value spans the kernel's domain")

    def domain_size(self, m: int) -> str:
        return self.sizes.dim(self.anchor, m)

    def constant_domain_size(self, m: int) -> int | None:
        """Domain dim ``m``'s size where the kernel takes it as a constant at every call; None where it is a shape."""
        return self.sizes.constant_dim(self.anchor, m)

    def _default_frame(self, vid: int) -> DMap:
        shape = self.g.type(vid).shape
        if len(shape) == self.n:
            return tuple(range(self.n))
        kept = [d for d in range(self.n) if d not in self.group.spec_of(RowSpec).dims]
        if len(shape) == len(kept) and shape == tuple(self.shape[d] for d in kept):
            return tuple(kept)
        return tuple(range(self.n - len(shape), self.n))

    def _assign_frames(self) -> None:
        for node in self.nodes:
            out = node.outputs[0]
            if node.op in REDUCE_IDENTITY or node.op in ("argmax", "argmin"):
                self._require_identity(node.inputs[0], node)
                if node.attr("keepdim"):
                    self.frames[out] = tuple(range(self.n))
                else:
                    self.frames[out] = tuple(d for d in range(self.n) if d not in node.attr("dims"))
            elif node.op == "gather":
                self._require_identity(node.inputs[0], node)
                self.frames[out] = tuple(range(self.n))
            elif node.op == "view":  # an alias that only adds or removes size-1 dims
                self.frames[out] = self._view_frame(node)
            else:
                rank = self.g.type(out).ndim
                frame = None
                for i in node.inputs:
                    if i in self.frames and self.g.type(i).ndim == rank:
                        frame = self.frames[i]
                        break
                self.frames[out] = frame if frame is not None else self._default_frame(out)

    def _view_frame(self, node: Node) -> DMap:
        """The view's output frame from its input's. A view of a value from outside the kernel (an
        input, or a value recomputed here) whose output spans the domain's rank works the other way:
        the output is laid out like the domain, and the input's non-size-1 dims follow the output's
        in order (``exp(a).view(N, 1)``: ``a`` runs along domain dim 0, not right-aligned to dim 1)."""
        src, out = node.inputs[0], node.outputs[0]
        src_shape, out_shape = self.g.type(src).shape, self.g.type(out).shape
        if src not in self.frames and src not in self.inside and len(out_shape) == self.n:
            out_frame = tuple(range(self.n))
            it = iter([m for m, s in zip(out_frame, out_shape, strict=True) if s != 1])
            self.frames[src] = tuple(next(it, -1) if s != 1 else -1 for s in src_shape)
            return out_frame
        src_frame = self.frames.get(src) or self._default_frame(src)
        real = [m for m, s in zip(src_frame, src_shape, strict=True) if s != 1]
        it = iter(real)
        return tuple(next(it, -1) if s != 1 else -1 for s in out_shape)

    def _require_identity(self, vid: int, node: Node) -> None:
        if self.g.type(vid).ndim != self.n:
            raise TemplateError(f"{node.target or node.op}: operand rank differs from the kernel's domain")
        frame = self.frames.get(vid)
        if frame is not None and any(m not in (d, -1) for d, m in enumerate(frame)):
            raise TemplateError(f"{node.target or node.op}: operand is laid out differently from the domain")

    def _pointwise_row_dims(self) -> tuple[int, ...]:
        """Without reductions the 'row' is the longest run of trailing dims every leaf reads uniformly
        (all dims, for a purely element-wise kernel over same-shape tensors: one flat row). One place
        inside it where a slice's rows lie apart or a fused cat runs may cut it in two (the row's two
        runs: a rotate-half over ``[B, H, S, D]`` with ``[S, D]`` tables is a row of ``S`` runs of ``D``,
        not ``B * H * S`` rows of ``D``). A row shorter than :data:`SHORT_ROW` is widened where it can be
        (:meth:`_widened_row`)."""
        self._collect_leaves()
        breaks = {m for leaf in self.leaves for m in leaf.breaks} | self.cat_dims
        row: tuple[int, ...] = (self.n - 1,) if self.n else ()
        for start in range(self.n):
            run = set(range(start, self.n))
            if all(not (leaf.domain_dims() & run) or run <= leaf.domain_dims() for leaf in self.leaves) and (
                len({m for m in breaks if m > start}) <= 1
            ):
                row = tuple(sorted(run))
                break
        if row and self._shortest(row) < SHORT_ROW:
            return self._widened_row(breaks, row[0]) or row
        return row

    def _shortest(self, dims: tuple[int, ...]) -> int:
        """The fewest elements ``dims`` of the domain hold at any shape set."""
        return min(math.prod(g.type(self.anchor).shape[d] for d in dims) for g in self.graphs)

    def _widened_row(self, breaks: set[int], first: int) -> tuple[int, ...] | None:
        """A row too short for a warp's lanes (nearest upsampling's ``[..., W, factor]``, its input broadcast along
        the factor: rows of 2) widened to the longest run of trailing dims from before its ``first`` dim that leaves
        a dim to the rows and that one cut splits into two runs each leaf reads whole or not at all (``W`` and the
        factor); None where none does."""
        for start in range(1, first):
            run = range(start, self.n)
            cuts = {m for m in breaks if m > start}
            for leaf in self.leaves:
                covered = leaf.domain_dims()
                cuts |= {m for m in run if m > start and ((m - 1) in covered) != (m in covered)}
            if len(cuts) <= 1:
                return tuple(run)
        return None

    def _collect_leaves(self) -> None:
        for node in self.nodes:
            self._operand_maps(node, visit_leaf=True)

    def _operand_maps(self, node: Node, visit_leaf: bool = False) -> list[DMap]:
        """Each operand's domain map, right-aligned to the node's output (PyTorch broadcasting)."""
        out = node.outputs[0]
        frame = self.frames[out]
        maps: list[DMap] = []
        for k, vid in enumerate(node.inputs):
            rank = self.g.type(vid).ndim
            if node.op in ("gather",) or node.op in REDUCE_IDENTITY or node.op in ("argmax", "argmin"):
                dmap = tuple(range(self.n)) if rank == self.n else frame[-rank:] if rank else ()
                if node.op != "gather" or k == 0:
                    dmap = tuple(range(self.n))
            elif node.op == "view":
                dmap = self.frames.get(vid) or self._default_frame(vid)
            else:
                dmap = frame[len(frame) - rank :] if rank else ()
            maps.append(dmap)
            if visit_leaf:
                self._visit(vid, dmap)
        if node.op == "cat":
            self._note_cat(node, frame)
        return maps

    def _note_cat(self, node: Node, dmap: DMap) -> None:
        m = dmap[self.cat_dim(node)]
        if m < 0:
            raise TemplateError(f"{node.target or 'cat'}: a concatenation along a dim the kernel's domain lacks")
        self.cat_dims.add(m)
        self.cats[node.index] = node
        self.cat_domain_dim[node.index] = m

    def cat_offsets(self, node: Node) -> list[str]:
        """Host C expressions: where each part starts along the cat's dim, then the cat's length."""
        dim, offsets = self.cat_dim(node), ["(int64_t)0"]
        for part in node.inputs:
            offsets.append(f"({offsets[-1]} + (int64_t)({self._extent(part, dim)}))")
        return offsets

    def _extent(self, vid: int, dim: int) -> str:
        """Host C expression of ``vid``'s size along ``dim``: an ABI dim where one equals it, else through
        the element-wise ops computing it to the slice that sets it (``y[..., 1:]``: ``y``'s size - 1)."""
        try:
            return self.sizes.dim(vid, dim)
        except TemplateError:
            pass
        sizes = [g.type(vid).shape[dim] for g in self.graphs]
        producer = self.g.producer(vid)
        if producer is not None and producer.op == "slice" and int(producer.attr("dim")) == dim:
            source = producer.inputs[0]
            starts = tuple(int(g.nodes[producer.index].attr("start")) for g in self.graphs)
            to_end = all(
                start + size == g.type(source).shape[dim]
                for g, start, size in zip(self.graphs, starts, sizes, strict=True)
            )
            if to_end:
                return f"({self.sizes.dim(source, dim)} - (int64_t)({self.sizes.size(starts)}))"
        elif producer is not None and producer.op != "slice":
            rank = self.g.type(vid).ndim
            for i in producer.inputs:  # an operand spanning the same range (element-wise ops align it)
                if self.g.type(i).ndim == rank and [g.type(i).shape[dim] for g in self.graphs] == sizes:
                    return self._extent(i, dim)
        raise TemplateError(f"a concatenated part's size ({', '.join(map(str, sizes))}) is no size the kernel can name")

    def cat_dim(self, node: Node) -> int:
        return int(node.attr("dim")) % max(1, self.g.type(node.outputs[0]).ndim)

    def _visit(self, vid: int, dmap: DMap) -> None:
        value = self.g.value(vid)
        if value.is_const or vid in self.inside:
            return
        if vid in self.recomputable and self.g.value(self.storage(vid)).producer is not None and not self._stored(vid):
            producer = self.g.producer(vid)
            assert producer is not None
            for i, m in zip(producer.inputs, self._inline_maps(producer, dmap), strict=True):
                self._visit(i, m)
            if producer.op == "cat":
                self._note_cat(producer, dmap)
            return
        self.leaf_for(vid, dmap)

    def storage(self, vid: int) -> int:
        while vid in self.aliases:
            vid = self.aliases[vid]
        return vid

    def _stored(self, vid: int) -> bool:
        """A recomputable value that is an alias of a graph input is read, not recomputed."""
        return self.g.value(self.storage(vid)).producer is None

    def _inline_maps(self, node: Node, out_map: DMap) -> list[DMap]:
        maps = []
        for vid in node.inputs:
            rank = self.g.type(vid).ndim
            maps.append(out_map[len(out_map) - rank :] if rank else ())
        return maps

    def leaf_for(self, vid: int, dmap: DMap) -> Leaf:
        key = (vid, dmap)
        if key not in self._leaf_index:
            shapes = [g.type(vid).shape for g in self.graphs]
            present = tuple(any(s[d] != 1 for s in shapes) for d in range(len(shapes[0])))
            leaf = Leaf(len(self.leaves), self.storage(vid), vid, dmap, present, self.g.type(vid).dtype)
            if vid in self.strided:
                source = self.strided[vid]
                breaks = self._breaks(source, vid, dmap, present)
                leaf = replace(leaf, slice_node=self.g.producer(vid), breaks=breaks)
            self._leaf_index[key] = leaf.index
            self.leaves.append(leaf)
        return self.leaves[self._leaf_index[key]]

    def _breaks(self, source: int, vid: int, dmap: DMap, present: tuple[bool, ...]) -> frozenset[int]:
        """Where a slice of ``source`` read in place is not contiguous: between two of its varying dims
        ``a < b``, at ``b``'s domain dim, if ``b`` is cut short in the source or a source dim between
        them has more than one element (``x[:, 0]`` of ``[N, C, M]`` read as ``[N, M]``)."""
        dims = [i for i, (m, here) in enumerate(zip(dmap, present, strict=True)) if here and m >= 0]
        breaks = set()
        for g in self.graphs:
            src, val = g.type(source).shape, g.type(vid).shape
            for a, b in pairwise(dims):
                if src[b] != val[b] or any(src[k] != 1 for k in range(a + 1, b)):
                    breaks.add(dmap[b])
        return frozenset(breaks)

    def _find_reductions(self) -> None:
        if not self.leaves:
            self._collect_leaves()
        for node in self.nodes:
            if node.op in REDUCE_IDENTITY or node.op in ("argmax", "argmin"):
                partner = self._centred_mean(node)
                shifted = self._shifted_exp(node) if self.online and partner is None else None
                if partner is not None:
                    reduction = Reduction(node, partner.stage, partner.source, "sumsq", partner)
                elif shifted is not None:
                    peak, shift = shifted
                    reduction = Reduction(node, peak.stage, peak.source, "sumexp", peak, shift)
                else:
                    source = (node.inputs[0], tuple(range(self.n)))
                    reduction = Reduction(node, self._stage(*source), source, node.op)
                self.reductions.append(reduction)
                self._stage_of[(node.outputs[0], self.frames[node.outputs[0]])] = reduction.stage + 1
            elif node.op == "gather":
                self.gathers.append(node)

    def _centred_mean(self, node: Node) -> Reduction | None:
        """The mean reduction ``m`` of a value ``x`` when ``node`` sums (or averages) ``(x - m)²`` over the
        row (a variance: ``var``, ``layer_norm``, ``group_norm``, ``instance_norm``); else None. The sum of
        squared deviations is then ``Σx² − (Σx)²/n``, taken in the mean's pass in double precision."""
        if node.op not in ("sum", "mean"):
            return None
        square = self._node_computing(node.inputs[0])
        if square is None or not (
            (square.op == "mul" and square.inputs[0] == square.inputs[1])
            or (square.op == "pow" and self._const(square.inputs[1]) == 2)
        ):
            return None
        centred = self._node_computing(square.inputs[0])
        if centred is None or centred.op != "sub":
            return None
        for x, mean in (centred.inputs, centred.inputs[::-1]):  # (x - m)² = (m - x)²
            while (producer := self._node_computing(mean)) is not None and producer.op in ("view", "expand"):
                mean = producer.inputs[0]
            found = [r for r in self.reductions if r.kind == "mean" and r.out == mean and r.source[0] == x]
            if found and self.value_type(x) in ("float", "double"):
                return found[0]
        return None

    def _shifted_exp(self, node: Node) -> tuple[Reduction, int] | None:
        """``(m, c)`` when ``node`` sums ``exp(x - c)`` over the row, ``m`` the max reduction of the float value
        ``x`` and ``c`` computed from ``m`` alone (softmax, log-softmax, cross-entropy: ``c`` is ``m``; logsumexp:
        ``where(isinf(m), 0, m)``); else None. The sum is then taken online in ``m``'s pass."""
        if node.op != "sum":
            return None
        power = self._node_computing(node.inputs[0])
        shifted = self._node_computing(power.inputs[0]) if power is not None and power.op == "exp" else None
        if shifted is None or shifted.op != "sub" or self.value_type(shifted.inputs[0]) not in ("float", "double"):
            return None
        x, shift = shifted.inputs
        for peak in self.reductions:
            if peak.kind == "amax" and peak.source[0] == x and self._computed_from(shift, peak.out):
                return peak, shift
        return None

    def _computed_from(self, vid: int, root: int) -> bool:
        """``vid`` is ``root``, or computed by element-wise ops and views from ``root`` and constants alone."""
        if vid == root:
            return True
        node = self._node_computing(vid)
        if node is None or op_class(node.op) not in ("pointwise", "view"):
            return False
        operands = [i for i in node.inputs if not self.g.value(i).is_const]
        return bool(operands) and all(self._computed_from(i, root) for i in operands)

    def _const(self, vid: int) -> object:
        value = self.g.value(vid)
        return value.const if value.is_const and not self.varies(vid) else None

    @property
    def stages(self) -> int:
        return 1 + max((r.stage for r in self.reductions), default=-1)

    def _stage(self, vid: int, dmap: DMap) -> int:
        """The number of reduction passes that must finish before ``vid`` can be computed."""
        key = (vid, dmap)
        if key in self._stage_of:
            return self._stage_of[key]
        node = self._node_computing(vid)
        if node is None:
            result = 0
        elif node.op in REDUCE_IDENTITY or node.op in ("argmax", "argmin"):
            result = self._stage(node.inputs[0], tuple(range(self.n))) + 1
        else:
            maps = self._maps_for(node, vid, dmap)
            result = max((self._stage(i, m) for i, m in zip(node.inputs, maps, strict=True)), default=0)
        self._stage_of[key] = result
        return result

    def _node_computing(self, vid: int) -> Node | None:
        if self.g.value(vid).is_const:
            return None
        if vid in self.inside:
            return self.g.producer(vid)
        if vid in self.recomputable and not self._stored(vid):
            return self.g.producer(vid)
        return None

    def _maps_for(self, node: Node, vid: int, dmap: DMap) -> list[DMap]:
        return self._operand_maps(node) if vid in self.inside else self._inline_maps(node, dmap)

    def full_leaves(self) -> list[Leaf]:
        """The leaves read along the row (their domain spans a reduced dim): what a pass over the row loads."""
        rset = set(self.rdims)
        return [leaf for leaf in self.leaves if leaf.domain_dims() & rset]

    def full_outputs(self) -> list[tuple[int, DMap]]:
        """The outputs that vary along the row: written by a pass over it (the others once a row)."""
        return [(vid, dmap) for vid, dmap in self.outputs if self.is_full(vid, dmap)]

    def is_full(self, vid: int, dmap: DMap) -> bool:
        """True when the value varies along the row (the reduced dims)."""
        key = (vid, dmap)
        if key in self._kinds:
            return self._kinds[key]
        value = self.g.value(vid)
        rset = set(self.rdims)
        if value.is_const:
            result = False
        else:
            node = self._node_computing(vid)
            if node is None:
                result = bool(self.leaf_for(vid, dmap).domain_dims() & rset)
            elif node.op in REDUCE_IDENTITY or node.op in ("argmax", "argmin", "gather"):
                result = False
            elif node.op == "expand" and self._spans_row(vid, dmap):
                result = True  # a broadcast along the row varies there even where its operand does not
            elif node.op == "cat" and dmap[self.cat_dim(node)] in rset:
                result = True  # parts side by side along the row (torch.stack's parts are constant along it)
            else:
                maps = self._maps_for(node, vid, dmap)
                result = any(self.is_full(i, m) for i, m in zip(node.inputs, maps, strict=True))
                # an element-wise value that spans the row though no operand varies there is broadcast along it
                # by a constant of the output's shape (``x[:, :1] * torch.ones_like(x)``): written element by
                # element, not once a row
                result = result or (op_class(node.op) == "pointwise" and self._spans_row(vid, dmap))
        self._kinds[key] = result
        return result

    def _spans_row(self, vid: int, dmap: DMap) -> bool:
        """The value has a dim of size > 1 (at some shape set) laid along a reduced dim."""
        rset = set(self.rdims)
        return any(m in rset and any(g.type(vid).shape[i] != 1 for g in self.graphs) for i, m in enumerate(dmap))

    def value_type(self, vid: int) -> str:
        return arith_type(self.g.type(vid).dtype)

    # -- emission --------------------------------------------------------------------------------
    def emit(
        self,
        vid: int,
        dmap: DMap,
        scope: Scope,
        stats: dict[int, str],
        gather: Callable[[Node, Scope], str] | None = None,
    ) -> str:
        """C expression of ``vid`` in ``scope`` (statements appended there).

        ``stats`` names reduction results already computed; values that do not vary along the row
        go to ``scope.outer`` (computed once per row); ``gather`` renders a gather node there.
        """
        if scope.outer is not None and not self.is_full(vid, dmap):
            return self.emit(vid, dmap, scope.outer, stats, gather)
        value = self.g.value(vid)
        ctype = self.value_type(vid)
        if value.is_const:
            if self.varies(vid):
                return f"(({ctype})p.sc{vid})"
            return literal(value.const, ctype)  # type: ignore[arg-type]
        key = (vid, dmap)
        known = scope.lookup(key)
        if known is not None:
            return known
        node = self._node_computing(vid)
        if node is None:
            expr = scope.leaf(self.leaf_for(vid, dmap))
        elif node.op in REDUCE_IDENTITY or node.op in ("argmax", "argmin"):
            if vid not in stats:
                raise TemplateError(f"internal: {node.op} result used before it is computed")
            return stats[vid]
        elif node.op == "gather":
            if vid not in stats:
                if gather is None:
                    raise TemplateError("internal: a gather with no context to render it")
                stats[vid] = gather(node, scope)
            return stats[vid]
        elif node.op == "view":
            src = node.inputs[0]
            return self.emit(src, self.frames.get(src) or dmap, scope, stats, gather)
        elif node.op == "cat":
            return self._emit_cat(node, vid, dmap, scope, stats, gather)
        else:
            maps = self._maps_for(node, vid, dmap)
            args = [self.emit(i, m, scope, stats, gather) for i, m in zip(node.inputs, maps, strict=True)]
            types = [self.value_type(i) for i in node.inputs]
            expr = pointwise(node, args, types, ctype)
        name = f"{scope.tag}{vid}_{len(scope.names)}"
        scope.lines.append(f"const {ctype} {name} = {expr};")
        scope.names[key] = name
        return name

    def _emit_cat(
        self,
        node: Node,
        vid: int,
        dmap: DMap,
        scope: Scope,
        stats: dict[int, str],
        gather: Callable[[Node, Scope], str] | None,
    ) -> str:
        """The part holding the element's index along the cat's dim, evaluated with its leaves read that
        index minus the part's offset; each part in a scope of its own (nothing computed at the element's
        own index is valid there)."""
        if scope.coord is None or scope.shifted is None:
            raise TemplateError(f"{node.target or 'cat'}: a concatenation inside another's part is not fused")
        dim = self.cat_dim(node)
        maps = self._maps_for(node, vid, dmap)
        m = dmap[dim]
        coord, shifted = scope.coord, scope.shifted
        ctype = self.value_type(vid)
        name = f"{scope.tag}{vid}_{len(scope.names)}"
        lines = [f"{ctype} {name};"]
        for k, (part, part_map) in enumerate(zip(node.inputs, maps, strict=True)):
            cat_part = CatPart(node.index, k)
            # no coordinates inside a part: a cat of cats is not fused (the planner keeps it a kernel of its own)
            sub = Scope(leaf=_ShiftedRead(shifted, m, cat_part), tag=f"{scope.tag}c{vid}_{k}_")
            value = self.emit(part, part_map, sub, stats, gather)
            last = k == len(node.inputs) - 1
            head = "} else {" if last else ("if" if k == 0 else "} else if") + f" ({coord(m)} < {cat_part.end}) {{"
            lines += [head, *sub.lines, f"{name} = {value};"]
        lines.append("}")
        scope.lines.extend(lines)
        scope.names[(vid, dmap)] = name
        return name

    def varies(self, vid: int) -> bool:
        """A constant whose value differs between shape sets came from a size (``kl_div``'s batch size)."""
        return len({g.value(vid).const for g in self.graphs}) > 1

    def size_constants(self) -> list[tuple[int, str]]:
        """(value id, C expression) of every size-derived constant the group reads: kernel parameters."""
        found: list[tuple[int, str]] = []
        readers = [*self.nodes, *(p for v in self.recomputable if (p := self.g.producer(v)) is not None)]
        for node in readers:
            for vid in node.inputs:
                if self.g.value(vid).is_const and self.varies(vid) and vid not in [f for f, _ in found]:
                    values = tuple(float(g.value(vid).const) for g in self.graphs)  # type: ignore[arg-type]
                    try:
                        found.append((vid, self.sizes.constant(values)))
                    except ValueError as exc:
                        raise TemplateError(str(exc)) from None
        return found

    def load_expr(self, leaf: Leaf, ptr: str, offset: str) -> str:
        return to_compute(f"{ptr}[{offset}]", leaf.dtype) if leaf.dtype != "bool" else f"{ptr}[{offset}]"

    def leaf_ctype(self, leaf: Leaf) -> str:
        return c_type(leaf.dtype)


def itemsize(dtype: str) -> int:
    """Bytes of one element of ``dtype`` (a graph dtype name; bool and 8-bit types 1)."""
    return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2}.get(dtype, 1)
