"""Run-time sizes as C expressions over the ABI tensors, valid at every shape set.

A kernel must not bake the traced sizes in: it reads them from the ``optiml_tensor`` shapes at
each call. For every size the generated code needs (one dim of a graph value), the resolver
finds an ABI input or output dim — or a product of a run of adjacent dims of one tensor (a
flattening view) — that equals it in *every* shape set's trace, and returns it as C code. A size
that is the same constant in every shape set and matches no tensor dim stays a constant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from optiml.errors import TemplateError
from optiml.graph.ir import Graph
from optiml.graph.ops import op_class


@dataclass(frozen=True)
class _Slot:
    expr: str  # C expression of one ABI dim
    values: tuple[int, ...]  # its size at each shape set


class SizeResolver:
    """Maps (value id, dim) of the graph to a C ``int64_t`` expression."""

    def __init__(self, graphs: list[Graph], inputs_only: bool = False) -> None:
        """``inputs_only``: expressions over the inputs alone (what ``optiml_workspace_bytes`` can see)."""
        self.graphs = graphs
        self.inputs_only = inputs_only
        g0 = graphs[0]
        self._tensors: list[tuple[str, list[tuple[int, ...]]]] = []
        for k, vid in enumerate(g0.inputs):
            if not g0.value(vid).scalar:
                self._tensors.append((f"inputs[{k}]", [g.type(g.inputs[k]).shape for g in graphs]))
        for k in range(0 if inputs_only else len(g0.outputs)):
            self._tensors.append((f"outputs[{k}]", [g.type(g.outputs[k]).shape for g in graphs]))
        self._cache: dict[tuple[int, ...], str] = {}

    def values_of(self, vid: int, dim: int) -> tuple[int, ...]:
        return tuple(g.type(vid).shape[dim] for g in self.graphs)

    def dim(self, vid: int, dim: int) -> str:
        g0 = self.graphs[0]
        for k, slot in enumerate(g0.inputs):  # an ABI tensor's own dim, whatever its value
            if slot == vid and not g0.value(vid).scalar:
                return f"inputs[{k}].shape[{dim}]"
        if vid in g0.outputs and not self.inputs_only:
            return f"outputs[{g0.outputs.index(vid)}].shape[{dim}]"
        try:
            return self.size(self.values_of(vid, dim), dim, g0.type(vid).ndim)
        except TemplateError:
            derived = self._derived(vid, dim)
            if derived is None:
                raise
            return derived

    def constant_dim(self, vid: int, dim: int) -> int | None:
        """The size where the kernel takes it as a constant at every call (it matches no tensor dim at every shape
        set: an upsampling factor), not from the tensors' shapes; None otherwise."""
        found = _CONSTANT.fullmatch(self.dim(vid, dim))
        return int(found[1]) if found else None

    def _derived(self, vid: int, dim: int) -> str | None:
        """An op's output size as its formula over the op's input sizes, where no tensor dim equals it
        at every shape set: a concatenated dim (the parts' sum), a pooled or convolved spatial dim
        (PyTorch's output-size rules, ceil mode included), or an element-wise op's operand's size.
        None for any other size."""
        node = self.graphs[0].producer(vid)
        if node is None:
            return None
        if op_class(node.op) in ("pointwise", "triangular"):  # the size of an operand it has at every shape set
            values = self.values_of(vid, dim)
            ndim = self.graphs[0].type(vid).ndim
            for operand in node.inputs:
                value = self.graphs[0].value(operand)
                if not value.is_const and value.type.ndim == ndim and self.values_of(operand, dim) == values:
                    return self.dim(operand, dim)
            return None
        if node.op == "cat":
            if dim != node.attr("dim"):
                return self.dim(node.inputs[0], dim)
            return "(" + " + ".join(f"(int64_t)({self.dim(part, dim)})" for part in node.inputs) + ")"
        if node.op not in ("max_pool", "avg_pool", "conv"):
            return None
        x = node.inputs[0]
        leading = self.graphs[0].type(x).ndim - int(node.attr("spatial"))
        i = dim - leading
        if i < 0:
            return None
        size = f"(int64_t)({self.dim(x, dim)})"
        stride, pad, dilation = (int(node.attr(name)[i]) for name in ("stride", "padding", "dilation"))
        if node.op == "conv":
            kernel = f"(int64_t)({self.dim(node.inputs[1], 2 + i)})"
            if node.attr("transposed"):
                extra = int(node.attr("output_padding")[i])
                return f"(({size} - 1) * {stride} - {2 * pad} + {dilation} * ({kernel} - 1) + {extra} + 1)"
            return f"(({size} + {2 * pad} - {dilation} * ({kernel} - 1) - 1) / {stride} + 1)"
        span = f"({size} + {2 * pad - dilation * (int(node.attr('kernel')[i]) - 1) - 1})"
        if not node.attr("ceil_mode"):
            return f"({span} / {stride} + 1)"
        up = f"(({span} + {stride - 1}) / {stride} + 1)"  # the last window must start inside the input or padding
        return f"({up} - (({up} - 1) * {stride} >= {size} + {pad} ? 1 : 0))"

    def size(self, values: tuple[int, ...], hint_dim: int = -1, hint_ndim: int = -1) -> str:
        """A C expression equal to ``values[s]`` at shape set ``s``.

        Where several dims match (one shape set, equal sizes), the same dim index of a tensor of
        the same rank is preferred: element-wise chains keep their producer's layout.
        """
        key = (*values, hint_dim, hint_ndim)
        if key not in self._cache:
            self._cache[key] = self._find(values, hint_dim, hint_ndim)
        return self._cache[key]

    def constant(self, values: tuple[float, ...]) -> str:
        """A C ``double`` expression equal to a size-derived constant at every shape set: a size
        itself (``kl_div``'s batch size) or a power of one (``d ** -0.5``, ``1 / n``). Raises
        ValueError when no such form matches (never truncated to an integer)."""
        sign = -1.0 if values and all(v < 0 for v in values) else 1.0
        for power in _SIZE_POWERS:
            sizes = tuple(round(abs(v) ** (1.0 / power)) if v else 0 for v in values)
            if all(
                s >= 1 and math.isclose(sign * s**power, v, rel_tol=1e-9) for s, v in zip(sizes, values, strict=True)
            ):
                base = f"(double)({self.size(sizes)})"
                expr = base if power == 1 else f"pow({base}, {power!r})"
                return f"(-{expr})" if sign < 0 else expr
        raise ValueError(f"a size-derived constant {values} is neither a size nor a power of one")

    def _find(self, values: tuple[int, ...], hint_dim: int, hint_ndim: int) -> str:
        if all(v == 1 for v in values):
            return _constant(1)
        matches = []
        for name, shapes in self._tensors:  # a single dim
            ndim = len(shapes[0])
            for d in range(ndim):
                if all(len(s) == ndim and s[d] == v for s, v in zip(shapes, values, strict=True)):
                    matches.append((0 if (d, ndim) == (hint_dim, hint_ndim) else 1, f"{name}.shape[{d}]"))
        if matches:
            return min(matches, key=lambda m: m[0])[1]
        for run, products in self._runs(2):  # a run of adjacent dims (a flattening view)
            if products == values:
                return f"({run})"
        if len(set(values)) == 1:
            return _constant(values[0])
        for run, products in self._runs(1):  # a run of dims over a constant (GroupNorm's C*H*W / G)
            if all(v and p % v == 0 for p, v in zip(products, values, strict=True)):
                ratios = {p // v for p, v in zip(products, values, strict=True)}
                if len(ratios) == 1:
                    return f"(({run}) / {ratios.pop()})"
        for run, products in self._runs(1):  # a run of dims less a small constant (a variance's n - 1)
            offsets = {p - v for p, v in zip(products, values, strict=True)}
            if len(offsets) == 1 and 0 < abs(offset := offsets.pop()) <= MAX_SIZE_OFFSET:
                return f"(({run}) - {offset})"
        raise TemplateError(
            f"a size ({', '.join(map(str, values))} across the shape sets) matches no input or output dim"
        )

    def _runs(self, shortest: int) -> Iterator[tuple[str, tuple[int, ...]]]:
        """Every run of at least ``shortest`` adjacent dims of every named tensor: its C product
        ("x.shape[1] * x.shape[2]") and its value at each shape set."""
        for name, shapes in self._tensors:
            ndim = len(shapes[0])
            for start in range(ndim):
                for stop in range(start + shortest, ndim + 1):
                    run = " * ".join(f"{name}.shape[{d}]" for d in range(start, stop))
                    yield run, tuple(_prod(s[start:stop]) for s in shapes)


def _constant(value: int) -> str:
    """A size the kernel takes as written (:meth:`SizeResolver.constant_dim` reads it back)."""
    return f"((int64_t){value})"


_CONSTANT = re.compile(r"\(\(int64_t\)(\d+)\)")


def _prod(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


#: The powers of a size :meth:`SizeResolver.constant` recognises, most common first (``scaled_dot_product_attention``
#: scales both ``q`` and ``k`` by ``d ** -0.25``).
_SIZE_POWERS = (1, -1, -0.5, 0.5, 2, -2, -0.25, 0.25)
#: how far a size may sit from a run of dims and still be named by it (``torch.var``'s unbiased n - 1)
MAX_SIZE_OFFSET = 2
