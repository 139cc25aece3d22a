"""A product summed over its columns, folded into its weight: ``sum_n (a @ b)[m, n] = a @ (sum_n b[:, n])``.

``torch.sum(x @ W.T, dim=1)`` (level 2's 14 and 18, and 51's mean) computes an ``M×N×K`` GEMM and then throws
away all but one number a row. The sum is linear, so it moves into the weight: one pass over ``W`` sums its
columns into a ``K``-vector, and a GEMV takes each row of ``a`` against it — the GEMM's flops are gone, ``W`` is
read once, and the result is nearer the exact answer than the reference's (which rounds each of the ``N``
products before summing them: on such a sum it is the reference that is ill-conditioned).

What folds: a 2-D ``matmul`` whose only user starts a chain of linear element-wise ops — ``mul`` or ``div`` by a
single-element operand, ``neg``, ``add`` or ``sub`` of a column vector (``[N]`` or ``[1, N]``; folded into its own
sum or mean) — ending in a ``sum`` or ``mean`` over the product's last dim, each link the only user of the one
before. For a ``mean`` an added single-element or per-row ``[M, 1]`` operand passes through unchanged (the mean of
a constant is itself); for a ``sum`` it would be scaled by ``N``, a size, and that chain is left alone (the graph
carries sizes only in shapes). The folded chain runs on ``[M, 1]`` values; a ``keepdim=False`` reduction becomes
a view to ``[M]``. Float32 only: a half-precision reference rounds the product before summing, and a half weight
sum would round where the reference does not. Every shape set's graph folds the same way, or none does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from optiml.graph.ir import Graph, Node, TensorType, Value

#: the reductions that fold, and the element-wise ops a chain to them may hold
REDUCTIONS = ("sum", "mean")
_SCALES = ("mul", "div")
_SHIFTS = ("add", "sub")


@dataclass(frozen=True)
class _Fold:
    """One foldable product: its ``matmul``, the linear chain after it, and the reduction ending the chain."""

    product: Node
    chain: tuple[Node, ...]
    reduction: Node


def fold_product_sums(graphs: list[Graph]) -> list[Graph]:
    """Every shape set's graph with each column sum (or mean) of a product folded into its weight; the graphs
    as they were where they would not all fold alike."""
    folded = [_fold_all(g) for g in graphs]
    if any(f is g for f, g in zip(folded, graphs, strict=True)):
        return graphs
    if len({f.signature() for f in folded}) > 1:
        return graphs
    return folded


def _fold_all(graph: Graph) -> Graph:
    """``graph`` with every foldable product folded (the same object where none is)."""
    found = [fold for node in graph.nodes if (fold := _foldable(graph, node)) is not None]
    if not found:
        return graph
    return _Rewriter(graph, found).run()


def _foldable(graph: Graph, reduction: Node) -> _Fold | None:
    """The fold that ends at ``reduction``, or None where the chain back to a product is not linear."""
    if reduction.op not in REDUCTIONS or len(reduction.inputs) != 1:
        return None
    source = graph.type(reduction.inputs[0])
    if source.dtype != "float32" or source.ndim != 2 or tuple(reduction.attr("dims", ())) != (1,):
        return None
    chain: list[Node] = []
    current, reader = reduction.inputs[0], reduction
    while True:
        if current in graph.outputs or [n.index for n in graph.users(current)] != [reader.index]:
            return None
        producer = graph.producer(current)
        if producer is None:
            return None
        if producer.op == "matmul":
            return _Fold(producer, tuple(reversed(chain)), reduction) if _plain_product(graph, producer) else None
        path = _path_input(graph, producer, source.shape)
        if path is None or not _linear(graph, producer, path, source.shape, reduction.op):
            return None
        chain.append(producer)
        current, reader = producer.inputs[path], producer


def _plain_product(graph: Graph, node: Node) -> bool:
    """A 2-D product of 2-D operands (no batch dims, no vector operand)."""
    return node.attr("batch", 0) == 0 and all(graph.type(v).ndim == 2 for v in node.inputs)


def _path_input(graph: Graph, node: Node, shape: tuple[int, ...]) -> int | None:
    """Which input of ``node`` carries the product (the one of the product's shape); None if not exactly one."""
    full = [k for k, v in enumerate(node.inputs) if not graph.value(v).is_const and graph.type(v).shape == shape]
    return full[0] if len(full) == 1 and graph.type(node.outputs[0]).shape == shape else None


def _side_kind(graph: Graph, vid: int, shape: tuple[int, ...]) -> str | None:
    """How a side operand broadcasts over the product's ``[M, N]``: ``"scalar"``, ``"column"`` (one value a
    column: ``[N]``, ``[1, N]``), ``"row"`` (``[M, 1]``); None for anything else."""
    side = graph.type(vid).shape
    rows, columns = shape
    if all(s == 1 for s in side):
        return "scalar"
    if side in ((columns,), (1, columns)):
        return "column"
    if side == (rows, 1):
        return "row"
    return None


def _linear(graph: Graph, node: Node, path: int, shape: tuple[int, ...], reduction: str) -> bool:
    """Whether ``node`` is linear in its ``path`` input, so that the reduction moves ahead of it."""
    if node.op == "neg":
        return True
    if len(node.inputs) != 2:
        return False
    kind = _side_kind(graph, node.inputs[1 - path], shape)
    if node.op in _SCALES:
        return kind == "scalar" and (node.op == "mul" or path == 0)
    if node.op in _SHIFTS:
        return kind == "column" or (reduction == "mean" and kind in ("scalar", "row"))
    return False


class _Rewriter:
    """Emits ``graph``'s nodes in order, each fold's product, chain and reduction replaced by their folded form."""

    def __init__(self, graph: Graph, folds: list[_Fold]) -> None:
        self.graph = graph
        self.values: list[Value] = list(graph.values)
        self.nodes: list[Node] = []
        self.renamed: dict[int, int] = {}  # an original value → the value standing for it now
        self.by_node = {n.index: fold for fold in folds for n in (fold.product, *fold.chain, fold.reduction)}

    def run(self) -> Graph:
        for node in self.graph.nodes:
            fold = self.by_node.get(node.index)
            if fold is None:
                self._emit(node.op, [self._now(v) for v in node.inputs], node.attrs, node.target, node.outputs)
            elif node is fold.product:
                self._fold_product(fold)
            elif node is fold.reduction:
                self._end(fold)
            else:
                self._fold_link(fold, node)
        outputs = tuple(self._now(v) for v in self.graph.outputs)
        stale = {o for fold in self.by_node.values() for n in (fold.product, *fold.chain) for o in n.outputs}
        for vid in stale:  # no node computes these any more
            self.values[vid] = replace(self.values[vid], producer=None)
        return Graph(tuple(self.values), self.graph.inputs, tuple(self.nodes), outputs, self.graph.input_names)

    def _now(self, vid: int) -> int:
        return self.renamed.get(vid, vid)

    def _emit(self, op: str, inputs: list[int], attrs: tuple, target: str, outputs: tuple[int, ...]) -> None:
        """Append a node computing ``outputs`` (their producer set to it)."""
        index = len(self.nodes)
        for o in outputs:
            self.values[o] = replace(self.values[o], producer=index)
        self.nodes.append(Node(index, op, tuple(inputs), outputs, attrs, target))

    def _node(self, op: str, inputs: list[int], shape: tuple[int, ...], dtype: str, attrs: tuple, target: str) -> int:
        """Append a node computing one new value of ``shape``; its id."""
        vid = len(self.values)
        self.values.append(Value(vid, TensorType(shape, dtype)))
        self._emit(op, inputs, attrs, target, (vid,))
        return vid

    def _reduced(self, fold: _Fold, vid: int, dim: int) -> int:
        """``vid`` summed (or averaged, as the fold's reduction) over ``dim``, keeping it as size 1."""
        shape = list(self.graph.type(vid).shape)
        shape[dim] = 1
        attrs = (("dims", (dim,)), ("keepdim", True))
        dtype = self.graph.type(vid).dtype
        return self._node(fold.reduction.op, [self._now(vid)], tuple(shape), dtype, attrs, fold.reduction.target)

    def _fold_product(self, fold: _Fold) -> None:
        """``a @ b`` → ``a @ reduce(b)``: the weight's columns summed (averaged) into one."""
        product = fold.product
        a, b = product.inputs
        columns_dim = 0 if product.attr("trans_b", False) else 1  # where b keeps the product's N
        weight = self._reduced(fold, b, columns_dim)
        out = self.graph.type(product.outputs[0])
        self.renamed[product.outputs[0]] = self._node(
            "matmul", [self._now(a), weight], (out.shape[0], 1), out.dtype, product.attrs, product.target
        )

    def _fold_link(self, fold: _Fold, node: Node) -> None:
        """One link of the chain on the folded ``[M, 1]`` value; a column operand reduced as the product was."""
        shape = self.graph.type(fold.reduction.inputs[0]).shape
        inputs = []
        for vid in node.inputs:
            if vid in self.renamed or self.graph.value(vid).is_const:
                inputs.append(self._now(vid))
            elif _side_kind(self.graph, vid, shape) == "column":
                inputs.append(self._reduced(fold, vid, self.graph.type(vid).ndim - 1))
            else:
                inputs.append(vid)
        out = self.graph.type(node.outputs[0])
        self.renamed[node.outputs[0]] = self._node(node.op, inputs, (shape[0], 1), out.dtype, node.attrs, node.target)

    def _end(self, fold: _Fold) -> None:
        """The reduction is done: its output is the folded chain's last value (viewed to ``[M]`` without keepdim)."""
        last = self._now(fold.reduction.inputs[0])
        out = fold.reduction.outputs[0]
        if fold.reduction.attr("keepdim", False):
            self.renamed[out] = last
            return
        shape = self.graph.type(out).shape
        self._emit("view", [last], (("shape", shape),), fold.reduction.target, (out,))
