"""The fusion planner: cut the op graph into as few kernels as the op classes allow.

Rules (documented so that a reader can predict a plan):

* Element-wise ops, views and gathers fuse into the kernel of the reduction whose domain they
  live in: a *row group* has a domain shape ``S`` and reduced dims ``D``; a value belongs to it
  when it has shape ``S`` (varies along the reduced dims) or the reduced shape (one value per
  row: statistics, per-row inputs such as targets). Reductions with the same ``(S, D)`` share a
  kernel (softmax's max and sum, layer norm's two means); a reduction over another domain starts
  a new kernel (cross-entropy's mean over the per-row losses).
* A row group without reductions is a *pointwise* kernel over ``S``.
* Scans, pooling and permutes are dedicated kernels (``flip → cumsum → flip`` is a reverse
  scan; ``cumsum(x, d) - x``, of either, is an exclusive one, and so is a shift by one along the
  scanned dim: ``cat(zeros, cumsum(x[:-1]))``, ``F.pad(cumsum(x), (1, -1))``, reversed
  ``cat(reverse_cumsum(x[1:]), zeros)``; ones for ``cumprod``). A scan recomputes an element-wise
  prologue over graph inputs of the scanned shape at each load (``cumsum(x * mask)``: one kernel).
* A ``matmul`` starts a *GEMM group*: the product plus its fused element-wise *epilogue* — every
  element-wise node that reads a value the group computes (through views that keep the product's
  innermost dim ``N`` innermost), writes as many elements as the product, and otherwise reads only
  constants and *leaves*: graph inputs, values earlier kernels wrote, or recomputable values, each
  broadcasting into the product's shape (bias ``[N]``, per-row ``[M, 1]``, a residual ``[M, N]``).
  Bias, activations, scaling, residual adds and clamps fuse this way; a reduction after the
  product is a separate kernel reading it from memory. The operands are read where they are stored.
* A product summed (or averaged) over its columns through linear element-wise ops is first folded into its
  weight (:mod:`optiml.templates.product_sums`): a column sum of the weight and a GEMV, no GEMM.
* A ``conv`` (``aten.convolution``: 1-D/2-D/3-D, groups, transposed) starts a *conv group* with the
  same epilogue rule as a GEMM group, except that any view of the same size keeps the output's
  linear index (the epilogue is indexed by it), so a per-channel ``[C, 1, 1]`` bias, an eval-mode
  batch norm and a residual ``[B, C, H, W]`` all fuse; a pool or reduction after it is a kernel of
  its own reading the conv's output from memory.
* A value computed only from graph inputs by element-wise ops is *recomputable*: a kernel that
  needs it recomputes it instead of reading it from memory. Any other value one kernel produces
  and a later one reads is *materialized* in the workspace; a reshaping view of a materialized or
  input tensor costs nothing (tensors are contiguous).
* An ``expand`` (``expand_as``, ``F.normalize``'s norm over the row) is a broadcast, not a view of
  memory: it is element-wise, its operand read with stride 0 along the dims it repeats.
* A ``cat`` whose parts a row kernel can compute anywhere (graph inputs, slices of them, element-wise
  results of those) and whose every user is element-wise or a reduction is recomputable like an
  element-wise value: the kernels that read it compute each element from the part that holds it
  (``x * cos + cat(-x2, x1) * sin``: one kernel). Any other ``cat`` is a copy kernel of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optiml.graph.ir import Graph, Node
from optiml.graph.ops import op_class
from optiml.templates.base import TemplateError
from optiml.templates.group import Group
from optiml.templates.product_sums import fold_product_sums
from optiml.templates.registry import dedicated_op_classes, family, served
from optiml.templates.view_sinking import sink_views

#: Parts a fused cat may have (each is a branch in every element's code); more: a copy kernel.
MAX_FUSED_PARTS = 8
#: The op chains (scans named ``scan``) that are an exclusive scan written as a shift by one: a slice before or
#: after the scan, a cat of the identity's block; the reversed ones between flips.
_SHIFTED_SCANS = (
    ("slice", "scan", "cat"),
    ("scan", "slice", "cat"),
    ("slice", "flip", "scan", "flip", "cat"),
    ("flip", "scan", "flip", "slice", "cat"),
)
_LONGEST_SHIFT = max(len(chain) for chain in _SHIFTED_SCANS)
#: Element-wise nodes a scan recomputes at each load (inlined into one expression); more: a kernel of their own.
MAX_PROLOGUE_NODES = 16


@dataclass(frozen=True)
class Plan:
    graphs: tuple[Graph, ...]  # every shape set's graph (after CSE); graphs[0] drives decisions
    groups: tuple[Group, ...]
    materialized: tuple[int, ...]  # value ids written to the workspace by one kernel, read by a later one
    aliases: dict[int, int] = field(default_factory=dict)  # view value → the stored value it reshapes
    strided: dict[int, int] = field(default_factory=dict)  # a slice row kernels read in place → its source

    @property
    def graph(self) -> Graph:
        return self.graphs[0]

    def storage(self, vid: int) -> int:
        """The value whose memory holds ``vid`` (a view of a stored tensor shares it)."""
        while vid in self.aliases:
            vid = self.aliases[vid]
        return vid

    def describe(self) -> str:
        return " → ".join(g.describe() for g in self.groups)


# -- graph clean-up ------------------------------------------------------------------------------
def cse(graph: Graph) -> Graph:
    """Common-subexpression elimination and dead-code removal (deterministic: same structure in, same out)."""
    remap: dict[int, int] = {}
    seen: dict[Any, int] = {}
    kept: list[Node] = []
    for vid, value in enumerate(graph.values):
        if value.is_const:
            const_key = ("const", value.const, type(value.const).__name__, value.type)
            remap[vid] = seen.setdefault(const_key, vid)
    for node in graph.nodes:
        inputs = tuple(remap.get(i, i) for i in node.inputs)
        # the output types too: a slice's length is its output's shape, not an attr (``x[:, :1]``, ``x[:, :-1]``)
        key = (node.op, inputs, node.attrs, tuple(graph.type(o) for o in node.outputs))
        if key in seen and len(node.outputs) == 1:
            remap[node.outputs[0]] = seen[key]
            continue
        if len(node.outputs) == 1:
            seen[key] = node.outputs[0]
        kept.append(Node(node.index, node.op, inputs, node.outputs, node.attrs, node.target))
    outputs = tuple(remap.get(o, o) for o in graph.outputs)
    live = set(outputs)
    alive: list[Node] = []
    for node in reversed(kept):
        if any(o in live for o in node.outputs):
            alive.append(node)
            live.update(node.inputs)
    alive.reverse()
    index_of = {node.index: k for k, node in enumerate(alive)}
    values = list(graph.values)
    for k, node in enumerate(alive):
        for o in node.outputs:
            values[o] = type(values[o])(o, values[o].type, k, values[o].const, values[o].scalar)
    nodes = tuple(Node(index_of[n.index], n.op, n.inputs, n.outputs, n.attrs, n.target) for n in alive)
    return Graph(tuple(values), graph.inputs, nodes, outputs, graph.input_names)


# -- the planner ---------------------------------------------------------------------------------
@dataclass
class _Building:
    template: str
    shape: tuple[int, ...] = ()
    dims: tuple[int, ...] | None = None  # reduced dims of a row group; None while pointwise
    nodes: list[int] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)

    @property
    def is_row(self) -> bool:
        return self.template in served("row")

    def outer_shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        assert self.dims is not None
        keep = tuple(1 if d in self.dims else s for d, s in enumerate(self.shape))
        drop = tuple(s for d, s in enumerate(self.shape) if d not in self.dims)
        return keep, drop


class _Planner:
    def __init__(self, graph: Graph, graphs: list[Graph] | None = None) -> None:
        self.g = graph
        self.graphs = graphs or [graph]  # every shape set's graph (same structure): GEMM fusion checks all
        self.groups: list[_Building] = []
        self.group_of: dict[int, int] = {}  # value id → group index that computes it
        self.aliases: dict[int, int] = {}
        self.recomputable: set[int] = set()
        self.folded: set[int] = set()  # node indices absorbed into another node's group
        self.strided: dict[int, int] = {}  # slice value → its stored source, read in place by row kernels
        self.fused_cats = self._fusable_cats()  # node indices of cats row kernels compute in place

    def plan(self) -> list[_Building]:
        for node in self.g.nodes:
            if node.index in self.folded:
                continue
            try:
                cls = op_class(node.op)
            except KeyError as exc:
                raise TemplateError(f"no template for {node.target or node.op}") from exc
            if self._shifted_scan(node):
                continue
            if cls == "slice" and self._read_in_place(node):
                continue
            if node.index in self.fused_cats:
                self._elementwise(node)
                continue
            if cls in ("matmul", "conv"):
                self._require_stored_operands(node)
            if cls in dedicated_op_classes():
                self._dedicated(node, cls)
            elif cls == "matmul":
                spec = {"trans_a": bool(node.attr("trans_a", False)), "trans_b": bool(node.attr("trans_b", False))}
                self._new("gemm", node, {**spec, "batch": int(node.attr("batch", 0))})
            elif cls == "conv":
                self._new("conv", node, dict(node.attrs))
            elif cls == "reduce":
                self._reduce(node)
            elif node.op == "view" and self._is_storage_view(node):
                self.aliases[node.outputs[0]] = node.inputs[0]
                if node.inputs[0] in self.recomputable:
                    self.recomputable.add(node.outputs[0])
            else:
                self._elementwise(node)
        return self.groups

    def _require_stored_operands(self, node: Node) -> None:
        """Products and convolutions read their operands from memory: a constant tensor made inside ``forward``
        (``F.conv2d(x, torch.ones(C, C, 3, 3))``) is refused in one line, naming the op."""
        for k, vid in enumerate(node.inputs):
            value, shape = self.g.value(vid), self.g.type(vid).shape
            if value.is_const and shape:
                raise TemplateError(
                    f"{node.target or node.op}: operand {k} is a constant tensor made inside forward() "
                    f"(shape {shape}, every element {value.const}): make it a parameter or an input"
                )

    # dedicated kernels
    def _dedicated(self, node: Node, cls: str) -> None:
        if cls == "flip":
            self._reverse_scan(node)
            return
        if cls == "triangular" and self._gemm_epilogue(node):  # a product's epilogue knows rows and columns
            return
        spec: dict[str, Any] = dict(node.attrs)
        if cls == "scan":
            tail = self._exclusive_tail(node, node.inputs[0], node.outputs[0])
            spec = {
                "dim": node.attr("dim"),
                "kind": "sum" if node.op == "cumsum" else "prod",
                "reverse": False,
                "exclusive": tail is not None,
            }
            if tail is not None:
                self._new_folded("scan", [node, tail], spec)
                return
        elif cls == "pool":
            spec["op"] = node.op
            spec["indices"] = len(node.outputs) > 1 and bool(
                self.g.users(node.outputs[1]) or node.outputs[1] in self.g.outputs
            )
        self._new(cls, node, spec)

    def _reverse_scan(self, node: Node) -> None:
        """``flip(d) → cumsum/cumprod(d) → flip(d)`` is a reverse scan; a lone flip has no template."""
        users = self.g.users(node.outputs[0])
        dims = node.attr("dims")
        if len(users) == 1 and users[0].op in ("cumsum", "cumprod") and (users[0].attr("dim"),) == tuple(dims):
            scan = users[0]
            after = self.g.users(scan.outputs[0])
            if len(after) == 1 and after[0].op == "flip" and tuple(after[0].attr("dims")) == tuple(dims):
                tail = self._exclusive_tail(scan, node.inputs[0], after[0].outputs[0])
                spec = {
                    "dim": scan.attr("dim"),
                    "kind": "sum" if scan.op == "cumsum" else "prod",
                    "reverse": True,
                    "exclusive": tail is not None,
                }
                self._new_folded("scan", [node, scan, after[0], *([tail] if tail else [])], spec)
                return
        raise TemplateError(f"no template for {node.target or 'aten.flip'} outside a reverse scan")

    def _exclusive_tail(self, scan: Node, source: int, scanned: int) -> Node | None:
        """The ``sub`` that makes an inclusive sum exclusive, ``cumsum(x, d) - x`` (also of a reverse scan): the
        scanned value's only user, subtracting the very value scanned, same type. Folded into the scan kernel,
        which then writes each element's sum of those before it — one pass over the data instead of a scan
        kernel and an element-wise kernel reading its output back (exclusive_cumsum read 0.42× torch.compile
        that way). A product (``cumprod(x) / x``) is not folded: the reference divides by a zero."""
        if scan.op != "cumsum" or scanned in self.g.outputs:
            return None
        users = self.g.users(scanned)
        if len(users) != 1 or users[0].op != "sub" or tuple(users[0].inputs) != (scanned, source):
            return None
        tail = users[0]
        if any(g.type(tail.outputs[0]) != g.type(scanned) for g in self.graphs):
            return None
        return tail

    def _shifted_scan(self, first: Node) -> bool:
        """Fold an exclusive scan written as a shift by one (module docstring) into one exclusive scan kernel
        of ``first``'s input: one pass over the data, where a slice copy, a scan and a cat copy made three
        (level1/92_cumsum_exclusive read 0.20× torch.compile that way). ``first`` opens the chain: a slice,
        a scan or a flip whose single-user chain ends in a ``cat`` of the shifted scan and a block of the
        scan's identity one element thick along the scanned dim, as large as the input."""
        if first.op not in ("slice", "cumsum", "cumprod", "flip"):
            return False
        chain = [first]
        while chain[-1].op != "cat" and len(chain) < _LONGEST_SHIFT:
            out = chain[-1].outputs[0]
            users = self.g.users(out)
            if out in self.g.outputs or len(users) != 1 or users[0].index in self.folded:
                return False
            chain.append(users[0])
        shape = tuple("scan" if n.op in ("cumsum", "cumprod") else n.op for n in chain)
        if shape not in _SHIFTED_SCANS:
            return False
        reverse = "flip" in shape
        scan = next(n for n in chain if n.op in ("cumsum", "cumprod"))
        identity = 0 if scan.op == "cumsum" else 1
        source, cat = first.inputs[0], chain[-1]
        if self.g.value(source).is_const or len(cat.inputs) != 2:
            return False
        shifted = chain[-2].outputs[0]
        block = cat.inputs[0] if cat.inputs[1] == shifted else cat.inputs[1]
        if cat.inputs != ((shifted, block) if reverse else (block, shifted)):
            return False
        constant = self.g.value(block)
        if not constant.is_const or isinstance(constant.const, bool) or constant.const != identity:
            return False
        for g in self.graphs:
            whole = g.type(source).shape
            if not whole:
                return False
            dim = int(scan.attr("dim")) % len(whole)
            cut = tuple(s - 1 if d == dim else s for d, s in enumerate(whole))
            thin = tuple(1 if d == dim else s for d, s in enumerate(whole))
            if whole[dim] < 2 or g.type(cat.outputs[0]).shape != whole or g.type(block).shape != thin:
                return False
            for n in chain:
                if n.op == "slice" and (
                    int(n.attr("dim")) % len(whole) != dim
                    or int(n.attr("start")) != int(reverse)
                    or g.type(n.outputs[0]).shape != cut
                ):
                    return False
                if n.op == "flip" and tuple(int(d) % len(whole) for d in n.attr("dims")) != (dim,):
                    return False
                if n.op == "cat" and int(n.attr("dim")) % len(whole) != dim:
                    return False
        spec = {"dim": scan.attr("dim"), "kind": "sum" if identity == 0 else "prod", "reverse": reverse}
        self._new_folded("scan", chain, {**spec, "exclusive": True})
        return True

    def _new_folded(self, template: str, nodes: list[Node], spec: dict[str, Any]) -> None:
        """A dedicated kernel of several nodes, the first one planned here and the others folded into it; the
        last one's outputs are the kernel's."""
        self.folded.update(n.index for n in nodes[1:])
        self.groups.append(_Building(template, spec=spec, nodes=[n.index for n in nodes]))
        for o in nodes[-1].outputs:
            self.group_of[o] = len(self.groups) - 1

    def _read_in_place(self, node: Node) -> bool:
        """A slice of stored memory that only element-wise ops, reductions and views adding or removing
        size-1 dims use (and that is not an output): the row kernels that use it read its range in
        place, through its source's strides from the slice's start (``a, b = x.chunk(2, -1);
        a * sigmoid(b)``: one kernel, no copy)."""
        src, out = node.inputs[0], node.outputs[0]
        base = self._storage(src)
        users = self.g.users(out)
        if out in self.g.outputs or self.g.value(base).is_const or base in self.recomputable or not users:
            return False
        if any(op_class(u.op) not in ("pointwise", "reduce", "view") and u.index not in self.fused_cats for u in users):
            return False  # a view of it is computed by a row kernel too (select: a slice viewed without its dim)
        # a reshape of it (NetVLAD's ``a[:, :K].view(B, N, K)``), or of an element-wise value over it that kernels
        # recompute from it (``relu(q).view(B, T, H, C // H)``), has dims its source's strides cannot step
        if self._reshaped_downstream(out):
            return False
        self.strided[out] = src
        return True

    def _reshaped_downstream(self, vid: int) -> bool:
        """A view reshapes ``vid``, or an element-wise value kernels recompute from it (every operand computable
        anywhere: not written by a kernel, whose reshape would be a view of memory)."""
        shape = _squeezed(self.g.type(vid).shape)
        pending, seen = [vid], set()
        while pending:
            value = pending.pop()
            if value in seen:
                continue
            seen.add(value)
            for user in self.g.users(value):
                if user.op == "view" and _squeezed(self.g.type(user.outputs[0]).shape) != shape:
                    return True
                if op_class(user.op) == "pointwise" and all(self._computable_anywhere(i) for i in user.inputs):
                    pending.extend(user.outputs)
        return False

    def _new(self, template: str, node: Node, spec: dict[str, Any]) -> None:
        self.groups.append(_Building(template, spec=spec, nodes=[node.index]))
        for o in node.outputs:
            self.group_of[o] = len(self.groups) - 1

    # row groups
    def _reduce(self, node: Node) -> None:
        src = node.inputs[0]
        shape, dims = self.g.type(src).shape, tuple(node.attr("dims"))
        target = self._row_group_for(node, lambda b: b.shape == shape and b.dims in (None, dims))
        if target is None:
            self.groups.append(_Building("reduce", shape=shape, dims=dims))
            target = len(self.groups) - 1
        building = self.groups[target]
        building.template, building.dims = "reduce", dims
        self._join(target, node)

    def _elementwise(self, node: Node) -> None:
        if self._gemm_epilogue(node):
            return
        out_shape = self.g.type(node.outputs[0]).shape
        if node.op == "gather":
            self._require_row_pick(node)
            src = self.g.type(node.inputs[0]).shape
            dims = (node.attr("dim"),)
            target = self._row_group_for(node, lambda b: b.shape == src and b.dims in (None, dims))
            if target is None:
                self.groups.append(_Building("reduce", shape=src, dims=dims))
                target = len(self.groups) - 1
            self.groups[target].template, self.groups[target].dims = "reduce", dims
            self._join(target, node)
            return
        # a broadcast that a reshape merges with real dims (nearest upsampling: expand, then view) has no strides
        # to recompute it through: it is written once and the reshape reads memory
        broadcast_reshaped = node.op == "expand" and self._reshaped_downstream(node.outputs[0])
        leafish = all(self._is_leafish(i) or self._views_an_input(i) for i in node.inputs)
        if leafish and node.op != "view" and not broadcast_reshaped:
            self.recomputable.update(node.outputs)
        target = self._row_group_for(
            node, lambda b: self._fits(b, out_shape) or self._follows_in(b, node), any_group=True
        )
        if target is None:
            self.groups.append(_Building("pointwise", shape=out_shape))
            target = len(self.groups) - 1
        self._join(target, node)

    def _require_row_pick(self, node: Node) -> None:
        """A gather is a row kernel's statistic: one element picked per row (cross-entropy's target
        logit), its index shaped like the source but 1 along the gather dim. Any other index (several
        picks per row, a lookup table's rows) has no template."""
        dim = node.attr("dim")
        for g in self.graphs:
            src, index = g.type(node.inputs[0]).shape, g.type(node.inputs[1]).shape
            want = tuple(1 if d == dim else s for d, s in enumerate(src))
            if index != want:
                raise TemplateError(
                    f"no template for {node.target or 'aten.gather'} with an index shaped {index} over {src} "
                    f"(only one element picked per row along dim {dim})"
                )

    # GEMM epilogues
    def _storage(self, vid: int) -> int:
        while vid in self.aliases:
            vid = self.aliases[vid]
        return vid

    def _gemm_epilogue(self, node: Node) -> bool:
        """Join ``node`` to the GEMM group whose value it reads, if it is a legal epilogue (module docstring)."""
        if op_class(node.op) not in ("pointwise", "triangular"):
            return False
        homes = set()
        for vid in node.inputs:
            home = self.group_of.get(self._storage(vid))
            if (
                home is not None
                and self.groups[home].template in served("product")
                and self._storage(vid) not in self.recomputable
            ):
                homes.add(home)
        if not homes:
            return False
        target = max(homes)  # a product of an earlier GEMM kernel is a leaf of this one
        building = self.groups[target]
        product = self.g.nodes[building.nodes[0]]
        # a conv epilogue indexes its values by the output's linear index: any same-size view keeps it
        has_n = building.template == "gemm" and self.g.type(product.inputs[1]).ndim >= 2
        out = node.outputs[0]
        for g in self.graphs:
            domain, shape = g.type(product.outputs[0]).shape, g.type(out).shape
            if _numel(shape) != _numel(domain) or (has_n and (not shape or shape[-1] != domain[-1])):
                return False
        for vid in node.inputs:
            value = self.g.value(vid)
            if value.is_const:
                continue
            base = self._storage(vid)
            home = self.group_of.get(base)
            if home == target and base not in self.recomputable:
                continue  # the group's own value (possibly through a view)
            stored = value.producer is None or self.g.value(base).producer is None
            earlier = home is not None and home < target and base not in self.recomputable
            if not (stored or earlier or self._recomputes_in_place(vid)):
                return False
            if not all(_broadcasts_to(g.type(vid).shape, g.type(out).shape) for g in self.graphs):
                return False
        self._join(target, node)
        return True

    def _recomputes_in_place(self, vid: int) -> bool:
        """A recomputable value an epilogue can inline: element-wise nodes (no reshapes) over stored leaves."""
        if vid not in self.recomputable:
            return False
        producer = self.g.producer(vid)
        if producer is None or op_class(producer.op) != "pointwise":
            return False
        for i in producer.inputs:
            value = self.g.value(i)
            if value.is_const or value.producer is None or self.g.value(self._storage(i)).producer is None:
                continue
            if not self._recomputes_in_place(i):
                return False
        return True

    def _fits(self, b: _Building, shape: tuple[int, ...]) -> bool:
        if shape == b.shape:
            return True
        if b.dims is None:
            return False
        keep, drop = b.outer_shapes()
        return shape in (keep, drop) or (_broadcasts_to(shape, keep) and len(shape) == len(keep))

    def _follows_in(self, b: _Building, node: Node) -> bool:
        """``node`` is laid out like a value ``b`` computes, though its shape is not the domain's: a view that
        inserts or removes size-1 dims of such a value (``instance_norm`` computed over ``[1, B*C, H, W]``,
        then viewed back), or an element-wise node with such a view's shape as an operand's (the row program
        takes its layout from that operand)."""
        out = node.outputs[0]
        for vid in node.inputs:
            home = self.group_of.get(vid)
            if home is None or self.groups[home] is not b or vid in self.recomputable:
                continue
            if node.op == "view":
                return all(_squeezed(g.type(vid).shape) == _squeezed(g.type(out).shape) for g in self.graphs)
            if op_class(node.op) == "pointwise" and all(g.type(vid).shape == g.type(out).shape for g in self.graphs):
                return True
        return False

    def _row_group_for(self, node: Node, fits: Any, any_group: bool = True) -> int | None:
        """The row group a node joins: the group computing its latest input if it fits, else a later row
        group that fits (it runs after every input is ready), else None for a new group."""
        stored = [self._storage(i) for i in node.inputs]  # a view's producer is its storage's
        producers = {self.group_of[i] for i in stored if i in self.group_of and i not in self.recomputable}
        sources = [self._storage(self.strided[i]) for i in node.inputs if i in self.strided]
        after = [self.group_of[b] + 1 for b in sources if b in self.group_of]  # read from memory: a later kernel
        if producers or after:
            lo = max([*producers, *after])
            order = range(lo, len(self.groups))
        elif any_group:
            order = range(len(self.groups) - 1, -1, -1)
        else:
            return None
        for index in order:
            building = self.groups[index]
            if building.is_row and fits(building):
                return index
        return None

    def _join(self, target: int, node: Node) -> None:
        self.groups[target].nodes.append(node.index)
        for o in node.outputs:
            self.group_of[o] = target

    def _is_leafish(self, vid: int) -> bool:
        value = self.g.value(vid)
        return value.producer is None or vid in self.recomputable or vid in self.strided

    # fused cats
    def _fusable_cats(self) -> set[int]:
        """The cats row kernels compute in place (module docstring): every part computable anywhere, every
        user element-wise or a reduction, not an output, parts of the output's dtype and rank, no cat inside."""
        found = set()
        for node in self.g.nodes:
            if node.op != "cat" or len(node.inputs) > MAX_FUSED_PARTS:
                continue
            out = node.outputs[0]
            out_type = self.g.type(out)
            users = self.g.users(out)
            if out in self.g.outputs or not users or any(op_class(u.op) not in ("pointwise", "reduce") for u in users):
                continue
            parts_ok = all(
                self.g.type(p).dtype == out_type.dtype
                and self.g.type(p).ndim == out_type.ndim
                and not self.g.value(p).is_const
                and self._computable_anywhere(p)
                for p in node.inputs
            )
            if parts_ok:
                found.add(node.index)
        return found

    def _computable_anywhere(self, vid: int) -> bool:
        """A graph input, a reshaping view or a slice of one, or element-wise ops over those (and constants)."""
        value = self.g.value(vid)
        if value.is_const or value.producer is None:
            return True
        producer = self.g.producer(vid)
        assert producer is not None
        if producer.op in ("view", "slice"):
            source = self.g.value(producer.inputs[0])
            return source.producer is None and not source.is_const
        if op_class(producer.op) != "pointwise" or producer.op in ("gather", "triu", "tril"):
            return False
        return all(self._computable_anywhere(i) for i in producer.inputs)

    def _views_an_input(self, vid: int) -> bool:
        """A reshaping view of a graph input (eval batch norm's ``running_var.view(1, C, 1, 1)``): stored memory."""
        base = self._storage(vid)
        return base != vid and self.g.value(base).producer is None and not self.g.value(base).is_const

    def _is_storage_view(self, node: Node) -> bool:
        """A view whose input is stored memory (an input, or a value a kernel materializes): no work."""
        src = node.inputs[0]
        base = src
        while base in self.aliases:
            base = self.aliases[base]
        value = self.g.value(base)
        if value.producer is None and not value.is_const:
            return True
        group = self.group_of.get(base)
        if group is None:
            return False
        building = self.groups[group]
        if not building.is_row:
            return True  # dedicated kernels write their outputs to memory
        # inserting or removing size-1 dims is an alias inside the row group, not a storage view
        return _squeezed(self.g.type(src).shape) != _squeezed(self.g.type(node.outputs[0]).shape)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target), strict=False))


def _leaves(g: Graph, vid: int, recomputable: set[int], inside: set[int]) -> list[int]:
    """The stored tensors a recomputable value is computed from (views kept: they carry the shape)."""
    value = g.value(vid)
    if value.is_const or vid in inside:
        return []
    if value.producer is None or vid not in recomputable:
        return [vid]
    found: list[int] = []
    for i in g.nodes[value.producer].inputs:
        for leaf in _leaves(g, i, recomputable, inside):
            if leaf not in found:
                found.append(leaf)
    return found


def _scan_prologue(graphs: list[Graph], vid: int, recomputable: set[int], strided: dict[int, int]) -> bool:
    """``vid`` is computed element-wise from graph inputs of its own shape (no broadcast, view or slice; scalar
    constants, the same at every shape set), in at most :data:`MAX_PROLOGUE_NODES` nodes: a scan kernel
    recomputes it at each load from one linear index (masked_cumsum's ``cumsum(x * mask)``: one pass, where
    writing the product and reading it back cost two more)."""
    g = graphs[0]
    seen: set[int] = set()
    computed = 0
    pending = [vid]
    while pending:
        u = pending.pop()
        if u in seen:
            continue
        seen.add(u)
        value = g.value(u)
        if value.is_const:
            if not isinstance(value.const, (bool, int, float)) or len({gr.value(u).const for gr in graphs}) > 1:
                return False
            continue
        if u in strided or any(gr.type(u).shape != gr.type(vid).shape for gr in graphs):
            return False
        if value.producer is None:
            continue
        node = g.nodes[value.producer]
        if u not in recomputable or op_class(node.op) != "pointwise":
            return False
        computed += 1
        pending.extend(node.inputs)
    return 0 < computed <= MAX_PROLOGUE_NODES


def make_plan(graphs: list[Graph]) -> Plan:
    """Plan kernels for a task from its graphs at every shape set (see the module docstring)."""
    cleaned = [cse(g) for g in sink_views([cse(g) for g in fold_product_sums([cse(g) for g in graphs])])]
    planner = _Planner(cleaned[0], cleaned)
    buildings = planner.plan()
    g = cleaned[0]
    produced_in: dict[int, int] = {}
    for gi, b in enumerate(buildings):
        for n in b.nodes:
            for o in g.nodes[n].outputs:
                produced_in[o] = gi

    def storage(vid: int) -> int:
        while vid in planner.aliases:
            vid = planner.aliases[vid]
        return vid

    groups: list[Group] = []
    materialized: set[int] = set()
    inputs_of: list[list[int]] = [[] for _ in buildings]
    outputs_of: list[list[int]] = [[] for _ in buildings]
    for gi, b in enumerate(buildings):
        inside = {o for n in b.nodes for o in g.nodes[n].outputs}
        for n in b.nodes:
            product = b.template in served("product")
            epilogue = product and g.nodes[n].op not in ("matmul", "conv")  # recomputes, as row groups do
            for vid in g.nodes[n].inputs:
                if vid in planner.strided:  # read in place: its source must be in memory before this kernel
                    base = storage(planner.strided[vid])
                    if produced_in.get(base) is not None and produced_in[base] != gi:
                        materialized.add(base)
                if vid in inside or g.value(vid).is_const or (product and storage(vid) in inside):
                    continue
                home = produced_in.get(storage(vid))
                prologue = b.template == "scan" and _scan_prologue(cleaned, vid, planner.recomputable, planner.strided)
                recomputed = b.is_row or epilogue or prologue
                if home is not None and home != gi and storage(vid) in planner.recomputable and recomputed:
                    for leaf in _leaves(g, vid, planner.recomputable, inside):  # recomputed here from its leaves
                        if leaf in planner.strided:  # a slice read in place: its source in memory first
                            base = storage(planner.strided[leaf])
                            if produced_in.get(base) is not None and produced_in[base] != gi:
                                materialized.add(base)
                        if leaf not in inputs_of[gi]:
                            inputs_of[gi].append(leaf)
                    continue
                if home is not None and home != gi:
                    materialized.add(storage(vid))
                if vid not in inputs_of[gi]:
                    inputs_of[gi].append(vid)
    for vid in [*materialized, *(storage(o) for o in g.outputs)]:
        home = produced_in.get(vid)
        if home is not None and vid not in outputs_of[home]:
            outputs_of[home].append(vid)
    # A kernel left with nothing to write only computed values that every reader recomputes (an
    # element-wise value over inputs that a GEMM epilogue inlines): it is dropped.
    keep = [
        gi
        for gi, b in enumerate(buildings)
        if outputs_of[gi] or not all(o in planner.recomputable for n in b.nodes for o in g.nodes[n].outputs)
    ]
    buildings = [buildings[gi] for gi in keep]
    inputs_of = [inputs_of[gi] for gi in keep]
    outputs_of = [outputs_of[gi] for gi in keep]
    for gi, b in enumerate(buildings):
        spec = dict(b.spec)
        if b.template in served("product"):
            spec.update(
                {
                    "recomputable": tuple(sorted(planner.recomputable)),
                    "aliases": tuple(sorted(planner.aliases.items())),
                }
            )
        if b.is_row:
            spec.update(
                {
                    "shape": b.shape,
                    "dims": b.dims or (),
                    "recomputable": tuple(sorted(planner.recomputable)),
                    "aliases": tuple(sorted(planner.aliases.items())),
                    "strided": tuple(sorted(planner.strided.items())),
                }
            )
        typed = family(b.template).spec(spec)
        groups.append(Group(gi, b.template, tuple(b.nodes), tuple(inputs_of[gi]), tuple(outputs_of[gi]), g, typed))
    unplaced = [
        storage(o) for o in g.outputs if storage(o) not in produced_in and g.value(storage(o)).producer is not None
    ]
    if unplaced:
        raise TemplateError(f"the planner placed no kernel for output value(s) {unplaced}")
    if not groups:
        raise TemplateError("the reference computes nothing a kernel could do (it returns an input or a constant)")
    materialized_values = tuple(sorted(materialized - set(g.outputs)))
    return Plan(tuple(cleaned), tuple(groups), materialized_values, dict(planner.aliases), dict(planner.strided))
