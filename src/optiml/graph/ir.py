"""The op graph of a task's reference: a small IR of frozen dataclasses.

:func:`optiml.graph.capture.capture_graph` traces ``Model.forward`` on the meta device into
this form. Values are tensors (or constants and host scalars); nodes are ops with canonical
short names (``"add"``, ``"exp"``, ``"sum"``, ``"cumsum"``, ``"max_pool2d"``, ``"permute"``, …)
whose non-tensor arguments live in ``attrs``. The graph's inputs are the ABI inputs in order:
``forward()`` arguments, then ``Model.state_dict()`` entries. Shapes are those of the traced
shape set; :mod:`optiml.graph.sizes` turns them into C expressions valid at every shape set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str  # torch dtype name without the prefix: "float32", "int64", "bool", …

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES


@dataclass(frozen=True)
class Value:
    """A tensor flowing through the graph, a constant, or a host scalar argument.

    ``const`` is set for a number folded into the graph (``x + 1e-5``); ``scalar`` marks an
    ABI input that is a Python number at run time (a 0-dim host scalar in the ABI).
    """

    id: int
    type: TensorType
    producer: int | None = None  # index of the producing node; None for inputs and constants
    const: float | int | bool | None = None
    scalar: bool = False

    @property
    def is_const(self) -> bool:
        return self.const is not None


@dataclass(frozen=True)
class Node:
    index: int
    op: str  # canonical name, see optiml.graph.ops
    inputs: tuple[int, ...]  # value ids, in the op's argument order
    outputs: tuple[int, ...]  # value ids
    attrs: tuple[tuple[str, Any], ...] = ()
    target: str = ""  # the ATen overload it was traced from, for messages

    def attr(self, name: str, default: Any = None) -> Any:
        for key, value in self.attrs:
            if key == name:
                return value
        return default


@dataclass(frozen=True)
class Graph:
    values: tuple[Value, ...]  # indexed by id
    inputs: tuple[int, ...]  # ABI inputs in order
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]  # ABI outputs in order
    input_names: tuple[str, ...] = field(default=())

    def value(self, vid: int) -> Value:
        return self.values[vid]

    def type(self, vid: int) -> TensorType:
        return self.values[vid].type

    def producer(self, vid: int) -> Node | None:
        p = self.values[vid].producer
        return None if p is None else self.nodes[p]

    def users(self, vid: int) -> list[Node]:
        return [n for n in self.nodes if vid in n.inputs]

    def signature(self) -> tuple[Any, ...]:
        """Structure without sizes: two shape sets of one task must trace to the same signature."""
        return (
            tuple((n.op, n.inputs, n.outputs, _sizeless(n.attrs)) for n in self.nodes),
            self.inputs,
            self.outputs,
            tuple((v.type.ndim, v.type.dtype, v.const is not None) for v in self.values),
        )


def _sizeless(attrs: tuple[tuple[str, Any], ...]) -> tuple[Any, ...]:
    """Attrs minus those that carry sizes (a view's ``shape``, a slice's ``start``, a convolution's
    ``signature``), which differ between shape sets (kernels read them as run-time size expressions)."""
    return tuple((k, v) for k, v in attrs if k not in ("shape", "start", "signature"))
