"""Element-wise ops of the IR as C expressions (compute in float, double for float64).

The device helpers the expressions call (``optiml_nanmax``, ``optiml_pymod``, ``OptimlPack``, the arg-max
updates) live in the shipped header ``optiml_device.h`` (:data:`DEVICE_INCLUDE`), which every generated
file includes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from optiml.graph.ir import Node
from optiml.templates.base import TemplateError

#: the include line of the device helpers every generated file uses
DEVICE_INCLUDE = '#include "optiml_device.h"'


_FLOAT_FN = {
    "exp": "exp",
    "exp2": "exp2",
    "expm1": "expm1",
    "log": "log",
    "log1p": "log1p",
    "log2": "log2",
    "log10": "log10",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "tanh": "tanh",
    "erf": "erf",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "round": "rint",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "abs": "fabs",
}


def literal(value: float | int | bool, ctype: str) -> str:
    """A C literal of ``value`` in arithmetic type ``ctype``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if ctype in ("float", "double"):
        v = float(value)
        if math.isnan(v):
            return "NAN" if ctype == "float" else "((double)NAN)"
        if math.isinf(v):
            text = "INFINITY" if ctype == "float" else "((double)INFINITY)"
            return text if v > 0 else f"(-{text})"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("f" if ctype == "float" else "")
    return f"((int64_t){int(value)})"


def _fn(name: str, ctype: str) -> str:
    base = _FLOAT_FN[name]
    return base + "f" if ctype == "float" else base


def pointwise(node: Node, args: Sequence[str], arg_types: Sequence[str], ctype: str) -> str:
    """The C expression of element-wise ``node`` applied to ``args`` (already in their C types).

    ``ctype`` is the result's arithmetic type ("float", "double", "int64_t", "bool");
    ``arg_types`` are the operands' types.
    """
    op = node.op
    if op in ("triu", "tril"):
        raise TemplateError(f"{op} needs each element's row and column: it fuses only into a matrix product's epilogue")
    a = args[0] if args else ""
    b = args[1] if len(args) > 1 else ""
    real = ctype in ("float", "double")
    if op in ("identity", "cast", "expand"):  # an expand is a broadcast: the operand's map already repeats it
        if ctype == "bool":
            return f"(({a}) != 0)"
        return f"(({ctype})({a}))"
    if op in _FLOAT_FN and real:
        if op == "rsqrt" and ctype == "double":
            return f"(1.0 / sqrt({a}))"
        return f"{_fn(op, ctype)}({a})"
    if op == "abs":
        return f"(({a}) < 0 ? -({a}) : ({a}))"
    if ctype == "bool" and op in ("mul", "add"):  # torch's product and sum of booleans: and, or
        return f"(({a}) {'&&' if op == 'mul' else '||'} ({b}))"
    simple = {
        "neg": f"(-({a}))",
        "reciprocal": f"(({ctype})1 / ({a}))",
        "square": f"(({a}) * ({a}))",
        "sigmoid": f"(({ctype})1 / (({ctype})1 + {_fn('exp', ctype) if real else 'exp'}(-({a}))))",
        "relu": f"(({a}) < 0 ? ({ctype})0 : ({a}))",
        "sign": f"(({ctype})((({a}) > 0) - (({a}) < 0)))",
        "logical_not": f"(!({a}))",
        "bitwise_not": f"(!({a}))" if arg_types[0] == "bool" else f"(~({a}))",
        "isnan": f"(({a}) != ({a}))",
        "isinf": f"isinf({a})",
        "add": f"(({a}) + ({b}))",
        "sub": f"(({a}) - ({b}))",
        "mul": f"(({a}) * ({b}))",
        "maximum": f"optiml_nanmax<{ctype}>({a}, {b})",
        "minimum": f"optiml_nanmin<{ctype}>({a}, {b})",
        "eq": f"(({a}) == ({b}))",
        "ne": f"(({a}) != ({b}))",
        "lt": f"(({a}) < ({b}))",
        "le": f"(({a}) <= ({b}))",
        "gt": f"(({a}) > ({b}))",
        "ge": f"(({a}) >= ({b}))",
        "logical_and": f"(({a}) && ({b}))",
        "logical_or": f"(({a}) || ({b}))",
        "logical_xor": f"((bool)({a}) != (bool)({b}))",
        "bitwise_and": f"(({a}) & ({b}))",
        "bitwise_or": f"(({a}) | ({b}))",
        "bitwise_xor": f"(({a}) ^ ({b}))",
    }
    if op in simple:
        return simple[op]
    if op == "div":
        return f"(({ctype})({a}) / ({ctype})({b}))"
    if op == "div_trunc":
        return f"{_fn('trunc', ctype)}(({a}) / ({b}))" if real else f"(({a}) / ({b}))"
    if op == "div_floor":
        return f"{_fn('floor', ctype)}(({a}) / ({b}))" if real else f"(({a}) - optiml_pymod<int64_t>({a}, {b})) / ({b})"
    if op == "pow":
        return _power(a, b, ctype)
    if op == "atan2":
        return f"{'atan2f' if ctype == 'float' else 'atan2'}({a}, {b})"
    if op == "copysign":
        return f"{'copysignf' if ctype == 'float' else 'copysign'}({a}, {b})"
    if op == "fmod":
        return f"{'fmodf' if ctype == 'float' else 'fmod'}({a}, {b})" if real else f"(({a}) % ({b}))"
    if op == "remainder":
        return f"optiml_pymodf({a}, {b})" if real else f"optiml_pymod<int64_t>({a}, {b})"
    if op == "xlogy":
        log = "logf" if ctype == "float" else "log"
        return f"(({b}) != ({b}) ? ({b}) : ({a}) == 0 ? ({ctype})0 : ({a}) * {log}({b}))"
    if op == "where":
        return f"(({a}) ? ({ctype})({b}) : ({ctype})({args[2]}))"
    if op == "clamp":
        lo, hi = node.attr("lo"), node.attr("hi")
        out = a
        if lo is not None:
            out = f"optiml_nanmax<{ctype}>({out}, {literal(lo, ctype)})"
        if hi is not None:
            out = f"optiml_nanmin<{ctype}>({out}, {literal(hi, ctype)})"
        return out
    raise TemplateError(f"no C expression for element-wise op {op}")


#: A literal as :func:`literal` writes it: ``((int64_t)2)``, ``2.0f``, ``-0.5``.
_LITERAL = re.compile(r"^\(\(int64_t\)(-?\d+)\)$|^(-?\d+\.\d*(?:e-?\d+)?)f?$")


def _power(base: str, exponent: str, ctype: str) -> str:
    """``base ** exponent``. A literal exponent PyTorch's CUDA ``pow`` special-cases is computed the way it
    computes it (``x * x`` for 2, ``sqrt`` for 0.5, ...): the same result, and none of ``powf``'s ~40
    instructions of logarithm and exponential, which made level1/36_RMSNorm's ``x ** 2`` over 64 channels
    compute-bound (10.9 ms against 5.2 ms for the same loads with a product)."""
    found = _LITERAL.match(exponent.strip()) if ctype in ("float", "double") else None
    value = float(found.group(1) or found.group(2)) if found else None
    one = f"(({ctype})1)"
    special = {
        1.0: f"(({ctype})({base}))",
        2.0: f"(({base}) * ({base}))",
        3.0: f"(({base}) * ({base}) * ({base}))",
        0.5: f"{_fn('sqrt', ctype)}({base})",
        -0.5: f"{_fn('rsqrt', ctype)}({base})" if ctype == "float" else f"(1.0 / sqrt({base}))",
        -1.0: f"({one} / ({base}))",
        -2.0: f"({one} / (({base}) * ({base})))",
    }
    if value in special:
        return special[value]
    return f"{'powf' if ctype == 'float' else 'pow'}(({ctype})({base}), ({ctype})({exponent}))"


def arith_type(dtype: str) -> str:
    """The C type values of ``dtype`` are computed in."""
    if dtype == "float64":
        return "double"
    if dtype in ("float32", "float16", "bfloat16"):
        return "float"
    if dtype == "bool":
        return "bool"
    return "int64_t"
