"""What the dedicated kernels (permute, pool, cat) share around their device code.

A kernel receives ``{prefix}_io`` by value: the ABI descriptors its device code names (compacted by
:func:`~optiml.templates.descriptors.compact_descriptors`), the workspace and the group's operand
pointers, evaluated in host code. :func:`io_bind` rebinds the ABI names inside the kernel, and
:func:`device_context` renames a render context's operands to the kernel-local pointers. Also:
division by a run-time invariant divisor (:func:`fast_div_code`) and the launch check.
"""

from __future__ import annotations

from dataclasses import replace

from optiml.graph.ir import Node
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    Operand,
    RenderContext,
    Space,
    TemplateError,
)
from optiml.templates.descriptors import UsedDescriptors
from optiml.templates.group import Group

#: Block sizes a one-node grid-stride kernel may take (:class:`GridStrideTemplate`).
GRID_STRIDE_THREADS = (128, 256, 512)


def fast_div_code(prefix: str) -> str:
    """Device and host code of ``{prefix}_fdiv<U>``: division by a run-time invariant divisor.

    Granlund-Montgomery with an (N+1)-bit magic number: ``n / d == (umulhi(n, mul) + n) >> shr``
    for ``n, d < 2^(N-1)`` (N = 32 or 64). ``{prefix}_fdiv_init(f, d)`` computes it on the host.
    """
    p = prefix
    return f"""\
template <typename U> struct {p}_fdiv;
template <> struct {p}_fdiv<uint32_t> {{
  uint32_t d, mul, shr;
  __device__ __forceinline__ uint32_t div(uint32_t n) const {{ return (__umulhi(n, mul) + n) >> shr; }}
}};
template <> struct {p}_fdiv<uint64_t> {{
  uint64_t d, mul;
  uint32_t shr;
  __device__ __forceinline__ uint64_t div(uint64_t n) const {{ return (__umul64hi(n, mul) + n) >> shr; }}
}};
static void {p}_fdiv_init({p}_fdiv<uint32_t>& f, uint64_t d) {{  // requires 1 <= d < 2^31
  uint32_t s = 0;
  while ((1ull << s) < d) ++s;
  f.d = (uint32_t)d;
  f.shr = s;
  f.mul = (uint32_t)((((1ull << 32) * ((1ull << s) - d)) / d) + 1);
}}
static void {p}_fdiv_init({p}_fdiv<uint64_t>& f, uint64_t d) {{  // requires 1 <= d < 2^63
  const unsigned __int128 one = 1;
  uint32_t s = 0;
  while ((one << s) < d) ++s;
  f.d = d;
  f.shr = s;
  f.mul = (uint64_t)((((one << 64) * ((one << s) - d)) / d) + 1);
}}
"""


def io_struct_code(prefix: str, used: UsedDescriptors, ctx: RenderContext) -> str:
    """``{prefix}_io``: what a kernel of the group receives by value.

    The ABI tensor descriptors its device code names (so loaders and storers written against the
    host names ``inputs[k]``, ``outputs[k]``, ``workspace`` work in device code, see :func:`io_bind`;
    renumbered by :func:`~optiml.templates.descriptors.compact_descriptors`) and the group's operand
    pointers, evaluated in host code (an operand may live in the workspace at an offset only host
    code knows).
    """
    return f"""\
struct {prefix}_io {{
  optiml_tensor in[{used.input_slots}];
  optiml_tensor out[{used.output_slots}];
  void* ws;
  const void* in_ptr[{max(1, len(ctx.inputs))}];
  void* out_ptr[{max(1, len(ctx.outputs))}];
}};
"""


def io_bind(ctx: RenderContext) -> str:
    """Kernel-body statements: the ABI names and the operands as typed local pointers."""
    p = ctx.prefix
    lines = [
        "  [[maybe_unused]] const optiml_tensor* inputs = args.in;",
        "  [[maybe_unused]] const optiml_tensor* outputs = args.out;",
        "  [[maybe_unused]] void* workspace = args.ws;",
    ]
    lines += [
        f"  [[maybe_unused]] const {op.ctype}* __restrict__ {p}_in{k} = (const {op.ctype}*)args.in_ptr[{k}];"
        for k, op in enumerate(ctx.inputs)
    ]
    lines += [
        f"  [[maybe_unused]] {op.ctype}* __restrict__ {p}_out{k} = ({op.ctype}*)args.out_ptr[{k}];"
        for k, op in enumerate(ctx.outputs)
    ]
    return "\n".join(lines) + "\n"


def device_context(ctx: RenderContext, compute: str | None = None) -> RenderContext:
    """``ctx`` with its operands renamed to the kernel-local pointers of :func:`io_bind`.

    Loaders and storers (fused element-wise code) are kept as they are: they are written against
    the ABI names, which :func:`io_bind` rebinds. ``compute`` overrides the compute type.
    """
    p = ctx.prefix
    return replace(
        ctx,
        inputs=[Operand(f"{p}_in{k}", op.ctype) for k, op in enumerate(ctx.inputs)],
        outputs=[Operand(f"{p}_out{k}", op.ctype) for k, op in enumerate(ctx.outputs)],
        compute_type=compute or ctx.compute_type,
    )


def io_fill_host(prefix: str, counts: tuple[int, int], used: UsedDescriptors, ctx: RenderContext) -> list[str]:
    """Host statements declaring ``{prefix}_args`` (a ``{prefix}_io``) filled from the ABI arguments;
    ``counts`` are the task's ABI input and output counts (checked), ``used`` the descriptors copied."""
    p = prefix
    n_in, n_out = counts
    lines = [f"  if (n_inputs < {n_in} || n_outputs < {n_out}) return -1;", f"  {p}_io {p}_args;"]
    lines += [f"  {line}" for line in used.fill(f"{p}_args")]
    lines.append(f"  {p}_args.ws = workspace;")
    lines += [f"  {p}_args.in_ptr[{k}] = (const void*)({op.ptr});" for k, op in enumerate(ctx.inputs)]
    lines += [f"  {p}_args.out_ptr[{k}] = (void*)({op.ptr});" for k, op in enumerate(ctx.outputs)]
    return lines


def io_counts(group: Group) -> tuple[int, int]:
    """Descriptor counts the io struct holds: every ABI input and output of the task."""
    return max(1, len(group.graph.inputs)), max(1, len(group.graph.outputs))


def launch_check() -> str:
    return "{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }"


def grid_stride_launch(p: str, kernel: str, threads: int, sizes: str, guard: str, args: str) -> str:
    """Host statements launching a grid-stride ``kernel`` of ``threads`` threads over ``{p}_n`` elements:
    ``sizes`` declares ``{p}_n`` (and any other extent the launch needs), the grid is capped at 65535 * 16
    blocks, and the launch runs only where ``guard`` holds (e.g. ``{p}_n > 0``)."""
    return f"""\
  {{
    const int64_t {sizes};
    const int64_t {p}_blocks = optiml_cdiv({p}_n, {threads}) < 65535 * 16 ? optiml_cdiv({p}_n, {threads}) : 65535 * 16;
    if ({guard})
      {kernel}<<<(unsigned){p}_blocks, {threads}, 0, stream>>>({args});
    {launch_check()}
  }}
"""


class GridStrideTemplate:
    """A family of one kernel over one node's output, in a grid-stride loop (:func:`grid_stride_launch`):
    one variant, a ``threads`` knob, 256 threads a block by default (a memory-bound copy). Subclasses name
    the family, its variant and the ops it serves, and write the kernel in :meth:`render_node`."""

    name: str
    variant: str
    ops: tuple[str, ...]

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        return Space({self.variant: {"threads": GRID_STRIDE_THREADS}})

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        return GroupConfig.of(self.variant, threads=256)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        return [self.default(group, facts), GroupConfig.of(self.variant, threads=512)]

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"{self.name}: {reason}")
        nodes = [group.graph.nodes[i] for i in group.nodes]
        if len(nodes) != 1 or nodes[0].op not in self.ops:
            raise TemplateError(f"{self.name}: a group holds exactly one {' or '.join(self.ops)} node")
        node = nodes[0]
        if node.outputs[0] not in group.outputs:
            return KernelCode(device=f"// {ctx.prefix}: {node.op} not read by anyone", host="")
        return self.render_node(group, node, ctx, int(config.get("threads")))

    def render_node(self, group: Group, node: Node, ctx: RenderContext, threads: int) -> KernelCode:
        raise NotImplementedError
