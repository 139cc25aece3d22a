"""Element-wise ops moved ahead of the reshape that feeds them, so that they join the kernel computing its source.

GroupNorm is computed over ``[N, groups, C / groups, H*W]`` and viewed back to ``[N, C, H, W]``; a clamp, a
per-channel scale or a residual add after it is written over the viewed shape, so the planner gave it a kernel of
its own (one more pass over the output). Here ``f(view(y), w)`` becomes ``view(f(y, w'))``: ``f`` over ``y``'s
shape, each other operand ``w`` a view of itself onto that shape (``[C, 1, 1]`` → ``[1, groups, C / groups, 1]``),
and the chain goes on through ``f``'s users. An operand can be re-viewed when, within every run of dims the
reshape merges or splits, it is either broadcast over the whole run or spans all of it; constants and
single-element operands go as they are. Other operands are the graph's inputs or a convolution's or product's
output (in memory either way): a node that also reads a value another kernel's program computes (the max of a
log-sum-exp over the viewed channels) stays where it is, with that program. A view that only inserts or removes
size-1 dims is left alone (the planner already follows those), and so is every case where a shape set disagrees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from optiml.graph.ir import Graph, Node, TensorType, Value
from optiml.graph.ops import op_class

#: op classes whose kernels write their output to memory, which a view then reads in place
STORED = ("conv", "matmul")


def reshape_runs(out: tuple[int, ...], src: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
    """The runs of ``out``'s dims and ``src``'s dims a reshape maps onto each other (equal products), in order;
    None for an empty tensor or sizes that do not pair up."""
    if 0 in out or 0 in src:
        return None
    runs: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(out) and j < len(src):
        dims_o, dims_s = [i], [j]
        size_o, size_s = out[i], src[j]
        i, j = i + 1, j + 1
        while size_o != size_s:
            if size_o < size_s and i < len(out):
                dims_o.append(i)
                size_o, i = size_o * out[i], i + 1
            elif size_s < size_o and j < len(src):
                dims_s.append(j)
                size_s, j = size_s * src[j], j + 1
            else:
                return None
        runs.append((dims_o, dims_s))
    rest_o, rest_s = list(range(i, len(out))), list(range(j, len(src)))
    if any(out[d] != 1 for d in rest_o) or any(src[d] != 1 for d in rest_s):
        return None
    if runs and (rest_o or rest_s):
        runs[-1][0].extend(rest_o)
        runs[-1][1].extend(rest_s)
    return runs


def operand_shape(operand: tuple[int, ...], out: tuple[int, ...], src: tuple[int, ...]) -> tuple[int, ...] | None:
    """``operand`` (broadcast against ``out``) as a shape that broadcasts the same way against ``src``, or None."""
    if len(operand) > len(out):
        return None
    padded = (1,) * (len(out) - len(operand)) + operand
    runs = reshape_runs(out, src)
    if runs is None:
        return None
    shape = [1] * len(src)
    for dims_o, dims_s in runs:
        if all(padded[d] == 1 for d in dims_o):
            continue
        if any(padded[d] != out[d] for d in dims_o):
            return None  # broadcast over part of a run: no view of the operand walks it
        for d in dims_s:
            shape[d] = src[d]
    return tuple(shape)


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


class _Sinker:
    """Rewrites the graphs of every shape set together: a node moves only where it can in all of them."""

    def __init__(self, graphs: list[Graph]) -> None:
        self.graphs = graphs
        self.values = [list(g.values) for g in graphs]
        self.nodes: list[list[Node]] = [[] for _ in graphs]
        self.source: dict[int, int] = {}  # a value → the value it is a reshape of (the same elements, in order)
        self.moved = 0

    def run(self) -> list[Graph]:
        for k, node in enumerate(self.graphs[0].nodes):
            if node.op == "view" and self._reshapes_computed(node):
                self.source[node.outputs[0]] = node.inputs[0]
            if op_class(node.op) == "pointwise" and self._sink(node):
                continue
            self._add(node, [g.nodes[k].attrs for g in self.graphs])
        if not self.moved:
            return self.graphs
        return [
            Graph(tuple(values), g.inputs, tuple(nodes), g.outputs, g.input_names)
            for values, nodes, g in zip(self.values, self.nodes, self.graphs, strict=True)
        ]

    def _reshapes_computed(self, node: Node) -> bool:
        """A reshape (not only size-1 dims in or out) of an element-wise result or a broadcast: what a kernel
        computes (an input, a slice or a view of one is read in place already)."""
        src, out = node.inputs[0], node.outputs[0]
        producer = self.graphs[0].producer(src)
        if producer is None or (op_class(producer.op) != "pointwise" and producer.op != "expand"):
            return False
        return all(
            g.type(src).numel == g.type(out).numel and _squeezed(g.type(src).shape) != _squeezed(g.type(out).shape)
            for g in self.graphs
        )

    def _shape(self, g: int, vid: int) -> tuple[int, ...]:
        return self.values[g][vid].type.shape

    def _each(self, shape_at: Callable[[int], tuple[int, ...] | None]) -> list[tuple[int, ...]] | None:
        shapes = [shape_at(g) for g in range(len(self.graphs))]
        known = [s for s in shapes if s is not None]
        return known if len(known) == len(shapes) else None

    def _sink(self, node: Node) -> bool:
        """Emit ``node`` over its reshaped operand's source shape, then a view back to its own output; False
        (nothing emitted) where it cannot move."""
        out = node.outputs[0]
        viewed = [i for i in node.inputs if i in self.source]
        if len(node.outputs) != 1 or not viewed:
            return False
        first = self.source[viewed[0]]
        if any(self._shape(g, viewed[0]) != self._shape(g, out) for g in range(len(self.graphs))):
            return False  # another operand broadcasts the reshaped value up: not one element for one
        plan: list[int | list[tuple[int, ...]]] = []
        for vid in node.inputs:
            operand = self._operand(vid, first, out)
            if operand is None:
                return False
            plan.append(operand)
        inputs = tuple(
            item if isinstance(item, int) else self._view(vid, item)
            for vid, item in zip(node.inputs, plan, strict=True)
        )
        dtype = self.graphs[0].type(out).dtype
        result = self._value([TensorType(self._shape(g, first), dtype) for g in range(len(self.graphs))])
        self._add(replace(node, inputs=inputs, outputs=(result,)), [g.nodes[node.index].attrs for g in self.graphs])
        back = Node(0, "view", (result,), (out,), target="aten.view")
        self._add(back, [(("shape", self._shape(g, out)),) for g in range(len(self.graphs))])
        self.source[out] = result
        self.moved += 1
        return True

    def _operand(self, vid: int, first: int, out: int) -> int | list[tuple[int, ...]] | None:
        """``vid`` as an operand over ``first``'s shape: a value id to use as it is, the shapes (one a shape set)
        to view it to, or None where no view walks it."""
        source = self.source.get(vid)
        if source is not None and all(self._shape(g, source) == self._shape(g, first) for g in range(len(self.graphs))):
            return source
        if self.graphs[0].value(vid).is_const or all(not self._shape(g, vid) for g in range(len(self.graphs))):
            return vid  # a number, or a 0-dim tensor: broadcast alike over any shape
        producer = self.graphs[0].producer(vid)
        if producer is not None and op_class(producer.op) not in STORED:
            return None  # computed by another kernel's program (a reduction's max): the node stays with it
        return self._each(lambda g: operand_shape(self._shape(g, vid), self._shape(g, out), self._shape(g, first)))

    def _value(self, types: list[TensorType]) -> int:
        vid = len(self.values[0])
        for values, t in zip(self.values, types, strict=True):
            values.append(Value(vid, t))
        return vid

    def _view(self, vid: int, shapes: list[tuple[int, ...]]) -> int:
        dtype = self.graphs[0].type(vid).dtype
        viewed = self._value([TensorType(s, dtype) for s in shapes])
        self._add(Node(0, "view", (vid,), (viewed,), target="aten.view"), [(("shape", s),) for s in shapes])
        return viewed

    def _add(self, node: Node, attrs: list[tuple[tuple[str, Any], ...]]) -> None:
        """Append ``node`` to every shape set's graph (each with its own attrs) as the producer of its outputs."""
        for nodes, values, own in zip(self.nodes, self.values, attrs, strict=True):
            index = len(nodes)
            nodes.append(replace(node, index=index, attrs=own))
            for o in node.outputs:
                values[o] = replace(values[o], producer=index)


def sink_views(graphs: list[Graph]) -> list[Graph]:
    """The graphs with element-wise ops moved ahead of reshapes of computed values (module docstring)."""
    return _Sinker(graphs).run()
