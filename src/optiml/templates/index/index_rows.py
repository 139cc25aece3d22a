"""``x[idx]`` with one integer index tensor on the first dim (``aten.index.Tensor``): a gather of rows.

Output element ``e`` is row ``idx[e / inner]`` of ``x`` at column ``e % inner`` (``inner``: the product of
``x``'s dims after the first). Each thread strides over the output's elements, reading the index once per
element (consecutive threads share an index and read consecutive columns: coalesced). A negative index
counts from the end, as in PyTorch; one outside ``[-rows, rows)``, which PyTorch refuses with an error,
writes NaN (integers: 0) so a verification against it fails loudly rather than reading out of bounds.
Relative-position tables in attention (Swin) are the use: a small table gathered into a large bias.
"""

from __future__ import annotations

from optiml.graph.ir import Node
from optiml.templates.base import KernelCode, RenderContext, c_type
from optiml.templates.group import Group
from optiml.templates.kernel_io import GridStrideTemplate, grid_stride_launch


class IndexRowsTemplate(GridStrideTemplate):
    """256 threads a block by default, a grid-stride loop: a memory-bound copy with one division an element."""

    name, variant, ops = "index", "row_copy", ("index_rows",)

    def render_node(self, group: Group, node: Node, ctx: RenderContext, threads: int) -> KernelCode:
        p = ctx.prefix
        src_vid, idx_vid = node.inputs
        out_vid = node.outputs[0]
        g = group.graph
        dtype, index_dtype = g.type(out_vid).dtype, g.type(idx_vid).dtype
        storage, index_type = c_type(dtype), c_type(index_dtype)
        missing = {  # NaN for floating types, 0 for the rest
            "float32": "__int_as_float(0x7fc00000)",
            "float64": "__longlong_as_double(0x7ff8000000000000LL)",
            "float16": "__float2half(__int_as_float(0x7fc00000))",
            "bfloat16": "__float2bfloat16(__int_as_float(0x7fc00000))",
        }.get(dtype, f"({storage})0")
        inputs = list(group.inputs)
        src, idx = ctx.inp(inputs.index(src_vid)).ptr, ctx.inp(inputs.index(idx_vid)).ptr
        out = ctx.out(list(group.outputs).index(out_vid)).ptr
        src_type, out_type = g.type(src_vid), g.type(out_vid)
        rows = ctx.dim(src_vid, 0)
        inner = " * ".join(f"({ctx.dim(src_vid, d)})" for d in range(1, src_type.ndim)) or "1"
        numel = " * ".join(f"({ctx.dim(out_vid, d)})" for d in range(out_type.ndim)) or "1"
        device = f"""\
// ---- {p}: x[idx], rows of x picked by an index tensor ----
__global__ void {p}_row_copy(const {storage}* __restrict__ x, const {index_type}* __restrict__ idx,
    {storage}* __restrict__ out, int64_t n, int64_t rows, int64_t inner) {{
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {{
    int64_t r = (int64_t)idx[e / inner];
    if (r < 0) r += rows;
    out[e] = (r >= 0 && r < rows) ? x[r * inner + e % inner] : {missing};
  }}
}}
"""
        host = grid_stride_launch(
            p,
            f"{p}_row_copy",
            threads,
            f"{p}_n = {numel}, {p}_inner = {inner}",
            f"{p}_n > 0 && {p}_inner > 0",
            f"{src}, {idx}, {out}, {p}_n, {rows}, {p}_inner",
        )
        return KernelCode(device=device, host=host)
