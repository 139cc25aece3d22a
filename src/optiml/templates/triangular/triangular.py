"""``torch.tril`` / ``torch.triu`` where no product's epilogue takes them: a masked copy of its own.

A GEMM epilogue knows each element's row and column and applies the mask there (``product/epilogue.py``);
anywhere else — a causal mask built as ``torch.tril(torch.ones(T, T))``, Mamba2's segment sums — the
planner gives the node this kernel: each thread strides over the output's elements, takes the row and
column of its last two dims from the linear index, and writes the input (or the constant the input is)
where ``column − row`` is on the kept side of ``diagonal``, else zero.
"""

from __future__ import annotations

from optiml.graph.ir import Node
from optiml.templates.base import KernelCode, RenderContext, c_type, from_compute
from optiml.templates.cexpr import arith_type, literal
from optiml.templates.group import Group
from optiml.templates.kernel_io import GridStrideTemplate, grid_stride_launch


class TriangularTemplate(GridStrideTemplate):
    """256 threads a block by default, a grid-stride loop: a memory-bound copy with two divisions an element."""

    name, variant, ops = "triangular", "masked_copy", ("tril", "triu")

    def render_node(self, group: Group, node: Node, ctx: RenderContext, threads: int) -> KernelCode:
        p = ctx.prefix
        out_vid, src_vid = node.outputs[0], node.inputs[0]
        dtype = group.graph.type(out_vid).dtype
        storage = c_type(dtype)
        zero = from_compute(literal(0, arith_type(dtype)), dtype)
        constant = group.graph.value(src_vid).const
        if constant is not None:
            value = from_compute(literal(constant, arith_type(dtype)), dtype)
            src = f"(const {storage}*)nullptr"
        else:
            value = zero  # unused: the input is read
            src = ctx.inp(list(group.inputs).index(src_vid)).ptr
        out = ctx.out(list(group.outputs).index(out_vid)).ptr
        ndim = group.graph.type(out_vid).ndim
        numel = " * ".join(f"({ctx.dim(out_vid, d)})" for d in range(ndim))
        keep = "c - r <= diagonal" if node.op == "tril" else "c - r >= diagonal"
        device = f"""\
// ---- {p}: {node.op} (diagonal {node.attr("diagonal", 0)}) as a masked copy ----
__global__ void {p}_masked_copy(const {storage}* __restrict__ in, {storage} value, {storage}* __restrict__ out,
    int64_t n, int64_t rows, int64_t cols, int64_t diagonal) {{
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {{
    const int64_t c = e % cols, r = (e / cols) % rows;
    out[e] = ({keep}) ? (in != nullptr ? in[e] : value) : {zero};
  }}
}}
"""
        diagonal = int(node.attr("diagonal", 0))
        args = (
            f"{src}, {value}, {out}, {p}_n,\n"
            f"          {ctx.dim(out_vid, ndim - 2)}, {ctx.dim(out_vid, ndim - 1)}, (int64_t){diagonal}"
        )
        host = grid_stride_launch(p, f"{p}_masked_copy", threads, f"{p}_n = {numel}", f"{p}_n > 0", args)
        return KernelCode(device=device, host=host)
