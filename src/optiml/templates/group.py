"""A planned kernel: the graph nodes one template instance computes, and what it reads and writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from optiml.errors import TemplateError
from optiml.graph.ir import Graph, Node

S = TypeVar("S")


# -- what a group's template needs beyond its nodes (Group.spec), one type per family ------------------
@dataclass(frozen=True)
class RowSpec:
    """A row group's domain ``shape`` and reduced ``dims`` (none: pointwise), and the planner's facts
    its program reads: values it may recompute, views of stored values, slices read in place."""

    shape: tuple[int, ...]
    dims: tuple[int, ...] = ()
    recomputable: tuple[int, ...] = ()
    aliases: tuple[tuple[int, int], ...] = ()
    strided: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ScanSpec:
    """A scan along ``dim``: ``kind`` sum or prod, reversed (``flip → scan → flip``), exclusive."""

    dim: int = -1
    kind: str = "sum"
    reverse: bool = False
    exclusive: bool = False


@dataclass(frozen=True)
class PoolSpec:
    """A pooling node's attributes (as captured) and whether its indices output is used. The pool
    template checks them (a window given as one int or a 1-tuple applies to every spatial dim)."""

    op: str = ""
    spatial: int = 0
    kernel: int | tuple[int, ...] | None = None
    stride: int | tuple[int, ...] | None = None
    padding: int | tuple[int, ...] | None = None
    dilation: int | tuple[int, ...] | None = None
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor: int | None = None
    indices: bool = False

    @classmethod
    def of(cls, attrs: Mapping[str, Any]) -> PoolSpec:
        fields = {k: attrs[k] for k in cls.__dataclass_fields__ if k in attrs}
        return cls(**fields)


@dataclass(frozen=True)
class PermuteSpec:
    """The permutation of a permute group."""

    perm: tuple[int, ...]


@dataclass(frozen=True)
class ProductSpec:
    """What a product group's (GEMM, conv) fused epilogue reads beyond its nodes: the values it may
    recompute from their leaves and the views of stored values."""

    recomputable: tuple[int, ...] = ()
    aliases: tuple[tuple[int, int], ...] = ()


#: A group's spec: its family's type, or None where the nodes say everything (cat, slice).
Spec = RowSpec | ScanSpec | PoolSpec | PermuteSpec | ProductSpec


@dataclass(frozen=True)
class Group:
    """One kernel of a plan.

    ``inputs`` are value ids the kernel reads (graph inputs, constants excluded, or values an
    earlier group wrote to the workspace); ``outputs`` the value ids it writes. ``spec`` carries
    what the template needs beyond the nodes, typed per family (:class:`RowSpec`, :class:`ScanSpec`,
    :class:`PoolSpec`, :class:`PermuteSpec`, :class:`ProductSpec`; None for cat and slice); a
    template reads it through :meth:`spec_of`. ``graph`` is the shape-set-0
    graph: traced shapes are for decisions (variant rules), never for the generated code, which
    asks :class:`~optiml.templates.base.RenderContext` for run-time sizes.
    """

    index: int
    template: str  # "pointwise" | "reduce" | "scan" | "pool" | "permute" | "cat" | "slice" | "gemm" | "conv"
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    graph: Graph = field(repr=False, compare=False)
    spec: Spec | None = None

    @property
    def prefix(self) -> str:
        return f"g{self.index}"

    def spec_of(self, kind: type[S]) -> S:
        """The spec as ``kind`` (its defaults where the group has none); TemplateError for another family's."""
        if self.spec is None:
            return kind()
        if not isinstance(self.spec, kind):
            raise TemplateError(f"{self.template}: a {type(self.spec).__name__} where a {kind.__name__} belongs")
        return self.spec

    def describe(self) -> str:
        ops = [self.graph.nodes[i].op for i in self.nodes]
        return f"{self.template}[{' '.join(ops)}]"


def find_node(group: Group, ops: tuple[str, ...]) -> Node | None:
    """The first of ``group``'s nodes whose op is one of ``ops``, or None."""
    for index in group.nodes:
        node = group.graph.nodes[index]
        if node.op in ops:
            return node
    return None
