"""A planned kernel: the graph nodes one template instance computes, and what it reads and writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optiml.graph.ir import Graph, Node


@dataclass(frozen=True)
class Group:
    """One kernel of a plan.

    ``inputs`` are value ids the kernel reads (graph inputs, constants excluded, or values an
    earlier group wrote to the workspace); ``outputs`` the value ids it writes. ``spec`` carries
    what a dedicated template needs beyond the nodes (scan: ``dim``, ``kind``, ``reverse``,
    ``exclusive``; pool: the node's attrs; permute: ``perm``). ``graph`` is the shape-set-0
    graph: traced shapes are for decisions (variant rules), never for the generated code, which
    asks :class:`~optiml.templates.base.RenderContext` for run-time sizes.
    """

    index: int
    template: str  # "pointwise" | "reduce" | "scan" | "pool" | "permute" | "cat" | "slice" | "gemm" | "conv"
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    graph: Graph = field(repr=False, compare=False)
    spec: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return f"g{self.index}"

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
