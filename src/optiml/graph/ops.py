"""The canonical ops of the IR, by class, and how ATen overloads map onto them.

Every op the planner can place belongs to one class: ``pointwise`` (fused freely),
``reduce`` (over some dims, keepdim or not), ``view`` (no data movement: reshape, unsqueeze,
squeeze, expand), ``scan``, ``permute`` (a real data movement), ``cat`` (parts of one dtype side by
side along attr ``dim``), ``slice`` (the range of attr ``dim`` from attr ``start``, as long as the output's
dim: step 1), ``pool``, ``gather``, ``const``,
``matmul`` (``torch.matmul`` semantics over stored operands: attrs ``trans_a`` / ``trans_b`` say an
operand's last two dims are swapped, ``batch`` is the number of output batch dims, into which the
operands' own batch dims broadcast, right-aligned; a rank-1 operand is a vector), ``conv``
(``aten.convolution`` over (input, weight[, bias]): attrs ``spatial``, ``stride``, ``padding``,
``dilation``, ``transposed``, ``output_padding``, ``groups``, ``bias``).
An ATen op outside these tables has no template: capture names it in a one-line error.
"""

from __future__ import annotations

UNARY = {
    "abs",
    "neg",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log1p",
    "log2",
    "log10",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "relu",
    "erf",
    "reciprocal",
    "sign",
    "floor",
    "ceil",
    "round",
    "trunc",
    "logical_not",
    "bitwise_not",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "isnan",
    "isinf",
    "identity",
    "cast",
    "square",
}
BINARY = {
    "add",
    "sub",
    "mul",
    "div",
    "div_trunc",
    "div_floor",
    "pow",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "atan2",
    "fmod",
    "remainder",
    "copysign",
    "xlogy",
}
TERNARY = {"where", "clamp"}
#: element-wise on a matrix's (row, column): ``triu``/``tril`` keep the elements on and above / below
#: diagonal ``diagonal`` (attr) of the last two dims; only kernels that know each element's row and
#: column render them (the GEMM epilogue)
TRIANGULAR = {"triu", "tril"}
POINTWISE = UNARY | BINARY | TERNARY
REDUCE = {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "any", "all"}
VIEW = {"view", "expand"}
SCAN = {"cumsum", "cumprod"}
POOL = {"max_pool", "avg_pool"}
MATMUL = {"matmul"}
CONV = {"conv"}

#: ATen op name → canonical pointwise name, where they differ only by name.
ATEN_POINTWISE = {name: name for name in POINTWISE if name not in ("identity", "cast", "div_trunc", "div_floor")}
ATEN_POINTWISE.update(
    {
        "clamp_min": "clamp",
        "clamp_max": "clamp",
        "bitwise_not": "bitwise_not",
        "true_divide": "div",
        "rsub": "sub",
        "special_erf": "erf",
        "alias": "identity",
        "clone": "identity",
        "lift_fresh_copy": "identity",
        "detach": "identity",
        "_to_copy": "cast",
        "to": "cast",
        "convert_element_type": "cast",
        "positive": "identity",
        "pow": "pow",
    }
)


#: recurrent layers, one node each (``optiml.graph.recurrent``): inputs (x, h0[, c0], weights…), outputs
#: (the output sequence, h_n[, c_n]); attrs ``cell``, ``layers``, ``bidirectional``, ``batch_first``,
#: ``bias`` (sizes come from the operands at run time)
RECURRENT = {"lstm", "gru"}


def op_class(op: str) -> str:
    if op in POINTWISE:
        return "pointwise"
    if op in REDUCE:
        return "reduce"
    if op in VIEW:
        return "view"
    if op in SCAN:
        return "scan"
    if op in POOL:
        return "pool"
    if op in MATMUL:
        return "matmul"
    if op in CONV:
        return "conv"
    if op in RECURRENT:
        return "recurrent"
    if op in TRIANGULAR:
        return "triangular"
    if op == "index_rows":  # whole rows picked by an integer index tensor (``x[idx]``)
        return "index"
    if op in ("permute", "gather", "flip", "cat", "slice"):
        return op
    raise KeyError(op)
