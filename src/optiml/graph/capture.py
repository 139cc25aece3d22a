"""Trace a task's ``Model.forward`` on the meta device into the IR of :mod:`optiml.graph.ir`.

``make_fx`` records ATen ops (no memory, no compute) with our decompositions applied; each
ATen op is then mapped onto a canonical IR op. An op with no mapping raises
:class:`UnsupportedOpError` with one line naming it. Capture runs once per shape set, and
:func:`capture_all` checks that every shape set traces to the same structure (a reference whose
control flow depends on sizes would need one kernel per shape set, which the ABI does not allow).
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from optiml.conv_arithmetic import signature
from optiml.errors import TaskError
from optiml.graph.decomps import decomposition_table
from optiml.graph.ir import Graph, Node, TensorType, Value
from optiml.graph.ops import ATEN_POINTWISE
from optiml.graph.random_draws import RandomDrawError, replace_draws
from optiml.graph.recurrent import RecurrentAttrs, RecurrentError, recurrent_as_one_op
from optiml.task import Task

aten = torch.ops.aten


class UnsupportedOpError(TaskError):
    """The reference uses an op no template covers."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _Builder:
    """Accumulates values and nodes while walking an fx graph."""

    def __init__(self) -> None:
        self.values: list[Value] = []
        self.nodes: list[Node] = []

    def value(self, ttype: TensorType, producer: int | None = None, const: Any = None, scalar: bool = False) -> int:
        vid = len(self.values)
        self.values.append(Value(vid, ttype, producer, const, scalar))
        return vid

    def const(self, number: float | int | bool, dtype: str | None = None, shape: tuple[int, ...] = ()) -> int:
        if dtype is None:
            dtype = "bool" if isinstance(number, bool) else "int64" if isinstance(number, int) else "float32"
        return self.value(TensorType(tuple(shape), dtype), const=number)

    def node(self, op: str, inputs: list[int], out_types: list[TensorType], target: str, **attrs: Any) -> list[int]:
        index = len(self.nodes)
        outs = [self.value(t, producer=index) for t in out_types]
        self.nodes.append(Node(index, op, tuple(inputs), tuple(outs), tuple(sorted(attrs.items())), target))
        return outs


def _ttype(meta: Any) -> TensorType:
    return TensorType(tuple(int(s) for s in meta.shape), _dtype_name(meta.dtype))


def _norm_dims(dims: Any, ndim: int) -> tuple[int, ...]:
    if dims is None or dims == []:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(sorted(d % max(ndim, 1) for d in dims))


@dataclass(frozen=True)
class _Diagonal:
    """``diag(v)`` of a vector, not materialised: a factor of a matrix product scales rows or columns."""

    vector: int  # the IR value of v
    name: str  # the fx node, for messages


class _Converter:
    def __init__(self, builder: _Builder) -> None:
        self.b = builder
        self.env: dict[Any, Any] = {}  # fx node → value id, or tuple of ids for multi-output ops

    def operand(self, arg: Any, like_dtype: str = "float32") -> int:
        if isinstance(arg, torch.fx.Node):
            got = self.env[arg]
            if isinstance(got, tuple):
                raise UnsupportedOpError(f"multi-output value {arg.name} used directly")
            if isinstance(got, _Diagonal):
                raise UnsupportedOpError(
                    f"no template for a diagonal matrix ({got.name}) used other than as a factor of a matrix product"
                )
            return int(got)
        if isinstance(arg, (bool, int, float)):
            dtype = "bool" if isinstance(arg, bool) else like_dtype if isinstance(arg, float) else "int64"
            if isinstance(arg, float) and like_dtype not in ("float32", "float64", "float16", "bfloat16"):
                dtype = "float32"
            return self.b.const(arg, dtype)
        raise UnsupportedOpError(f"unsupported operand {arg!r}")

    def convert(self, fx_node: torch.fx.Node) -> Any:
        target = fx_node.target
        args, kwargs = fx_node.args, fx_node.kwargs
        if target is operator.getitem:
            return self.env[args[0]][args[1]]
        meta = fx_node.meta.get("val")
        name = getattr(target, "__name__", str(target))
        packet = name.split(".")[0]
        label = f"aten.{name}"
        outs = [_ttype(m) for m in meta] if isinstance(meta, (tuple, list)) else [_ttype(meta)]
        if packet.endswith("_") and not packet.startswith("_") and isinstance(args[0], torch.fx.Node):
            # an in-place op: compute it functionally; later uses of the mutated tensor see the result
            packet = packet[:-1]
            label = f"aten.{packet}"
            result = self._dispatch(packet, args, kwargs, outs, label)
            self.env[args[0]] = result
            return result
        folded = self._folded(fx_node, packet, outs)
        if folded is not None:
            return folded
        return self._dispatch(packet, args, kwargs, outs, label)

    def _folded(self, fx_node: torch.fx.Node, packet: str, outs: list[TensorType]) -> int | None:
        """An element-wise op of constants as the constant it makes, and ``x * 1``, ``x / 1``, ``x + 0`` and
        ``x - 0`` (the constant no wider than ``x``) as ``x``: a dropout whose mask was replaced by its mean
        (:mod:`optiml.graph.random_draws`) leaves ``x * (p / p)``, which would otherwise cost a kernel of its own
        where a reshape stands between ``x``'s kernel and it. None: the op is computed."""
        target = fx_node.target
        if len(outs) != 1 or torch.Tag.pointwise not in getattr(target, "tags", ()):
            return None
        constants: list[Any] = []
        for arg in fx_node.args:
            if not isinstance(arg, torch.fx.Node):
                constants.append(arg)
                continue
            value = self._constant(arg)
            if value is None:
                constants = []
                break
            constants.append(value)
        if any(isinstance(c, torch.Tensor) for c in constants) and not fx_node.kwargs:
            result = target(*constants)  # type: ignore[operator]
            if isinstance(result, torch.Tensor) and result.numel() == 1:
                return self.b.const(result.item(), outs[0].dtype, outs[0].shape)
        if packet not in ("mul", "div", "add", "sub") or len(fx_node.args) != 2 or fx_node.kwargs:
            return None
        x, other = fx_node.args
        unit = 1 if packet in ("mul", "div") else 0
        kept = [(x, other)] + ([(other, x)] if packet in ("mul", "add") else [])
        for tensor, constant in kept:
            got = self.env.get(tensor) if isinstance(tensor, torch.fx.Node) else None
            value = self._constant(constant)
            if isinstance(got, int) and value is not None and value == unit and self.b.values[got].type == outs[0]:
                return got
        return None

    def _constant(self, arg: Any) -> torch.Tensor | float | int | bool | None:
        """A scalar argument as it is, or a node the capture holds as a constant as a 0-d tensor of its dtype;
        else None."""
        if isinstance(arg, (bool, int, float)):
            return arg
        got = self.env.get(arg) if isinstance(arg, torch.fx.Node) else None
        if not isinstance(got, int):
            return None
        value = self.b.values[got]
        if not value.is_const or not isinstance(value.const, (bool, int, float)):
            return None
        return torch.tensor(value.const, dtype=getattr(torch, value.type.dtype))

    def _dispatch(self, packet: str, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        handler = _SPECIAL.get(packet)
        if handler is not None:
            return handler(self, args, kwargs, outs, label)
        if packet in ATEN_POINTWISE:
            op = ATEN_POINTWISE[packet]
            dtype = outs[0].dtype
            inputs = [self.operand(a, dtype) for a in args if not isinstance(a, (list, tuple)) and a is not None]
            return self.b.node(op, inputs, outs, label)[0]
        raise UnsupportedOpError(
            f"no template for {label}: configure an LLM, or write a kernel with `optiml init-kernel`"
        )


def _pointwise(op: str) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        dtype = outs[0].dtype
        return c.b.node(op, [c.operand(a, dtype) for a in args], outs, label)[0]

    return handle


def _add_sub(op: str) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        dtype = outs[0].dtype
        x, y = c.operand(args[0], dtype), c.operand(args[1], dtype)
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        if alpha != 1:
            ytype = c.b.values[y].type
            y = c.b.node("mul", [y, c.b.const(alpha, dtype)], [TensorType(ytype.shape, dtype)], label)[0]
        if op == "rsub":
            x, y = y, x
            op_name = "sub"
        else:
            op_name = op
        return c.b.node(op_name, [x, y], outs, label)[0]

    return handle


def _div(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    mode = kwargs.get("rounding_mode")
    op = {"trunc": "div_trunc", "floor": "div_floor"}.get(mode, "div")
    dtype = outs[0].dtype
    return c.b.node(op, [c.operand(args[0], dtype), c.operand(args[1], dtype)], outs, label)[0]


def _clamp(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    name = label.split(".")[1]
    x = c.operand(args[0])
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    hi = args[2] if len(args) > 2 else kwargs.get("max")
    if name == "clamp_max":
        lo, hi = None, lo
    out = x
    xtype = c.b.values[x].type
    if isinstance(lo, torch.fx.Node) or isinstance(hi, torch.fx.Node):
        if lo is not None:
            out = c.b.node("maximum", [out, c.operand(lo, xtype.dtype)], outs, label)[0]
        if hi is not None:
            out = c.b.node("minimum", [out, c.operand(hi, xtype.dtype)], outs, label)[0]
        return out
    return c.b.node("clamp", [x], outs, label, lo=lo, hi=hi)[0]


def _where(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    dtype = outs[0].dtype
    return c.b.node("where", [c.operand(args[0]), c.operand(args[1], dtype), c.operand(args[2], dtype)], outs, label)[0]


def _masked_fill(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    dtype = outs[0].dtype
    x, mask, fill = c.operand(args[0], dtype), c.operand(args[1]), c.operand(args[2], dtype)
    return c.b.node("where", [mask, fill, x], outs, label)[0]


def _cast(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    return c.b.node("cast", [c.operand(args[0])], outs, label)[0]


def _identity(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    return c.operand(args[0])


def _full(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    name = label.split(".")[1]
    if name == "scalar_tensor":
        value = args[0]
    elif name in ("zeros_like", "new_zeros", "zeros"):
        value = 0
    elif name in ("ones_like", "new_ones", "ones"):
        value = 1
    elif name in ("empty_like", "new_empty", "empty"):  # contents unspecified: zeros are one valid choice
        value = 0
    elif name in ("full_like", "fill"):  # fill: every element of its operand set to a number
        value = args[1]
        if not isinstance(value, (bool, int, float)):
            raise UnsupportedOpError(f"no template for {label} with a tensor fill value")
    else:  # full, new_full
        value = args[1] if name == "full" else args[2]
    return c.b.const(_typed(value, outs[0].dtype), outs[0].dtype, outs[0].shape)


def _view(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    x = c.operand(args[0])  # kept even when the shape is unchanged: other shape sets may reshape
    return c.b.node("view", [x], outs, label, shape=outs[0].shape)[0]


def _expand(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    x = c.operand(args[0])
    if c.b.values[x].type.shape == outs[0].shape:
        return x
    return c.b.node("expand", [x], outs, label, shape=outs[0].shape)[0]


def _permute(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    x = c.operand(args[0])
    ndim = c.b.values[x].type.ndim
    name = label.split(".")[1]
    perm: tuple[int, ...]
    if name == "t":
        perm = (1, 0) if ndim == 2 else (0,)
    elif name == "transpose":
        d0, d1 = args[1] % ndim, args[2] % ndim
        order = list(range(ndim))
        order[d0], order[d1] = order[d1], order[d0]
        perm = tuple(order)
    else:
        perm = tuple(d % ndim for d in args[1])
    if perm == tuple(range(ndim)):
        return x
    return c.b.node("permute", [x], outs, label, perm=perm)[0]


def _unfold(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``x.unfold(dim, size, step)`` whose windows tile the dim exactly (``step == size``: image patches):
    a view splitting the dim into (windows, size), then the size dim moved last. Overlapping or
    partial windows are refused."""
    x = c.operand(args[0])
    shape = c.b.values[x].type.shape
    dim, size, step = int(args[1]) % max(len(shape), 1), int(args[2]), int(args[3])
    if not shape or step != size or shape[dim] % size:
        raise UnsupportedOpError(
            f"no template for {label} with overlapping or partial windows (size {size}, step {step})"
        )
    split = (*shape[:dim], shape[dim] // size, size, *shape[dim + 1 :])
    perm = (*range(dim + 1), *range(dim + 2, len(split)), dim + 1)
    if perm == tuple(range(len(split))):
        return c.b.node("view", [x], outs, label, shape=outs[0].shape)[0]
    tiles = c.b.node("view", [x], [TensorType(split, outs[0].dtype)], label, shape=split)[0]
    return c.b.node("permute", [tiles], outs, label, perm=perm)[0]


def _reduce(op: str, dims_arg: int | None, keep_arg: int | None) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        x = c.operand(args[0])
        ndim = c.b.values[x].type.ndim
        dims_value = args[dims_arg] if dims_arg is not None and len(args) > dims_arg else kwargs.get("dim")
        keep = bool(args[keep_arg]) if keep_arg is not None and len(args) > keep_arg else kwargs.get("keepdim", False)
        dims = _norm_dims(dims_value, ndim)
        if op in ("argmax", "argmin") and dims_value is None and ndim > 1:
            raise UnsupportedOpError(f"no template for {label} over a flattened tensor (dim=None)")
        return c.b.node(op, [x], outs, label, dims=dims, keepdim=keep)[0]

    return handle


def _max_min_dim(kind: str) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        x = c.operand(args[0])
        ndim = c.b.values[x].type.ndim
        if len(args) == 1 and "dim" not in kwargs:  # max.default: a full reduction
            return c.b.node("a" + kind, [x], outs, label, dims=tuple(range(ndim)), keepdim=False)[0]
        dim = args[1] if len(args) > 1 else kwargs["dim"]
        keep = bool(args[2]) if len(args) > 2 else bool(kwargs.get("keepdim", False))
        dims = _norm_dims(dim, ndim)
        values = c.b.node("a" + kind, [x], [outs[0]], label, dims=dims, keepdim=keep)[0]
        indices = c.b.node("arg" + kind, [x], [outs[1]], label, dims=dims, keepdim=keep)[0]
        return (values, indices)

    return handle


def _scan(op: str) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        x = c.operand(args[0])
        ndim = c.b.values[x].type.ndim
        dim = (args[1] if len(args) > 1 else kwargs["dim"]) % max(ndim, 1)
        return c.b.node(op, [x], outs, label, dim=dim)[0]

    return handle


def _triangular(op: str) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        x = c.operand(args[0])
        if c.b.values[x].type.ndim < 2:
            raise UnsupportedOpError(f"{label}: needs a matrix (at least two dims)")
        diagonal = args[1] if len(args) > 1 else kwargs.get("diagonal", 0)
        return c.b.node(op, [x], outs, label, diagonal=int(diagonal))[0]

    return handle


def _flip(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    x = c.operand(args[0])
    ndim = c.b.values[x].type.ndim
    return c.b.node("flip", [x], outs, label, dims=_norm_dims(args[1], ndim))[0]


def _cat(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``torch.cat``: the parts with elements (an empty part adds none), each stored as a tensor."""
    ndim = len(outs[0].shape)
    dim = int(args[1] if len(args) > 1 else kwargs.get("dim", 0)) % max(ndim, 1)
    return _concatenate(c, [c.operand(arg) for arg in args[0]], dim, outs, label)


def _roll(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``torch.roll(x, shifts, dims)``: along each dim, the last ``shift`` elements moved to the front — the
    concatenation of two slices (a flattened roll, without ``dims``, is refused naming the op)."""
    x = source = c.operand(args[0])
    shifts = _tuple(args[1] if len(args) > 1 else kwargs["shifts"], 1, ())
    dims = _tuple(args[2] if len(args) > 2 else kwargs.get("dims"), len(shifts), ())
    if not dims or len(dims) != len(shifts):
        raise UnsupportedOpError(f"{label}: a roll of the flattened tensor (no dims) is not supported")
    for shift, dim in zip(shifts, dims, strict=True):
        t = c.b.values[x].type
        dim %= t.ndim
        n = t.shape[dim]
        cut = n - int(shift) % n if n else 0
        if cut in (0, n):
            continue
        head = TensorType((*t.shape[:dim], n - cut, *t.shape[dim + 1 :]), t.dtype)
        tail = TensorType((*t.shape[:dim], cut, *t.shape[dim + 1 :]), t.dtype)
        parts = [_slice_of(c, x, dim, cut, head, label), _slice_of(c, x, dim, 0, tail, label)]
        x = _concatenate(c, parts, dim, [t], label)
    if x == source:  # every shift a whole turn
        return c.b.node("identity", [x], outs, label)[0]
    return x


def _stack(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``torch.stack``: each part viewed with a size-1 dim at ``dim``, then concatenated along it."""
    ndim = len(outs[0].shape)
    dim = int(args[1] if len(args) > 1 else kwargs.get("dim", 0)) % max(ndim, 1)
    parts = []
    for arg in args[0]:
        part = c.operand(arg)
        t = c.b.values[part].type
        shape = (*t.shape[:dim], 1, *t.shape[dim:])
        parts.append(c.b.node("view", [part], [TensorType(shape, t.dtype)], label, shape=shape)[0])
    return _concatenate(c, parts, dim, outs, label)


def _concatenate(c: _Converter, candidates: list[int], dim: int, outs: list[TensorType], label: str) -> Any:
    parts = [part for part in candidates if math.prod(c.b.values[part].type.shape) > 0]
    if not parts:
        raise UnsupportedOpError(f"{label}: every part is empty")
    if len(parts) == 1:
        return c.b.node("identity", parts, outs, label)[0]
    return c.b.node("cat", parts, outs, label, dim=dim)[0]


def _slice_of(c: _Converter, x: int, dim: int, start: int, out: TensorType, label: str) -> int:
    """The range of ``x`` along ``dim`` from ``start``, as long as ``out`` is there (the whole: ``x``)."""
    if out.shape == c.b.values[x].type.shape:
        return x
    return c.b.node("slice", [x], [out], label, dim=dim, start=start)[0]


def _slice(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``aten.slice.Tensor(x, dim, start, end, step)``: ``x[..., start:end]`` (step 1 only)."""
    x = c.operand(args[0])
    shape = c.b.values[x].type.shape
    dim = int(args[1] if len(args) > 1 else kwargs.get("dim", 0)) % max(len(shape), 1)
    start = args[2] if len(args) > 2 else kwargs.get("start")
    step = int(args[4] if len(args) > 4 else kwargs.get("step", 1))
    first = 0 if start is None else int(start)
    first = min(max(first + shape[dim] if first < 0 else first, 0), shape[dim])
    if step == 1:
        return _slice_of(c, x, dim, first, outs[0], label)
    return _stepped_slice(c, x, dim, first, step, outs[0], label)


def _stepped_slice(c: _Converter, x: int, dim: int, first: int, step: int, out: TensorType, label: str) -> int:
    """``x[..., first::step]`` (as long as ``out``): the ``count · step`` elements from ``first`` — zeros
    appended where they run past the end — viewed as ``(count, step)`` along ``dim``, and column 0 of
    that (Swin's patch merging: ``x[:, 1::2, 0::2]``)."""
    t = c.b.values[x].type
    shape, count = list(t.shape), out.shape[dim]
    over = first + count * step - shape[dim]  # elements the last step reaches past the end
    if over > 0:
        block = (*shape[:dim], over, *shape[dim + 1 :])
        shape[dim] += over
        padded = TensorType(tuple(shape), t.dtype)
        x = _concatenate(c, [x, c.b.const(_typed(0, t.dtype), t.dtype, block)], dim, [padded], label)
    span = TensorType((*shape[:dim], count * step, *shape[dim + 1 :]), t.dtype)
    x = _slice_of(c, x, dim, first, span, label)
    split = (*shape[:dim], count, step, *shape[dim + 1 :])
    x = c.b.node("view", [x], [TensorType(split, t.dtype)], label, shape=split)[0]
    column = TensorType((*shape[:dim], count, 1, *shape[dim + 1 :]), t.dtype)
    x = _slice_of(c, x, dim + 1, 0, column, label)
    return c.b.node("view", [x], [out], label, shape=out.shape)[0]


def _constant_pad_nd(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``F.pad(x, pad, value=v)`` (constant mode): per padded dim, from the last, a negative pad slices
    and a positive one concatenates a block of ``v`` before or after."""
    x = c.operand(args[0])
    pad = [int(p) for p in (args[1] if len(args) > 1 else kwargs["pad"])]
    value = args[2] if len(args) > 2 else kwargs.get("value", 0)
    t = c.b.values[x].type
    dtype, shape = t.dtype, list(t.shape)
    for k in range(len(pad) // 2):
        dim, before, after = len(shape) - 1 - k, pad[2 * k], pad[2 * k + 1]
        if before < 0 or after < 0:
            start, size = max(0, -before), shape[dim] + min(0, before) + min(0, after)
            shape[dim] = size
            x = _slice_of(c, x, dim, start, TensorType(tuple(shape), dtype), label)
        parts = []
        for width in (max(0, before), None, max(0, after)):
            if width is None:
                parts.append(x)
            elif width > 0:
                block = (*shape[:dim], width, *shape[dim + 1 :])
                parts.append(c.b.const(_typed(value, dtype), dtype, block))
        shape[dim] += max(0, before) + max(0, after)
        last = k == len(pad) // 2 - 1
        out = outs[0] if last else TensorType(tuple(shape), dtype)
        x = _concatenate(c, parts, dim, [out], label) if len(parts) > 1 else x
    return x


def _typed(value: float | int | bool, dtype: str) -> float | int | bool:
    """``value`` as the Python number a constant of ``dtype`` holds."""
    if dtype in ("float32", "float64", "float16", "bfloat16"):
        return float(value)
    return bool(value) if dtype == "bool" else int(value)


def _recurrent(cell: str) -> Callable[..., Any]:
    """``optiml::recurrent_lstm`` / ``recurrent_gru`` (:mod:`optiml.graph.recurrent`): one node, inputs
    (x, h0[, c0], weights…), outputs (the output sequence, h_n[, c_n])."""

    def convert(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        states = 2 if cell == "lstm" else 1
        x, initial, weights = args[0], list(args[1 : 1 + states]), list(args[1 + states])
        layers, bidirectional, batch_first, bias = args[2 + states : 6 + states]
        inputs = [c.operand(v) for v in (x, *initial, *weights)]
        attrs = RecurrentAttrs(cell, int(layers), bool(bidirectional), bool(batch_first), bool(bias))
        if any(c.b.values[v].type.dtype != "float32" for v in inputs):
            raise UnsupportedOpError(f"{label}: recurrent layers run in float32 only")
        return tuple(c.b.node(cell, inputs, outs, label, **vars(attrs)))

    return convert


def _as_strided(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``as_strided`` that only restates a contiguous layout (adaptive average pooling to 1×1 sets its
    output's strides so): the input as it is, or a reshape of it. Any other striding is refused."""
    x = c.operand(args[0])
    size = tuple(int(s) for s in args[1])
    stride = tuple(int(s) for s in args[2])
    offset = int(args[3]) if len(args) > 3 and args[3] is not None else 0
    contiguous: list[int] = []
    step = 1
    for extent in reversed(size):
        contiguous.insert(0, step)
        step *= extent
    laid_out = all(n == 1 or s == want for n, s, want in zip(size, stride, contiguous, strict=True))
    if offset != 0 or not laid_out or math.prod(size) != math.prod(c.b.values[x].type.shape):
        raise UnsupportedOpError(f"no template for {label} with sizes {size}, strides {stride}, offset {offset}")
    if size == c.b.values[x].type.shape:
        return x
    return c.b.node("view", [x], outs, label, shape=outs[0].shape)[0]


def _narrow(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    x = c.operand(args[0])
    shape = c.b.values[x].type.shape
    dim = int(args[1]) % len(shape)
    start = int(args[2])
    return _slice_of(c, x, dim, start + shape[dim] if start < 0 else start, outs[0], label)


def _select(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``x.select(dim, i)``: a slice of length 1 at ``i``, viewed without that dim."""
    x = c.operand(args[0])
    t = c.b.values[x].type
    dim = int(args[1]) % len(t.shape)
    index = int(args[2]) + (t.shape[dim] if int(args[2]) < 0 else 0)
    one = TensorType((*t.shape[:dim], 1, *t.shape[dim + 1 :]), t.dtype)
    part = _slice_of(c, x, dim, index, one, label)
    return c.b.node("view", [part], outs, label, shape=outs[0].shape)[0]


def _split(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``split`` / ``split_with_sizes`` / ``chunk`` / ``unbind``: consecutive slices along the dim."""
    x = c.operand(args[0])
    t = c.b.values[x].type
    unbind = label.startswith("aten.unbind")
    dim = int((args[1] if len(args) > 1 else kwargs.get("dim", 0)) if unbind else
              (args[2] if len(args) > 2 else kwargs.get("dim", 0))) % max(len(t.shape), 1)  # fmt: skip
    pieces, start = [], 0
    for out in outs:
        if unbind:
            one = TensorType((*t.shape[:dim], 1, *t.shape[dim + 1 :]), t.dtype)
            part = _slice_of(c, x, dim, start, one, label)
            pieces.append(c.b.node("view", [part], [out], label, shape=out.shape)[0])
            start += 1
        else:
            pieces.append(_slice_of(c, x, dim, start, out, label))
            start += out.shape[dim]
    return tuple(pieces)


def _gather(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    x = c.operand(args[0])
    ndim = c.b.values[x].type.ndim
    return c.b.node("gather", [x, c.operand(args[2])], outs, label, dim=args[1] % ndim)[0]


def _index(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``x[idx]`` (``aten.index.Tensor``) with one integer index tensor on the first dim: whole rows of ``x``
    picked by ``idx`` (any shape); the output is ``idx.shape + x.shape[1:]``. Other index patterns (several
    index tensors, a boolean mask, an index on a later dim) are refused naming the op."""
    x = c.operand(args[0])
    indices = list(args[1])
    if len(indices) != 1 or indices[0] is None:
        raise UnsupportedOpError(f"{label}: only one index tensor on the first dim is supported")
    idx = c.operand(indices[0])
    if c.b.values[idx].type.dtype not in ("int64", "int32"):
        raise UnsupportedOpError(f"{label}: a {c.b.values[idx].type.dtype} index (a mask) is not supported")
    return c.b.node("index_rows", [x, idx], outs, label)[0]


def _tuple(values: Any, n: int, default: Any) -> tuple[int, ...]:
    if values is None or values == []:
        values = default
    if isinstance(values, int):
        values = [values]
    values = list(values)
    if len(values) == 1:
        values = values * n
    return tuple(int(v) for v in values)


def _max_pool(spatial: int) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        x = c.operand(args[0])
        kernel = _tuple(args[1], spatial, None)
        stride = _tuple(args[2] if len(args) > 2 else kwargs.get("stride"), spatial, kernel)
        padding = _tuple(args[3] if len(args) > 3 else kwargs.get("padding", 0), spatial, 0)
        dilation = _tuple(args[4] if len(args) > 4 else kwargs.get("dilation", 1), spatial, 1)
        ceil = bool(args[5] if len(args) > 5 else kwargs.get("ceil_mode", False))
        result = c.b.node(
            "max_pool",
            [x],
            outs,
            label,
            spatial=spatial,
            kernel=kernel,
            stride=stride,
            padding=padding,
            dilation=dilation,
            ceil_mode=ceil,
        )
        return tuple(result) if len(result) > 1 else result[0]

    return handle


def _avg_pool(spatial: int) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        x = c.operand(args[0])
        kernel = _tuple(args[1], spatial, None)
        stride = _tuple(args[2] if len(args) > 2 else kwargs.get("stride"), spatial, kernel)
        padding = _tuple(args[3] if len(args) > 3 else kwargs.get("padding", 0), spatial, 0)
        ceil = bool(args[4] if len(args) > 4 else kwargs.get("ceil_mode", False))
        include_pad = bool(args[5] if len(args) > 5 else kwargs.get("count_include_pad", True))
        divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
        return c.b.node(
            "avg_pool",
            [x],
            outs,
            label,
            spatial=spatial,
            kernel=kernel,
            stride=stride,
            padding=padding,
            dilation=(1,) * spatial,
            ceil_mode=ceil,
            count_include_pad=include_pad,
            divisor=divisor,
        )[0]

    return handle


# -- matrix products ---------------------------------------------------------------------------
# mm / bmm / mv / addmm / baddbmm / addmv (what torch.matmul, nn.Linear and F.linear trace to) become one
# canonical ``matmul`` node over *stored* operands: transposes of an operand's last two dims, broadcast
# batch dims (``expand``) and the batch flattening torch.matmul adds around ``bmm`` are folded into the
# node's attrs (``trans_a``, ``trans_b``, ``batch``), so no kernel materializes them. addmm's
# ``beta * input + alpha * (a @ b)`` is the matmul followed by element-wise nodes (the GEMM epilogue).
_LAYOUT_IDENTITY = {"clone", "alias", "detach", "contiguous", "lift_fresh_copy"}
_RESHAPES = {"view", "_unsafe_view", "reshape"}


def _fx_packet(node: torch.fx.Node) -> str:
    return getattr(node.target, "__name__", str(node.target)).split(".")[0]


def _fx_shape(node: torch.fx.Node) -> tuple[int, ...]:
    return tuple(int(s) for s in node.meta["val"].shape)


def _swaps_last_two(node: torch.fx.Node) -> bool:
    packet, rank = _fx_packet(node), len(_fx_shape(node))
    args: Any = node.args
    if rank < 2:
        return False
    if packet == "t":
        return rank == 2
    if packet == "transpose":
        return {int(args[1]) % rank, int(args[2]) % rank} == {rank - 2, rank - 1}
    if packet == "permute":
        perm = [int(d) % rank for d in args[1]]
        return perm == [*range(rank - 2), rank - 1, rank - 2]
    return False


def _layout_input(node: Any) -> torch.fx.Node | None:
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or not node.args:
        return None
    src = node.args[0]
    return src if isinstance(src, torch.fx.Node) and "val" in src.meta else None


def _not_stored_below(node: torch.fx.Node) -> bool:
    """An ``expand`` that broadcasts batch dims, or a swap of the last two dims, lies below ``node``
    (through layout-only ops and the numbers :func:`_matmul_operand` moves onto the product): flattening its batch
    dims would need a copy, which merging them into the product's batch avoids."""
    cur: Any = node
    while (src := _layout_input(cur)) is not None:
        packet = _fx_packet(cur)
        if (packet == "expand" and _fx_shape(cur) != _fx_shape(src)) or _swaps_last_two(cur):
            return True
        same = _fx_shape(cur) == _fx_shape(src)
        moved = same and _scalar_factor(cur) is not None
        if not (moved or packet in _LAYOUT_IDENTITY or (packet in (*_RESHAPES, "expand") and same)):
            return False
        cur = src
    return False


def _matmul_operand(
    c: _Converter, arg: Any, merge: bool, merge_plain: bool = False
) -> tuple[int, bool, tuple[int, ...] | None, float]:
    """(IR value, last two dims swapped, batch dims a folded flattening view merged, scale) of one operand.
    A flattening view is merged where the memory below it could not be flattened in place (a broadcast
    or a transpose), or also where it could (``merge_plain``: the other operand's was merged). A floating
    operand multiplied or divided by a number on its way is read unscaled, the number returned as ``scale`` for
    the product to apply once (``scaled_dot_product_attention`` scales both q and k^T by the root of its scale:
    two passes over each, and a copy of k's transpose that the product would otherwise read in place)."""
    trans, merged, scale = False, None, 1.0
    cur: Any = arg
    while (src := _layout_input(cur)) is not None:
        packet, shape, src_shape = _fx_packet(cur), _fx_shape(cur), _fx_shape(src)
        factor = _scalar_factor(cur)
        if factor is not None and shape == src_shape:
            scale, cur = scale * factor, src
        elif packet in _LAYOUT_IDENTITY or (packet in (*_RESHAPES, "expand") and shape == src_shape):
            cur = src
        elif _swaps_last_two(cur):
            trans, cur = not trans, src
        elif packet == "expand" and len(shape) >= 2 and len(src_shape) >= 2 and shape[-2:] == src_shape[-2:]:
            cur = src  # broadcast batch dims: the operand's own batch dims broadcast into the output's
        elif (
            merge
            and merged is None
            and packet in _RESHAPES
            and len(shape) == 3
            and len(src_shape) > 3
            and src_shape[-2:] == shape[-2:]
            and (merge_plain or _not_stored_below(src))
        ):
            merged, cur = src_shape[:-2], src  # bmm over a flattened batch: keep the batch dims
        else:
            break
    return c.operand(cur), trans, merged, scale


def _scalar_factor(node: torch.fx.Node) -> float | None:
    """The number a floating ``x * c``, ``c * x`` or ``x / c`` (``c`` a finite nonzero Python number) multiplies
    ``x`` by; None for any other node."""
    packet, args = _fx_packet(node), node.args
    if packet not in ("mul", "div") or len(args) != 2 or not node.meta["val"].is_floating_point():
        return None
    number = args[1] if isinstance(args[0], torch.fx.Node) else args[0] if packet == "mul" else None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number) or not number:
        return None
    if not isinstance(args[0] if number is args[1] else args[1], torch.fx.Node):
        return None
    return float(number) if packet == "mul" else 1.0 / float(number)


def _reads_an_expand(b: _Builder, vid: int) -> bool:
    """The value is (a view of) an ``expand`` node: not stored memory a kernel could read."""
    while (producer := b.values[vid].producer) is not None:
        node = b.nodes[producer]
        if node.op == "expand":
            return True
        if node.op != "view":
            return False
        vid = node.inputs[0]
    return False


def _matmul(c: _Converter, a_arg: Any, b_arg: Any, batched: bool, out: TensorType, label: str) -> int:
    """A ``matmul`` node for mm / bmm / mv of ``a_arg`` and ``b_arg`` whose result has type ``out``."""
    a, ta, ma, sa = _matmul_operand(c, a_arg, batched)
    b, tb, mb, sb = _matmul_operand(c, b_arg, batched)
    if ma != mb and batched:  # one merged: merge the other's plain flattening view the same way
        a, ta, ma, sa = _matmul_operand(c, a_arg, True, merge_plain=mb is not None)
        b, tb, mb, sb = _matmul_operand(c, b_arg, True, merge_plain=ma is not None)
    if ma != mb:  # still only one operand (or two different batches) merged: keep the flattening views
        a, ta, ma, sa = _matmul_operand(c, a_arg, False)
        b, tb, mb, sb = _matmul_operand(c, b_arg, False)
    for vid in (a, b):
        if _reads_an_expand(c.b, vid):
            raise UnsupportedOpError(f"no template for {label} of a broadcast operand the GEMM cannot read in place")
    batch = tuple(ma) if ma is not None else out.shape[:1] if batched else ()
    mm_type = TensorType((*batch, *out.shape[1 if batched else 0 :]), out.dtype)
    for vid in (a, b):
        t = c.b.values[vid].type
        own = t.shape[: max(t.ndim - 2, 0)]
        if len(own) > len(batch) or any(s not in (1, o) for s, o in zip(reversed(own), reversed(batch), strict=False)):
            raise UnsupportedOpError(f"no template for {label}: operand batch {own} does not broadcast to {batch}")
    result = c.b.node("matmul", [a, b], [mm_type], label, trans_a=ta, trans_b=tb, batch=len(batch))[0]
    if sa * sb != 1.0:  # the operands' numbers, once on the product (fused into its epilogue)
        result = c.b.node("mul", [result, c.b.const(sa * sb, out.dtype)], [mm_type], label)[0]
    if mm_type.shape != out.shape:  # the flattened batch torch.matmul's bmm works on
        result = c.b.node("view", [result], [out], label, shape=out.shape)[0]
    return result


def _mm(batched: bool) -> Callable[..., Any]:
    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        left, right = (c.env.get(a) if isinstance(a, torch.fx.Node) else None for a in args[:2])
        if isinstance(left, _Diagonal) or isinstance(right, _Diagonal):
            return _diagonal_product(c, left, right, args, outs[0], label)
        return _matmul(c, args[0], args[1], batched, outs[0], label)

    return handle


def _diag_embed(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``diag(v)`` / ``diag_embed(v)`` of a vector, kept as a :class:`_Diagonal` for the product it feeds."""
    v = c.operand(args[0])
    offset = args[1] if len(args) > 1 else kwargs.get("offset", kwargs.get("diagonal", 0))
    if c.b.values[v].type.ndim != 1 or offset != 0 or len(args) > 2:
        raise UnsupportedOpError(f"no template for {label} other than diag(v) of a vector on the main diagonal")
    return _Diagonal(v, str(args[0]))


def _diagonal_product(c: _Converter, left: Any, right: Any, args: Any, out: TensorType, label: str) -> Any:
    """``diag(v) @ B`` scales B's rows by v; ``A @ diag(v)`` scales A's columns: an element-wise product."""
    if isinstance(left, _Diagonal) and isinstance(right, _Diagonal):
        product = TensorType((out.shape[0],), out.dtype)
        vector = c.b.node("mul", [left.vector, right.vector], [product], label)[0]
        return _Diagonal(vector, f"{left.name} @ {right.name}")
    if isinstance(left, _Diagonal):
        v = left.vector
        column = TensorType((out.shape[0], 1), c.b.values[v].type.dtype)
        rows = c.b.node("view", [v], [column], label, shape=column.shape)[0]
        return c.b.node("mul", [rows, c.operand(args[1])], [out], label)[0]
    return c.b.node("mul", [c.operand(args[0]), right.vector], [out], label)[0]


def _addmm(batched: bool) -> Callable[..., Any]:
    """``beta * input + alpha * (a @ b)`` (addmm, baddbmm, addmv): the matmul, then its epilogue."""

    def handle(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
        out = outs[0]
        beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
        alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
        result = _matmul(c, args[1], args[2], batched, out, label)
        if alpha != 1:
            result = c.b.node("mul", [result, c.b.const(alpha, out.dtype)], [out], label)[0]
        if beta == 0:  # PyTorch ignores the input then (its NaNs do not propagate)
            return result
        bias = c.operand(args[0], out.dtype)
        if beta != 1:
            btype = c.b.values[bias].type
            bias = c.b.node("mul", [bias, c.b.const(beta, out.dtype)], [TensorType(btype.shape, out.dtype)], label)[0]
        return c.b.node("add", [result, bias], [out], label)[0]

    return handle


# -- convolutions -----------------------------------------------------------------------------------
def _convolution(c: _Converter, args: Any, kwargs: Any, outs: list[TensorType], label: str) -> Any:
    """``aten.convolution`` (what nn.Conv1d/2d/3d, their transposes and F.conv* trace to): one ``conv``
    node over (input, weight[, bias]); stride, padding, dilation, output padding and groups are attrs."""
    x, w = c.operand(args[0]), c.operand(args[1])
    spatial = c.b.values[x].type.ndim - 2
    if spatial not in (1, 2, 3) or c.b.values[w].type.ndim != spatial + 2:
        raise UnsupportedOpError(f"no template for {label} of a rank-{spatial + 2} input (batched 1-D/2-D/3-D only)")
    if isinstance(args[2], torch.fx.Node) and c.b.values[c.operand(args[2])].type.ndim != 1:
        raise UnsupportedOpError(f"no template for {label} with a bias that is not a vector")
    bias = [c.operand(args[2])] if isinstance(args[2], torch.fx.Node) else []
    padding = args[4]
    if isinstance(padding, str):
        raise UnsupportedOpError(f"no template for {label} with padding={padding!r}")
    stride, dilation = _tuple(args[3], spatial, 1), _tuple(args[5], spatial, 1)
    pads, output_padding, groups = _tuple(padding, spatial, 0), _tuple(args[7], spatial, 0), int(args[8])
    transposed, as_forward = bool(args[6]), False
    kernel = c.b.values[w].type.shape[2:]
    # the call as cuDNN sees it, before the rewrite below: what the default-settings arithmetic is measured by
    called = signature(c.b.values[x].type.shape, c.b.values[w].type.shape, *args[3:9])
    forward_pads = tuple(d * (k - 1) - p for d, k, p in zip(dilation, kernel, pads, strict=True))
    if transposed and set(stride) == {1} and not any(output_padding) and min(forward_pads) >= 0:
        # a stride-1 transposed convolution is the forward one over the input padded by d (k - 1) - p with the
        # weights flipped and each group's channels swapped (the conv template does that to its copy of them):
        # the forward kernels serve it (level 1's 57, 64, 65 ran 0.23-0.36x cuDNN's TF32 as transposed GEMMs)
        pads, transposed, as_forward = forward_pads, False, True
    return c.b.node(
        "conv",
        [x, w, *bias],
        outs,
        label,
        spatial=spatial,
        stride=stride,
        padding=pads,
        dilation=dilation,
        transposed=transposed,
        output_padding=output_padding,
        groups=groups,
        bias=bool(bias),
        transposed_weight=as_forward,
        signature=called,
    )[0]


_SPECIAL: dict[str, Callable[..., Any]] = {
    "add": _add_sub("add"),
    "sub": _add_sub("sub"),
    "rsub": _add_sub("rsub"),
    "div": _div,
    "clamp": _clamp,
    "clamp_min": _clamp,
    "clamp_max": _clamp,
    "where": _where,
    "_to_copy": _cast,
    "to": _cast,
    "convert_element_type": _cast,
    "alias": _identity,
    "clone": _identity,
    "detach": _identity,
    "lift_fresh_copy": _identity,
    "contiguous": _identity,
    "scalar_tensor": _full,
    "full": _full,
    "full_like": _full,
    "fill": _full,
    "empty_like": _full,
    "new_empty": _full,
    "empty": _full,
    "zeros_like": _full,
    "ones_like": _full,
    "new_zeros": _full,
    "new_ones": _full,
    "new_full": _full,
    "zeros": _full,
    "ones": _full,
    "view": _view,
    "_unsafe_view": _view,
    "reshape": _view,
    "unsqueeze": _view,
    "squeeze": _view,
    "flatten": _view,
    "expand": _expand,
    "permute": _permute,
    "unfold": _unfold,
    "transpose": _permute,
    "t": _permute,
    "sum": _reduce("sum", 1, 2),
    "mean": _reduce("mean", 1, 2),
    "amax": _reduce("amax", 1, 2),
    "amin": _reduce("amin", 1, 2),
    "prod": _reduce("prod", 1, 2),
    "argmax": _reduce("argmax", 1, 2),
    "argmin": _reduce("argmin", 1, 2),
    "any": _reduce("any", 1, 2),
    "all": _reduce("all", 1, 2),
    "max": _max_min_dim("max"),
    "min": _max_min_dim("min"),
    "cumsum": _scan("cumsum"),
    "cumprod": _scan("cumprod"),
    "flip": _flip,
    "diag_embed": _diag_embed,
    "diag": _diag_embed,
    "triu": _triangular("triu"),
    "tril": _triangular("tril"),
    "gather": _gather,
    "index": _index,
    "cat": _cat,
    "roll": _roll,
    "slice": _slice,
    "narrow": _narrow,
    "as_strided": _as_strided,
    "recurrent_lstm": _recurrent("lstm"),
    "recurrent_gru": _recurrent("gru"),
    "constant_pad_nd": _constant_pad_nd,
    "select": _select,
    "split": _split,
    "split_with_sizes": _split,
    "unbind": _split,
    "stack": _stack,
    "max_pool1d_with_indices": _max_pool(1),
    "max_pool2d_with_indices": _max_pool(2),
    "max_pool3d_with_indices": _max_pool(3),
    "avg_pool1d": _avg_pool(1),
    "avg_pool2d": _avg_pool(2),
    "avg_pool3d": _avg_pool(3),
    "square": _pointwise("square"),
    "xlogy": _pointwise("xlogy"),
    "masked_fill": _masked_fill,
    "mm": _mm(False),
    "mv": _mm(False),
    "bmm": _mm(True),
    "addmm": _addmm(False),
    "addmv": _addmm(False),
    "baddbmm": _addmm(True),
    "convolution": _convolution,
}


def trace_model(task: Task, shape_set: int = 0) -> Graph:
    """The IR of ``task`` at one shape set (traced on the meta device: no memory, no compute)."""
    from optiml.task_runtime import TaskRunner

    runtime = TaskRunner(task, "meta")
    args = runtime.make_args(0, shape_set)
    model = runtime.build_model(0, shape_set)
    state = dict(model.state_dict())
    keys = list(state)
    tensor_slots = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def traced(held: dict[str, torch.Tensor]) -> torch.fx.GraphModule:
        """The functional graph, with ``held`` (tensors the model holds as plain attributes) as inputs too."""

        def forward(*flat: torch.Tensor) -> Any:
            call_args = list(args)
            for slot, tensor in zip(tensor_slots, flat[: len(tensor_slots)], strict=True):
                call_args[slot] = tensor
            params = dict(zip([*keys, *held], flat[len(tensor_slots) :], strict=True))
            return torch.func.functional_call(model, params, tuple(call_args))

        flat = [args[i] for i in tensor_slots] + list(state.values()) + list(held.values())
        with _numbers_keep_their_value(), recurrent_as_one_op(model):
            return make_fx(torch.func.functionalize(forward), decomposition_table=decomposition_table())(*flat)

    held: dict[str, torch.Tensor] = {}
    try:
        try:
            gm = traced(held)
        except Exception as exc:
            if "mutating a non-functional tensor" not in str(exc):  # functionalize's assert: a held tensor written
                raise
            held = _plain_tensor_state(model)
            if not held:
                raise UnsupportedOpError(
                    f"{task.path.name}: Model.forward writes in place into a tensor the model holds that is neither "
                    "an input, a parameter nor a buffer: no kernel owns that state (register it as a buffer, or "
                    "pass it as an input)"
                ) from exc
            gm = traced(held)
    except UnsupportedOpError:
        raise
    except RecurrentError as exc:
        raise UnsupportedOpError(f"{task.path.name}: {exc}") from None
    except Exception as exc:
        raise UnsupportedOpError(
            f"{task.path.name}: tracing Model.forward on the meta device failed: {type(exc).__name__}: {exc}"
        ) from exc
    gm.graph.eliminate_dead_code()
    _drop_overwritten_state(gm, list(held), task)
    try:  # before any op is reported as one without a template (a dropout traces to aten.empty first)
        replace_draws(gm, task, shape_set)
    except RandomDrawError as exc:
        raise UnsupportedOpError(f"{task.path.name}: {exc}") from None
    return _to_ir(gm, args, tensor_slots, keys, task)


@contextlib.contextmanager
def _numbers_keep_their_value() -> Iterator[None]:
    """``torch.tensor(0.5, device=x.device)`` in ``forward``, with ``x`` on the meta device, would be a meta
    tensor whose value is lost: while tracing, a tensor made of one number is made on the CPU instead,
    where the trace keeps its value (a 0-dim CPU tensor mixes with tensors of any device, as a scalar)."""
    original = torch.tensor

    def tensor(data: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        device = kwargs.get("device")
        if isinstance(data, (bool, int, float)) and device is not None and torch.device(device).type == "meta":
            kwargs["device"] = "cpu"
        return original(data, *args, **kwargs)

    torch.tensor = tensor
    try:
        yield
    finally:
        torch.tensor = original


def _plain_tensor_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor a module holds as a plain attribute (not a parameter or buffer), by dotted name."""
    return {
        f"{prefix}{'.' if prefix else ''}{key}": value
        for prefix, module in model.named_modules()
        for key, value in vars(module).items()
        if isinstance(value, torch.Tensor) and not key.startswith("_")
    }


def _drop_overwritten_state(gm: torch.fx.GraphModule, held: list[str], task: Task) -> None:
    """Remove the traced inputs of ``held`` (tensors the model holds as plain attributes, the last
    placeholders), and the write-backs functionalisation adds where forward writes into one in place.

    That is sound only where no output depends on what the tensor held before the call — forward
    overwrites it whole before reading it (KernelBench's VanillaRNN: ``self.hidden.copy_(h0)``), so
    every call computes the same answer from its inputs. State a call reads is refused: the answer
    would depend on the calls before it, which no kernel of the ABI can know."""
    if not held:
        return
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][-len(held) :]
    for name, node in zip(held, placeholders, strict=True):
        for user in list(node.users):  # ``held.copy_(src)`` traces to ``copy(held, src)``: src, as held's shape
            if user.target is torch.ops.aten.copy.default and user.args[0] is node:
                _replace_overwrite(gm, user)
        users = list(node.users)
        write_backs = [u for u in users if u.target is torch.ops.aten.copy_.default and u.args[0] is node]
        if len(write_backs) != len(users) or any(w.users for w in write_backs):
            written = "writes in place and reads" if write_backs else "reads"
            raise UnsupportedOpError(
                f"{task.path.name}: Model.forward {written} self.{name}, a tensor the model holds that is neither "
                "an input, a parameter nor a buffer, beside state it writes in place: its answer depends on what "
                "earlier calls left there, and no kernel owns that state (register it as a buffer, or pass it as "
                "an input)"
            )
        for write_back in write_backs:
            gm.graph.erase_node(write_back)
        gm.graph.erase_node(node)
    gm.recompile()


def _replace_overwrite(gm: torch.fx.GraphModule, copy: torch.fx.Node) -> None:
    """Replace ``copy(held, src)`` — the value ``held`` takes when overwritten by ``src`` — by ``src``
    broadcast to ``held``'s shape; kept where the dtypes differ (the caller then refuses the read)."""
    held, src = copy.args[0], copy.args[1]
    if not isinstance(held, torch.fx.Node) or not isinstance(src, torch.fx.Node):
        return  # a copy from a number: kept, and the caller refuses the read
    want, have = held.meta["val"], src.meta["val"]
    if want.dtype != have.dtype:
        return
    value = src
    if tuple(want.shape) != tuple(have.shape):
        with gm.graph.inserting_before(copy):
            value = gm.graph.call_function(torch.ops.aten.expand.default, (src, list(want.shape)))
        value.meta["val"] = have.expand(want.shape)
    copy.replace_all_uses_with(value)
    gm.graph.erase_node(copy)


def _to_ir(gm: torch.fx.GraphModule, args: list[Any], tensor_slots: list[int], keys: list[str], task: Task) -> Graph:
    builder = _Builder()
    conv = _Converter(builder)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    abi_inputs: list[int] = []
    names: list[str] = []
    slot_of = {slot: k for k, slot in enumerate(tensor_slots)}
    for position, arg in enumerate(args):
        if position in slot_of:
            node = placeholders[slot_of[position]]
            abi_inputs.append(builder.value(_ttype(node.meta["val"])))
            conv.env[node] = abi_inputs[-1]
        else:  # a host scalar: the trace baked its value; it stays an ABI slot the kernel ignores
            dtype = "bool" if isinstance(arg, bool) else "int64" if isinstance(arg, int) else "float64"
            abi_inputs.append(builder.value(TensorType((), dtype), scalar=True))
        names.append(f"arg{position}")
    for key, node in zip(keys, placeholders[len(tensor_slots) :], strict=True):
        abi_inputs.append(builder.value(_ttype(node.meta["val"])))
        conv.env[node] = abi_inputs[-1]
        names.append(key)
    outputs: list[int] = []
    for node in gm.graph.nodes:
        if node.op == "call_function":
            try:
                conv.env[node] = conv.convert(node)
            except UnsupportedOpError as exc:
                raise UnsupportedOpError(f"{task.path.name}: {exc}") from None
        elif node.op == "get_attr":  # a tensor the forward built itself (``torch.tensor(0.5)``)
            conv.env[node] = _tensor_constant(builder, getattr(gm, str(node.target)), task)
        elif node.op == "output":
            result = node.args[0]
            items = list(result) if isinstance(result, (tuple, list)) else [result]
            for item in items:
                if not isinstance(item, torch.fx.Node):
                    raise UnsupportedOpError(f"{task.path.name}: forward returns a non-tensor")
                outputs.append(conv.operand(item))
    return Graph(tuple(builder.values), tuple(abi_inputs), tuple(builder.nodes), tuple(outputs), tuple(names))


def _tensor_constant(builder: _Builder, tensor: Any, task: Task) -> int:
    """A constant tensor of the traced graph: a one-element one becomes a scalar constant."""
    if not isinstance(tensor, torch.Tensor) or tensor.numel() != 1 or tensor.device.type == "meta":
        what = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise UnsupportedOpError(
            f"{task.path.name}: forward builds a constant tensor {what} of its own: no template for it "
            "(pass it as an input or a parameter)"
        )
    dtype = _dtype_name(tensor.dtype)
    number = tensor.item()
    return builder.const(number, dtype, tuple(int(s) for s in tensor.shape))


def capture_all(task: Task) -> list[Graph]:
    """The graph at every shape set; raises if their structures differ."""
    graphs = [trace_model(task, s) for s in range(task.num_shape_sets)]
    first = graphs[0].signature()
    for index, graph in enumerate(graphs[1:], start=1):
        if graph.signature() != first:
            raise UnsupportedOpError(
                f"{task.path.name}: shape set {index} traces to a different op graph than shape set 0 "
                "(size-dependent control flow): one kernel cannot serve both"
            )
    return graphs
