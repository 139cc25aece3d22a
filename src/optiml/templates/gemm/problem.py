"""The problem model of a GEMM group: the matmul node, its operands' layouts and its traced sizes."""

from __future__ import annotations

from dataclasses import dataclass

from optiml.graph.ir import Graph, Node
from optiml.templates.base import TemplateError
from optiml.templates.group import Group

HALF = ("float16", "bfloat16")
MAX_BATCH_DIMS = 8


@dataclass(frozen=True)
class Traced:
    """The product's sizes at one shape set."""

    batch: int
    m: int
    n: int
    k: int


def prod(values: tuple[int, ...]) -> int:
    n = 1
    for v in values:
        n *= v
    return n


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Problem:
    """The matmul node of a GEMM group: operands, layouts, batch dims and traced sizes."""

    def __init__(self, group: Group, graphs: list[Graph] | None = None) -> None:
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
        # A batch of row-major A against one B (a Linear on a 3-D input, as nn.MultiheadAttention's (L, N, E) gives
        # it: 16 384 batches of 2 rows) is one GEMM of batch * M rows: A's rows follow each other across the batch
        # and the output's rows are numbered the same way (r = z * M + m)
        self.folds_batch = self.nb >= 1 and self.rb == 2 and self.ra == self.nb + 2 and not self.trans_a
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
        batch = prod(so[: self.nb])
        return Traced(1, batch * m, n, k) if self.folds_batch else Traced(batch, m, n, k)

    @property
    def primary(self) -> Traced:
        return self.traced[0]

    def vector_friendly(self) -> bool:
        """At the primary shape, both operands' contiguous dims are multiples of 4 (16-byte fp32 copies)."""
        t = self.primary
        return (t.k if self.a_k_major else t.m) % 4 == 0 and (t.k if self.b_k_major else t.n) % 4 == 0
