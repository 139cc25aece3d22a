"""Row copies: ``torch.cat(parts, dim)`` of parts of one dtype, and slices (``x[:, a:b]``, ``split``,
``chunk``, ``narrow``, ``select``) made contiguous.

Every tensor is seen as a ``[rows, row]`` matrix split at the dim: ``rows`` is the product of the
dims before it, a row the product of the dims from it on. A *part* copies ``length`` elements of
each row of its source, starting ``src_off`` into a source row of ``src_row`` elements, to
``dst_off`` into the output's row. A concatenation has one part per input (each a whole source
row, side by side in the output's row; sizes come from the parts' shapes, so the output's
concatenated dim, a sum no ABI dim equals, is never asked for); a slice is one part reading the
sliced range of each source row (its start, which may differ between shape sets, is a run-time
size expression).

One launch copies up to ``MAX_PARTS`` parts (``blockIdx.y`` picks the part; more parts take more
launches). A part is cut into chunks of ``threads × items`` vectors per row, and blocks stride over
(row, chunk) pairs, so few long rows (a channel concatenation with a small batch) still fill the
GPU. Elements move in their storage type (exact for any dtype); a part whose lengths, offsets and
base addresses allow it moves 16-byte vectors, else single elements (decided per part at run time).

Variant ``copy``; knobs ``threads`` ∈ {128, 256, 512}, ``items`` (vectors per thread per chunk)
∈ {1, 2, 4}. Default rule: ``copy(threads=256, items=4)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.graph.sizes import SizeResolver
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    RenderContext,
    Space,
    TemplateError,
    from_compute,
)
from optiml.templates.group import Group, find_node
from optiml.templates.kernel_io import launch_check

#: Parts one launch copies (its table is a by-value kernel argument: 32 entries of 64 bytes).
MAX_PARTS = 32
#: Blocks per SM the grid is capped at; blocks stride over the (row, chunk) pairs beyond it.
BLOCKS_PER_SM = 8


@dataclass(frozen=True)
class Part:
    """One source's copy, as C expressions: its pointer, its row, where the range starts, its length;
    a constant part (``zeros_like(...)`` concatenated) has a null pointer and its value in ``fill``."""

    src: str
    src_row: str
    src_off: str
    length: str
    fill: str = "0.0"


class CatTemplate:
    """Concatenations and slices; see the module docstring for the kernel and the default rule."""

    name = "cat"

    def __init__(self, sizes: SizeResolver) -> None:
        self.sizes = sizes  # every shape set's graph: a slice's start is a size expression over them

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        return Space(knobs={"copy": {"threads": (128, 256, 512), "items": (1, 2, 4)}})

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        return GroupConfig.of("copy", threads=256, items=4)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        return [self.default(group, facts), GroupConfig.of("copy", threads=512, items=2)]

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"{group.template}: {reason}")
        if ctx.loaders is not None or ctx.storers is not None:
            raise TemplateError(f"{group.template}: fused loads or stores are not supported (it only moves elements)")
        node = find_node(group, ("cat", "slice"))
        if node is None or len(ctx.outputs) != 1:
            raise TemplateError(f"{group.template}: needs one cat or slice node writing one output")
        g, dim = group.graph, int(node.attr("dim"))
        out_type = g.type(node.outputs[0])
        for vid in node.inputs:
            if g.type(vid).dtype != out_type.dtype:
                raise TemplateError(f"cat: a {g.type(vid).dtype} part in a {out_type.dtype} result (cast it first)")
        first = node.inputs[0]
        rows = _product(ctx, first, range(dim))
        if node.op == "cat":
            parts = []
            for vid in node.inputs:
                length = _product(ctx, vid, range(dim, g.type(vid).ndim))
                value = g.value(vid)
                if value.const is not None:  # a constant part (is_const)
                    parts.append(Part("nullptr", length, "(int64_t)0", length, fill=repr(float(value.const))))
                else:
                    parts.append(Part(ctx.inputs[group.inputs.index(vid)].ptr, length, "(int64_t)0", length))
            label = f"cat dim={dim} of {len(parts)} parts"
        else:
            ndim = g.type(first).ndim
            start = self.sizes.size(tuple(graph.nodes[node.index].attr("start") for graph in self.sizes.graphs))
            inner = _product(ctx, first, range(dim + 1, ndim))
            parts = [
                Part(
                    ctx.inputs[0].ptr,
                    _product(ctx, first, range(dim, ndim)),
                    f"(int64_t)({start}) * {inner}",
                    _product(ctx, node.outputs[0], range(dim, ndim)),
                )
            ]
            label = f"slice dim={dim}"
        p, ctype = ctx.prefix, ctx.outputs[0].ctype
        threads, items = int(config.get("threads")), int(config.get("items"))
        label = f"{label} {config.label()}"
        host = _host_code(p, ctype, rows, parts, ctx.outputs[0].ptr, threads, items, ctx.facts.sm_count)
        return KernelCode(
            device=f"// ---- {p}: {label} ----\n{_device_code(p, ctype, out_type.dtype, threads, items)}",
            host=f"{{  // {p}: {label}\n{host}}}\n",
        )


def _product(ctx: RenderContext, vid: int, dims: range) -> str:
    return " * ".join(f"(int64_t)({ctx.dim(vid, d)})" for d in dims) or "(int64_t)1"


def _device_code(p: str, ctype: str, dtype: str, threads: int, items: int) -> str:
    fill = from_compute("q.fill", dtype) if dtype in ("float16", "bfloat16") else f"(({ctype})q.fill)"
    return f"""\
struct {p}_part {{
  const {ctype}* src;  // null: every element is `fill`
  double fill;
  int64_t src_row;  // elements of one source row
  int64_t src_off;  // where the copied range starts in a source row
  int64_t length;   // elements copied per row
  int64_t dst_off;  // where they go in the output's row
  int64_t chunks;   // chunks per row
  int vec;          // 16-byte vectors allowed (lengths, offsets and both addresses aligned)
}};
struct {p}_table {{
  {p}_part part[{MAX_PARTS}];
  {ctype}* dst;
  int64_t rows, dst_row;
}};
// Block (x, y) copies chunks of part y: chunk c of row r is elements [c * CHUNK, (c + 1) * CHUNK) of
// the part's range, CHUNK = {threads} threads x {items} vectors; blocks stride over the (row, chunk) pairs.
__global__ void __launch_bounds__({threads}) {p}_copy(const {p}_table T) {{
  const {p}_part q = T.part[blockIdx.y];
  constexpr int V = 16 / (int)sizeof({ctype}) > 0 ? 16 / (int)sizeof({ctype}) : 1;
  constexpr int64_t CHUNK = (int64_t){threads} * {items} * V;
  const int64_t pairs = T.rows * q.chunks;
  for (int64_t b = blockIdx.x; b < pairs; b += gridDim.x) {{
    const int64_t r = b / q.chunks;
    const int64_t start = (b - r * q.chunks) * CHUNK;
    const int64_t end = start + CHUNK < q.length ? start + CHUNK : q.length;
    const {ctype}* __restrict__ src = q.src + r * q.src_row + q.src_off;
    {ctype}* __restrict__ dst = T.dst + r * T.dst_row + q.dst_off;
    if (q.vec) {{
      const uint4* __restrict__ s4 = (const uint4*)(src + start);
      uint4* __restrict__ d4 = (uint4*)(dst + start);
      const int64_t n = (end - start) / V;
      uint4 v[{items}];
#pragma unroll
      for (int k = 0; k < {items}; ++k) {{
        const int64_t i = (int64_t)k * {threads} + threadIdx.x;
        if (i < n) v[k] = s4[i];
      }}
#pragma unroll
      for (int k = 0; k < {items}; ++k) {{
        const int64_t i = (int64_t)k * {threads} + threadIdx.x;
        if (i < n) d4[i] = v[k];
      }}
    }} else if (q.src == nullptr) {{
      for (int64_t i = start + threadIdx.x; i < end; i += {threads}) dst[i] = {fill};
    }} else {{
      for (int64_t i = start + threadIdx.x; i < end; i += {threads}) dst[i] = src[i];
    }}
  }}
}}
"""


def _host_code(p: str, ctype: str, rows: str, parts: list[Part], dst: str, threads: int, items: int, sms: int) -> str:
    n = len(parts)
    lines = [
        f"  const int64_t {p}_rows = {rows};",
        f"  const {ctype}* {p}_srcs[{n}] = {{{', '.join(part.src for part in parts)}}};",
        f"  const int64_t {p}_src_rows[{n}] = {{{', '.join(part.src_row for part in parts)}}};",
        f"  const int64_t {p}_src_offs[{n}] = {{{', '.join(part.src_off for part in parts)}}};",
        f"  const int64_t {p}_lengths[{n}] = {{{', '.join(part.length for part in parts)}}};",
        f"  const double {p}_fills[{n}] = {{{', '.join(part.fill for part in parts)}}};",
        f"  {ctype}* {p}_dst = {dst};",
        f"  int64_t {p}_dst_row = 0;",
        f"  for (int {p}_j = 0; {p}_j < {n}; ++{p}_j) {p}_dst_row += {p}_lengths[{p}_j];",
        f"  const int {p}_V = 16 / (int)sizeof({ctype}) > 0 ? 16 / (int)sizeof({ctype}) : 1;",
        f"  const int64_t {p}_chunk = (int64_t){threads} * {items} * {p}_V;",
        f"  int64_t {p}_offset = 0;",
        f"  for (int {p}_first = 0; {p}_first < {n}; {p}_first += {MAX_PARTS}) {{",
        f"    {p}_table {p}_t;",
        f"    {p}_t.dst = {p}_dst;",
        f"    {p}_t.rows = {p}_rows;",
        f"    {p}_t.dst_row = {p}_dst_row;",
        f"    int {p}_n = 0;",
        f"    int64_t {p}_most = 0;",
        f"    for (int {p}_j = {p}_first; {p}_j < {n} && {p}_n < {MAX_PARTS}; ++{p}_j, ++{p}_n) {{",
        f"      {p}_part& {p}_q = {p}_t.part[{p}_n];",
        f"      {p}_q.src = {p}_srcs[{p}_j];",
        f"      {p}_q.fill = {p}_fills[{p}_j];",
        f"      {p}_q.src_row = {p}_src_rows[{p}_j];",
        f"      {p}_q.src_off = {p}_src_offs[{p}_j];",
        f"      {p}_q.length = {p}_lengths[{p}_j];",
        f"      {p}_q.dst_off = {p}_offset;",
        f"      {p}_q.chunks = optiml_cdiv({p}_q.length, {p}_chunk);",
        f"      {p}_q.vec = ({p}_q.length | {p}_q.src_row | {p}_q.src_off | {p}_offset | {p}_dst_row) % {p}_V == 0"
        f" && {p}_q.src != nullptr && ((uintptr_t){p}_q.src % 16) == 0 && ((uintptr_t){p}_dst % 16) == 0;",
        f"      {p}_offset += {p}_q.length;",
        f"      if ({p}_rows * {p}_q.chunks > {p}_most) {p}_most = {p}_rows * {p}_q.chunks;",
        "    }",
        f"    if ({p}_most > 0) {{",
        f"      const int64_t {p}_cap = (int64_t){sms} * {BLOCKS_PER_SM};",
        f"      const dim3 {p}_grid((unsigned)({p}_most < {p}_cap ? {p}_most : {p}_cap), (unsigned){p}_n);",
        f"      {p}_copy<<<{p}_grid, {threads}, 0, stream>>>({p}_t);",
        f"      {launch_check()}",
        "    }",
        "  }",
    ]
    return "\n".join(lines) + "\n"
