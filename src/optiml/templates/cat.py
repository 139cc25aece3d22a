"""Concatenation kernels: ``out = torch.cat(parts, dim)`` of contiguous parts of one dtype.

Every part and the output are seen as ``[rows, length]`` matrices: ``rows`` is the product of the
dims before ``dim`` (the same for every part), a part's ``length`` the product of its dims from
``dim`` on, and the output's row the parts' rows side by side (part ``j`` starts at the sum of the
earlier lengths). Sizes come from the parts' run-time shapes only, so the output's concatenated
dim (a sum, which no single ABI dim equals) is never asked for.

One launch copies up to ``MAX_PARTS`` parts (``blockIdx.y`` picks the part; more parts take more
launches). A part is cut into chunks of ``threads × items`` vectors per row, and blocks stride over
(row, chunk) pairs, so a channel concatenation with a small batch (few long rows) still fills the
GPU. Elements move in their storage type (exact for any dtype); a part whose length, offset and
both base addresses allow it moves 16-byte vectors, else single elements (decided per part at run
time).

Variant ``copy``; knobs ``threads`` ∈ {128, 256, 512}, ``items`` (vectors per thread per chunk)
∈ {1, 2, 4}. Default rule: ``copy(threads=256, items=4)``.
"""

from __future__ import annotations

from typing import Any

from optiml.templates.base import DeviceFacts, GroupConfig, KernelCode, RenderContext, Space, TemplateError
from optiml.templates.permute import find_node, launch_check

#: Parts one launch copies (its table is a by-value kernel argument: 32 entries of 40 bytes).
MAX_PARTS = 32
#: Blocks per SM the grid is capped at; blocks stride over the (row, chunk) pairs beyond it.
BLOCKS_PER_SM = 8


class CatTemplate:
    """``torch.cat(parts, dim)``; see the module docstring for the kernel and the default rule."""

    name = "cat"

    def space(self, group: Any, facts: DeviceFacts) -> Space:
        return Space(knobs={"copy": {"threads": (128, 256, 512), "items": (1, 2, 4)}})

    def default(self, group: Any, facts: DeviceFacts) -> GroupConfig:
        return GroupConfig.of("copy", threads=256, items=4)

    def seeds(self, group: Any, facts: DeviceFacts) -> list[GroupConfig]:
        return [self.default(group, facts), GroupConfig.of("copy", threads=512, items=2)]

    def render(self, group: Any, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"cat: {reason}")
        if ctx.loaders is not None or ctx.storers is not None:
            raise TemplateError("cat: fused loads or stores are not supported (it only moves elements)")
        node = find_node(group, ("cat",))
        if node is None or len(ctx.outputs) != 1:
            raise TemplateError("cat: needs one cat node writing one output")
        g, dim = group.graph, int(node.attr("dim"))
        out_type = g.type(node.outputs[0])
        for vid in node.inputs:
            if g.type(vid).dtype != out_type.dtype:
                raise TemplateError(f"cat: a {g.type(vid).dtype} part in a {out_type.dtype} result (cast it first)")
        p, ctype = ctx.prefix, ctx.outputs[0].ctype
        threads, items = int(config.get("threads")), int(config.get("items"))
        first = node.inputs[0]
        rows = " * ".join(f"(int64_t)({ctx.dim(first, d)})" for d in range(dim)) or "(int64_t)1"
        parts = []
        for vid in node.inputs:
            t = g.type(vid)
            length = " * ".join(f"(int64_t)({ctx.dim(vid, d)})" for d in range(dim, t.ndim)) or "(int64_t)1"
            parts.append((ctx.inputs[group.inputs.index(vid)].ptr, length))
        device = _device_code(p, ctype, threads, items)
        host = _host_code(p, ctype, rows, parts, ctx.outputs[0].ptr, threads, items, ctx.facts.sm_count)
        label = f"cat dim={dim} of {len(parts)} parts {config.label()}"
        return KernelCode(device=f"// ---- {p}: {label} ----\n{device}", host=f"{{  // {p}: {label}\n{host}}}\n")


def _device_code(p: str, ctype: str, threads: int, items: int) -> str:
    return f"""\
struct {p}_part {{
  const {ctype}* src;
  int64_t length;  // elements of one row of this part
  int64_t offset;  // where its row starts in the output's row
  int64_t chunks;  // chunks per row
  int vec;         // 16-byte vectors allowed (length, offset and both addresses aligned)
}};
struct {p}_table {{
  {p}_part part[{MAX_PARTS}];
  {ctype}* dst;
  int64_t rows, row_length;
}};
// Block (x, y) copies chunks of part y: chunk c of row r is elements [c * CHUNK, (c + 1) * CHUNK) of
// the row, CHUNK = {threads} threads x {items} vectors; blocks stride over the (row, chunk) pairs.
__global__ void __launch_bounds__({threads}) {p}_copy(const {p}_table T) {{
  const {p}_part q = T.part[blockIdx.y];
  constexpr int V = 16 / (int)sizeof({ctype}) > 0 ? 16 / (int)sizeof({ctype}) : 1;
  constexpr int64_t CHUNK = (int64_t){threads} * {items} * V;
  const int64_t pairs = T.rows * q.chunks;
  for (int64_t b = blockIdx.x; b < pairs; b += gridDim.x) {{
    const int64_t r = b / q.chunks;
    const int64_t start = (b - r * q.chunks) * CHUNK;
    const int64_t end = start + CHUNK < q.length ? start + CHUNK : q.length;
    const {ctype}* __restrict__ src = q.src + r * q.length;
    {ctype}* __restrict__ dst = T.dst + r * T.row_length + q.offset;
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
    }} else {{
      for (int64_t i = start + threadIdx.x; i < end; i += {threads}) dst[i] = src[i];
    }}
  }}
}}
"""


def _host_code(
    p: str, ctype: str, rows: str, parts: list[tuple[str, str]], dst: str, threads: int, items: int, sms: int
) -> str:
    lines = [
        f"  const int64_t {p}_rows = {rows};",
        f"  const int64_t {p}_lengths[{len(parts)}] = {{{', '.join(length for _, length in parts)}}};",
        f"  const {ctype}* {p}_srcs[{len(parts)}] = {{{', '.join(ptr for ptr, _ in parts)}}};",
        f"  {ctype}* {p}_dst = {dst};",
        f"  int64_t {p}_row_length = 0;",
        f"  for (int {p}_j = 0; {p}_j < {len(parts)}; ++{p}_j) {p}_row_length += {p}_lengths[{p}_j];",
        f"  const int {p}_V = 16 / (int)sizeof({ctype}) > 0 ? 16 / (int)sizeof({ctype}) : 1;",
        f"  const int64_t {p}_chunk = (int64_t){threads} * {items} * {p}_V;",
        f"  int64_t {p}_offset = 0;",
        f"  for (int {p}_first = 0; {p}_first < {len(parts)}; {p}_first += {MAX_PARTS}) {{",
        f"    {p}_table {p}_t;",
        f"    {p}_t.dst = {p}_dst;",
        f"    {p}_t.rows = {p}_rows;",
        f"    {p}_t.row_length = {p}_row_length;",
        f"    int {p}_n = 0;",
        f"    int64_t {p}_most = 0;",
        f"    for (int {p}_j = {p}_first; {p}_j < {len(parts)} && {p}_n < {MAX_PARTS}; ++{p}_j, ++{p}_n) {{",
        f"      {p}_part& {p}_q = {p}_t.part[{p}_n];",
        f"      {p}_q.src = {p}_srcs[{p}_j];",
        f"      {p}_q.length = {p}_lengths[{p}_j];",
        f"      {p}_q.offset = {p}_offset;",
        f"      {p}_q.chunks = optiml_cdiv({p}_q.length, {p}_chunk);",
        f"      {p}_q.vec = {p}_q.length % {p}_V == 0 && {p}_offset % {p}_V == 0 && {p}_row_length % {p}_V == 0"
        f" && ((uintptr_t){p}_q.src % 16) == 0 && ((uintptr_t){p}_dst % 16) == 0;",
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
