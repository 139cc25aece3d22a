"""Pooling kernels: max pooling (optionally with PyTorch's argmax indices) and average pooling, 1-D to 3-D.

Semantics are PyTorch's CUDA kernels', element for element:

* max: window positions ``o*s - p + k*d`` outside the input are skipped (padding acts as -inf);
  an element is taken when ``v > best`` or ``v`` is NaN (so NaN propagates and the index is the
  last NaN's); the index starts at the first valid position (an all ``-inf`` window reports it).
  Indices are flat within each ``(n, c)`` spatial plane of the input, int64.
* avg: the window ``[o*s - p, min(o*s - p + k, in + p))`` gives the padded count, its clip to
  ``[0, in)`` the valid count; the divisor is ``divisor_override``, else the padded count
  (``count_include_pad``) or the valid count; an empty clipped window yields 0.

The input is ``[N, C, *spatial]`` (or ``[C, *spatial]``): every leading dim is a plane index.
Sizes are read at run time; output sizes come from the output value's dims and are checked in
host code against PyTorch's formula (``floor_or_ceil((in + 2p - d*(k-1) - 1) / s) + 1``, and in
ceil mode the last window must start inside the input or the left padding). Hyper-parameters
(kernel, stride, padding, dilation) are constants of the op and baked in, so window loops unroll.

Variants:

* ``direct``: one output per (thread, j): a block covers ``threads * outputs_per_thread``
  consecutive outputs in row-major order (thread ``t`` takes ``base + j*threads + t``), so
  consecutive threads take consecutive output x (coalesced writes, neighbouring windows' reads
  shared through L1). Output coordinates are decoded with multiply-shift division (32-bit when
  the tensors have fewer than 2^31 elements). A thread computes all its outputs before storing
  any. Knobs: ``threads`` ∈ {128, 256, 512}, ``outputs_per_thread`` ∈ {1, 2, 4}.
* ``smem_tile`` (2-D / 3-D): a block computes a ``tile_y × tile_x`` tile of output (y, x) of one
  plane (and one output depth for 3-D), first staging the tile's input halo (all window depths
  for 3-D) in shared memory with coalesced row reads. Knobs: ``tile_x`` ∈ {32, 64}, ``tile_y`` ∈
  {4, 8, 16}. The space rejects it when a stride exceeds the window extent ``d*(k-1)+1`` (the
  halo would stage elements no window reads) or the halo exceeds the device's shared memory.

In both variants a window entirely inside the input runs a second copy of the (unrolled) window
loops without per-element bounds checks, reading at a row base plus constant offsets; windows
that touch the border take the checked loops. Device code reads and writes only through the
context's ``load`` / ``store`` (see :func:`optiml.templates.kernel_io.device_context`).

Default rule: ``direct(threads=256, outputs_per_thread=4)`` when the traced innermost output size
is at least 128, else ``outputs_per_thread=1``. Seeds add ``direct(threads=512)`` with the other
``outputs_per_thread`` and, when the window spans several rows (``max_pool1d`` traces as 2-D
pooling with a ``(1, k)`` window, which has no row reuse), two ``smem_tile`` shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optiml.templates.base import DeviceFacts, GroupConfig, KernelCode, RenderContext, Space, TemplateError
from optiml.templates.descriptors import UsedDescriptors, compact_descriptors
from optiml.templates.group import Group, PoolSpec, find_node
from optiml.templates.kernel_io import (
    device_context,
    fast_div_code,
    io_bind,
    io_counts,
    io_fill_host,
    io_struct_code,
)

_AXES = ("d", "h", "w")
STATIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory
FULL_UNROLL_WINDOW = 64  # windows up to this many elements are unrolled completely


@dataclass(frozen=True)
class _Pool:
    op: str  # "max_pool" | "avg_pool"
    spatial: int
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    ceil_mode: bool
    include_pad: bool
    divisor: int | None
    indices: bool

    @property
    def axes(self) -> tuple[str, ...]:
        return _AXES[3 - self.spatial :]

    def extent(self, i: int) -> int:
        return self.dilation[i] * (self.kernel[i] - 1) + 1


def _parse(group: Group) -> _Pool:
    spec = group.spec_of(PoolSpec)
    op = str(spec.op)
    if op not in ("max_pool", "avg_pool"):
        raise TemplateError(f"pool: unknown op {op!r}")
    spatial = int(spec.spatial)
    if spatial not in (1, 2, 3):
        raise TemplateError(f"pool: spatial={spatial} (1, 2 or 3)")

    def tup(name: str, default: int | None) -> tuple[int, ...]:
        value = getattr(spec, name)
        if value is None:
            if default is None:
                raise TemplateError(f"pool: spec has no {name}")
            return (default,) * spatial
        items = (value,) * spatial if isinstance(value, int) else tuple(value)
        if len(items) == 1 and spatial > 1:
            items = items * spatial
        if len(items) != spatial:
            raise TemplateError(f"pool: {name}={value!r} for {spatial} spatial dims")
        return tuple(int(v) for v in items)

    kernel = tup("kernel", None)
    stride = tup("stride", None) if spec.stride not in (None, (), []) else kernel
    padding = tup("padding", 0)
    dilation = tup("dilation", 1) if op == "max_pool" else (1,) * spatial
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise TemplateError(f"pool: bad window kernel={kernel} stride={stride} padding={padding} dilation={dilation}")
    divisor = spec.divisor
    if divisor is not None and int(divisor) == 0:
        raise TemplateError("pool: divisor_override must be nonzero")
    return _Pool(
        op=op,
        spatial=spatial,
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
        ceil_mode=bool(spec.ceil_mode),
        include_pad=bool(spec.count_include_pad),
        divisor=None if divisor is None else int(divisor),
        indices=op == "max_pool" and bool(spec.indices),
    )


def _elem_bytes(dtype: str) -> int:
    return 8 if dtype in ("float64", "int64") else 4


def _halo(pool: _Pool, tile_x: int, tile_y: int) -> tuple[int, int, int]:
    """Staged input extents (z, y, x) of a tile_y × tile_x output tile."""
    hx = (tile_x - 1) * pool.stride[-1] + pool.extent(pool.spatial - 1)
    hy = (tile_y - 1) * pool.stride[-2] + pool.extent(pool.spatial - 2)
    hz = pool.extent(0) if pool.spatial == 3 else 1
    return hz, hy, hx


def _tile_threads(tile_x: int, tile_y: int) -> tuple[int, int]:
    """(block rows, threads) of a smem_tile block: up to 256 threads, each computing tile_y / rows outputs."""
    rows = min(tile_y, 256 // tile_x)
    return rows, tile_x * rows


class PoolTemplate:
    """Max / average pooling; see the module docstring for the semantics, variants and default rule."""

    name = "pool"

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        pool = _parse(group)
        knobs: dict[str, dict[str, tuple[Any, ...]]] = {
            "direct": {"threads": (128, 256, 512), "outputs_per_thread": (1, 2, 4)}
        }
        if pool.spatial >= 2:
            knobs["smem_tile"] = {"tile_x": (32, 64), "tile_y": (4, 8, 16)}
        size = _elem_bytes(group.graph.type(group.inputs[0]).dtype)

        def check(config: GroupConfig) -> str | None:
            if config.variant != "smem_tile":
                return None
            for i in range(pool.spatial):
                if pool.stride[i] > pool.extent(i):
                    return f"smem_tile: stride {pool.stride[i]} > window extent {pool.extent(i)} (no reuse)"
            hz, hy, hx = _halo(pool, int(config.get("tile_x")), int(config.get("tile_y")))
            smem = hz * hy * hx * size
            if smem > facts.smem_per_block_optin:
                return f"smem_tile: halo needs {smem} B of shared memory > {facts.smem_per_block_optin}"
            return None

        return Space(knobs=knobs, check=check)

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        out = _values_vid(group)
        shape = group.graph.type(out).shape
        inner = shape[-1] if shape else 1
        return GroupConfig.of("direct", threads=256, outputs_per_thread=4 if inner >= 128 else 1)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        first = self.default(group, facts)
        other_opt = 1 if first.get("outputs_per_thread") == 4 else 4
        seeds = [first, GroupConfig.of("direct", threads=512, outputs_per_thread=other_opt)]
        space = self.space(group, facts)
        pool = _parse(group)
        reuse = pool.spatial >= 2 and pool.kernel[-2] > 1  # 1-D pooling traces as 2-D with a (1, k) window
        for tile in (
            GroupConfig.of("smem_tile", tile_x=32, tile_y=8),
            GroupConfig.of("smem_tile", tile_x=64, tile_y=4),
        ):
            if reuse and space.reason_invalid(tile) is None:
                seeds.append(tile)
        if len(seeds) < 3:
            seeds.append(GroupConfig.of("direct", threads=128, outputs_per_thread=2))
        return seeds

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"pool: {reason}")
        return _Renderer(group, config, ctx).render()


def _values_vid(group: Group) -> int:
    node = find_node(group, ("max_pool", "avg_pool"))
    return int(node.outputs[0]) if node is not None else int(group.outputs[0])


class _Renderer:
    """The C text of one pool group (a fresh one per render)."""

    def __init__(self, group: Group, config: GroupConfig, ctx: RenderContext) -> None:
        self.group, self.config, self.ctx = group, config, ctx
        self.pool = _parse(group)
        self.p = ctx.prefix
        # PyTorch accumulates float64 in double; the context's compute type may come from the int64 indices.
        self.ct = "double" if ctx.inputs and ctx.inputs[0].ctype == "double" else ctx.compute_type
        node = find_node(group, ("max_pool", "avg_pool"))
        self.src = int(node.inputs[0]) if node is not None else int(group.inputs[0])
        self.out_vid = _values_vid(group)
        outputs = list(group.outputs)
        # Which of the group's outputs are the pooled values and the indices (the planner lists them
        # in its own order; a value nobody reads is not written).
        self.k_val: int | None = outputs.index(self.out_vid) if self.out_vid in outputs else None
        self.k_idx: int | None = None
        if self.pool.indices:
            if node is not None and len(node.outputs) > 1:
                self.k_idx = outputs.index(node.outputs[1]) if node.outputs[1] in outputs else None
            elif len(outputs) > 1:
                self.k_idx = 1
            if self.k_idx is None:
                raise TemplateError("pool: spec asks for indices but the group has no indices output")
        if self.k_val is None and self.k_idx is None:
            raise TemplateError("pool: the group writes neither the pooled values nor the indices")
        self.ndim = group.graph.type(self.src).ndim
        if self.ndim not in (self.pool.spatial + 1, self.pool.spatial + 2):
            raise TemplateError(f"pool: input rank {self.ndim} for {self.pool.spatial}-D pooling")
        if self.pool.op == "avg_pool" and self.ct not in ("float", "double"):
            raise TemplateError(f"pool: average pooling computes in float or double, not {self.ct}")
        self.n_in, self.n_out = io_counts(group)
        self.used = UsedDescriptors()  # the descriptors the device code names, set by render()
        self.dctx = device_context(ctx, self.ct)  # loads and stores in device code

    # -- window code shared by the variants ------------------------------------------------------

    def lowest(self) -> str:
        if self.ct == "float":
            return "__int_as_float(0xff800000)"
        if self.ct == "double":
            return "__longlong_as_double(0xfff0000000000000ULL)"
        if self.ct == "int64_t":
            return "((int64_t)(-9223372036854775807LL - 1))"
        if self.ct == "bool":
            return "false"
        raise TemplateError(f"pool: no lowest value for compute type {self.ct}")

    def window(
        self,
        st: str,
        out: dict[str, str],
        size: dict[str, str],
        fetch: Callable[[dict[str, str], dict[str, str]], str],
        value: str,
        index: str,
        indent: str,
        fast_fetch: Callable[[dict[str, str], dict[str, str]], str] | None = None,
        row_setup: Callable[[dict[str, str]], list[str]] | None = None,
    ) -> list[str]:
        """Statements computing one output into ``value`` (and ``index`` when indices are written).

        ``out[a]`` is the output coordinate along axis ``a``, ``size[a]`` the input size (both of
        signed type ``st``); ``fetch(k, g)`` is the element at window offsets ``k`` (loop variables)
        and input coordinates ``g``. A window entirely inside the input takes a second copy of the
        loops without per-element bounds checks, reading through ``fast_fetch`` (default ``fetch``)
        after the statements ``row_setup(g)`` emits before the innermost loop (a row base address).
        """
        pool, ct = self.pool, self.ct
        axes = pool.axes
        full = _prod(pool.kernel) <= FULL_UNROLL_WINDOW
        lines = [
            f"const {st} s_{a} = ({st})({out[a]}) * {pool.stride[i]} - {pool.padding[i]};" for i, a in enumerate(axes)
        ]

        def pos(g: dict[str, str]) -> str:
            expr = g[axes[0]]
            for a in axes[1:]:
                expr = f"({expr}) * {size[a]} + {g[a]}"
            return expr

        k = {a: f"k_{a}" for a in axes}
        g = {a: f"g_{a}" for a in axes}

        def body(get: Callable[[dict[str, str], dict[str, str]], str]) -> list[str]:
            if pool.op == "avg_pool":
                return [f"sum += {get(k, g)};"]
            if self.k_idx is None:
                return [f"const {ct} v = {get(k, g)};", "if (v > best || v != v) best = v;"]
            return [
                f"const {ct} v = {get(k, g)};",
                f"if (v > best || v != v) {{ best = v; bidx = {pos(g)}; }}",
                f"else if (bidx < 0) {{ bidx = {pos(g)}; }}",
            ]

        def nest(checked: bool, get: Callable[[dict[str, str], dict[str, str]], str]) -> list[str]:
            loops: list[str] = []
            depth = 1
            for i, a in enumerate(axes):
                pad = "  " * depth
                innermost = i == len(axes) - 1
                if innermost and not checked and row_setup is not None:
                    loops += [pad + line for line in row_setup(g)]
                if full or (innermost and pool.kernel[i] <= 16):
                    loops.append(f"{pad}#pragma unroll")
                loops.append(f"{pad}for (int {k[a]} = 0; {k[a]} < {pool.kernel[i]}; ++{k[a]}) {{")
                loops.append(f"{pad}  const {st} {g[a]} = s_{a} + {k[a]} * {pool.dilation[i]};")
                if checked:
                    loops.append(f"{pad}  if ({g[a]} >= 0 && {g[a]} < {size[a]}) {{")
                    depth += 1
                depth += 1
            loops += ["  " * depth + line for line in body(get)]
            for _ in axes:
                if checked:
                    depth -= 1
                    loops.append("  " * depth + "}")
                depth -= 1
                loops.append("  " * depth + "}")
            return loops

        if pool.op == "max_pool":
            lines.append(f"{ct} best = {self.lowest()};")
            if self.k_idx is not None:
                lines.append(f"{st} bidx = -1;")
        else:
            lines.append(f"{ct} sum = ({ct})0;")
        inside = " && ".join(f"s_{a} >= 0 && s_{a} + {pool.extent(i) - 1} < {size[a]}" for i, a in enumerate(axes))
        lines.append(f"if ({inside}) {{  // the whole window is inside the input: no per-element checks")
        lines += nest(False, fast_fetch or fetch)
        lines.append("} else {")
        lines += nest(True, fetch)
        lines.append("}")
        if pool.op == "max_pool":
            lines.append(f"{value} = best;")
            if self.k_idx is not None:
                first = {}
                for i, a in enumerate(axes):
                    d = pool.dilation[i]
                    first[a] = f"(s_{a} < 0 ? s_{a} + ((-s_{a} + {d - 1}) / {d}) * {d} : s_{a})"
                lines.append(f"if (bidx < 0) bidx = {pos(first)};  // empty window: PyTorch's first index")
                lines.append(f"{index} = (int64_t)bidx;")
        else:
            for i, a in enumerate(axes):
                kk, pp = pool.kernel[i], pool.padding[i]
                lines.append(f"const {st} e_{a} = s_{a} + {kk} < {size[a]} + {pp} ? s_{a} + {kk} : {size[a]} + {pp};")
                lines.append(f"const {st} c_{a} = (e_{a} < {size[a]} ? e_{a} : {size[a]}) - (s_{a} > 0 ? s_{a} : 0);")
            if pool.divisor is not None:
                divisor = f"({st}){pool.divisor}"
            elif pool.include_pad:
                divisor = " * ".join(f"(e_{a} - s_{a})" for a in axes)
            else:
                divisor = " * ".join(f"c_{a}" for a in axes)
            empty = " || ".join(f"c_{a} <= 0" for a in axes)
            lines.append(f"{value} = ({empty}) ? ({ct})0 : sum / ({ct})({divisor});")
        return [indent + line for line in lines]

    def stores(self, q: str, value: str, index: str) -> list[str]:
        out = []
        if self.k_val is not None:
            out.append(self.dctx.store(self.k_val, q, value))
        if self.k_idx is not None:
            out.append(self.dctx.store(self.k_idx, q, index))
        return out

    # -- direct ---------------------------------------------------------------------------------

    def direct_kernel(self, threads: int, opt: int) -> str:
        p, ct, sp = self.p, self.ct, self.pool.spatial
        axes = self.pool.axes
        decode = ["U r = q;"]
        for i in range(sp - 1, -1, -1):
            a = axes[i]
            decode += [
                f"const U n_{a} = A.o[{i}].div(r);",
                f"const U o_{a} = r - n_{a} * A.o[{i}].d;",
                f"r = n_{a};",
            ]
        decode.append("const U plane = r;")
        size = {a: f"I_{a}" for a in axes}
        sizes = [f"const S I_{a} = (S)A.isz[{i}];" for i, a in enumerate(axes)]

        def fetch(k: dict[str, str], g: dict[str, str]) -> str:
            expr = g[axes[0]]
            for a in axes[1:]:
                expr = f"({expr}) * I_{a} + {g[a]}"
            return self.dctx.load(0, f"(int64_t)(ibase + (U)({expr}))")

        def row_setup(g: dict[str, str]) -> list[str]:
            row = dict(g)
            row[axes[-1]] = f"s_{axes[-1]}"
            expr = row[axes[0]]
            for a in axes[1:]:
                expr = f"({expr}) * I_{a} + {row[a]}"
            return [f"const int64_t rb = (int64_t)ibase + (int64_t)({expr});"]

        def fast_fetch(k: dict[str, str], g: dict[str, str]) -> str:
            return self.dctx.load(0, f"rb + {k[axes[-1]]} * {self.pool.dilation[-1]}")

        window = self.window(
            "S", {a: f"o_{a}" for a in axes}, size, fetch, "val[j]", "idx[j]", "        ", fast_fetch, row_setup
        )
        ind = "        "
        arrays = [f"{ct} val[{opt}];"]
        if self.k_idx is not None:
            arrays.append(f"int64_t idx[{opt}];")
        q = "(int64_t)(base + (U)(j * T) + threadIdx.x)"
        store = "\n".join(ind + "  " + s for s in self.stores(q, "val[j]", "idx[j]"))
        return f"""\
// direct: thread t of a block computes outputs base + j*{threads} + t, j < {opt} (row-major order).
template <typename U> struct {p}_dargs {{
  U total, in_plane;
  {p}_fdiv<U> o[{sp}];  // output spatial sizes, outermost first
  U isz[{sp}];          // input spatial sizes
}};
template <typename U, typename S>
__global__ void __launch_bounds__({threads}) {p}_direct(const {p}_io args, const {p}_dargs<U> A) {{
{io_bind(self.ctx)}  constexpr int T = {threads};
{"".join("  " + s + chr(10) for s in sizes)}  const U tile = (U)(T * {opt});
  for (U base = (U)blockIdx.x * tile; base < A.total; base += (U)gridDim.x * tile) {{
    {" ".join(arrays)}
#pragma unroll
    for (int j = 0; j < {opt}; ++j) {{
      const U q = base + (U)(j * T) + threadIdx.x;
      if (q < A.total) {{
{chr(10).join(ind + s for s in decode)}
        const U ibase = plane * A.in_plane;
{chr(10).join(window)}
      }}
    }}
#pragma unroll
    for (int j = 0; j < {opt}; ++j) {{
      if (base + (U)(j * T) + threadIdx.x < A.total) {{
{store}
      }}
    }}
  }}
}}
"""

    def direct_launcher(self, threads: int, opt: int) -> str:
        p, sp = self.p, self.pool.spatial
        return f"""\
template <typename U, typename S>
static int {p}_run_direct(int64_t planes, const int64_t* isz, const int64_t* osz, const {p}_io& args,
                          cudaStream_t stream) {{
  {p}_dargs<U> A;
  int64_t in_plane = 1, total = planes;
  for (int i = 0; i < {sp}; ++i) {{
    in_plane *= isz[i];
    total *= osz[i];
    {p}_fdiv_init(A.o[i], (uint64_t)osz[i]);
    A.isz[i] = (U)isz[i];
  }}
  A.total = (U)total;
  A.in_plane = (U)in_plane;
  int64_t blocks = (total + {threads * opt - 1}) / {threads * opt};
  if (blocks > 2147483647) blocks = 2147483647;
  {p}_direct<U, S><<<(unsigned)blocks, {threads}, 0, stream>>>(args, A);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
static int {p}_launch(int64_t planes, const int64_t* isz, const int64_t* osz, const {p}_io& args,
                      cudaStream_t stream) {{
  int64_t in_total = planes, out_total = planes;
  for (int i = 0; i < {sp}; ++i) {{
    in_total *= isz[i];
    out_total *= osz[i];
  }}
  if (in_total < 2147483648LL && out_total < 2147483648LL)
    return {p}_run_direct<uint32_t, int>(planes, isz, osz, args, stream);
  return {p}_run_direct<uint64_t, int64_t>(planes, isz, osz, args, stream);
}}
"""

    # -- smem_tile ------------------------------------------------------------------------------

    def tile_kernel(self, tile_x: int, tile_y: int) -> tuple[str, int]:
        p, ct, pool = self.p, self.ct, self.pool
        sp = pool.spatial
        rows, threads = _tile_threads(tile_x, tile_y)
        hz, hy, hx = _halo(pool, tile_x, tile_y)
        halo = hz * hy * hx
        smem = halo * (8 if ct in ("double", "int64_t") else 4)
        axes = pool.axes
        yx = axes[-2:]
        size = {a: f"I_{a}" for a in axes}
        out = {yx[0]: "oh", yx[1]: "ow"}
        if sp == 3:
            out["d"] = "od"
        sh, sw = pool.stride[-2], pool.stride[-1]

        def fetch(k: dict[str, str], g: dict[str, str]) -> str:
            z = f"{k['d']} * {pool.dilation[0]}" if sp == 3 else "0"
            y = f"ly * {sh} + {k[yx[0]]} * {pool.dilation[-2]}"
            x = f"tx * {sw} + {k[yx[1]]} * {pool.dilation[-1]}"
            return f"sm[(({z}) * {hy} + {y}) * {hx} + {x}]"

        window = self.window("int64_t", out, size, fetch, "val", "idx", "        ")
        sizes = "".join(f"  const int64_t I_{a} = A.isz[{i}];\n" for i, a in enumerate(axes))
        if sp == 3:
            depth_decode = (
                "    next = A.od.div(r);\n    const int64_t od = (int64_t)(r - next * A.od.d);\n    r = next;\n"
            )
            z0 = f"    const int64_t z0 = od * {pool.stride[0]} - {pool.padding[0]};\n"
            gz_check = "gz >= 0 && gz < I_d && "
            row_base = "(gz * I_h + gy) * I_w + gx"
            q = "((int64_t)plane * A.osz[0] + od) * A.osz[1] * A.osz[2] + oh * A.osz[2] + ow"
            ohw = ("A.osz[1]", "A.osz[2]")
        else:
            depth_decode = ""
            z0 = "    const int64_t z0 = 0;\n"
            gz_check = ""
            row_base = "gy * I_w + gx" if sp == 2 else "gx"
            q = "(int64_t)plane * A.osz[0] * A.osz[1] + oh * A.osz[1] + ow"
            ohw = ("A.osz[0]", "A.osz[1]")
        store = "\n".join("          " + s for s in self.stores(f"(int64_t)({q})", "val", "idx"))
        idx_decl = "int64_t idx;" if self.k_idx is not None else ""
        code = f"""\
// smem_tile: a block computes a {tile_y}x{tile_x} output tile of one plane{" and output depth" if sp == 3 else ""},
// staging its {hz}x{hy}x{hx} input halo in shared memory ({smem} B) with coalesced row reads.
struct {p}_targs {{
  int64_t in_plane;
  int64_t isz[{sp}], osz[{sp}];
  {p}_fdiv<uint32_t> tiles_x, tiles_y, od;
  uint32_t nblocks;
}};
__global__ void __launch_bounds__({threads}) {p}_tile(const {p}_io args, const {p}_targs A) {{
{io_bind(self.ctx)}  extern __shared__ __align__(16) unsigned char {p}_smem[];
  {ct}* sm = reinterpret_cast<{ct}*>({p}_smem);
{sizes}  const int tx = (int)threadIdx.x % {tile_x}, ty = (int)threadIdx.x / {tile_x};
  for (uint32_t blk = blockIdx.x; blk < A.nblocks; blk += gridDim.x) {{
    uint32_t r = blk;
    uint32_t next = A.tiles_x.div(r);
    const int64_t ow0 = (int64_t)(r - next * A.tiles_x.d) * {tile_x};
    r = next;
    next = A.tiles_y.div(r);
    const int64_t oh0 = (int64_t)(r - next * A.tiles_y.d) * {tile_y};
    r = next;
{depth_decode}    const uint32_t plane = r;
{z0}    const int64_t y0 = oh0 * {sh} - {pool.padding[-2]};
    const int64_t x0 = ow0 * {sw} - {pool.padding[-1]};
    const int64_t ibase = (int64_t)plane * A.in_plane;
    __syncthreads();  // the previous tile's readers are done
    for (int e = threadIdx.x; e < {halo}; e += {threads}) {{
      const int z = e / {hy * hx}, y = (e - z * {hy * hx}) / {hx}, x = e - z * {hy * hx} - y * {hx};
      const int64_t gz = z0 + z, gy = y0 + y, gx = x0 + x;
      (void)gz;
      {ct} v = ({ct})0;
      if ({gz_check}gy >= 0 && gy < {"I_" + yx[0] if sp >= 2 else "1"} && gx >= 0 && gx < I_{yx[1]})
        v = {self.dctx.load(0, f"ibase + {row_base}")};
      sm[e] = v;
    }}
    __syncthreads();
#pragma unroll
    for (int jj = 0; jj < {tile_y // rows}; ++jj) {{
      const int ly = ty + jj * {rows};
      const int64_t oh = oh0 + ly, ow = ow0 + tx;
      if (oh < {ohw[0]} && ow < {ohw[1]}) {{
        {ct} val; {idx_decl}
{chr(10).join(window)}
{store}
      }}
    }}
  }}
}}
"""
        return code, smem

    def tile_launcher(self, tile_x: int, tile_y: int, smem: int) -> str:
        p, sp = self.p, self.pool.spatial
        _, threads = _tile_threads(tile_x, tile_y)
        opt_in = ""
        if smem > STATIC_SMEM_LIMIT:
            opt_in = f"""\
  static bool opted_in = false;
  if (!opted_in) {{
    const cudaError_t e = cudaFuncSetAttribute({p}_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});
    if (e != cudaSuccess) return (int)e;
    opted_in = true;
  }}
"""
        od = "osz[0]" if sp == 3 else "1"
        return f"""\
static int {p}_launch(int64_t planes, const int64_t* isz, const int64_t* osz, const {p}_io& args,
                      cudaStream_t stream) {{
  {p}_targs A;
  A.in_plane = 1;
  for (int i = 0; i < {sp}; ++i) {{
    A.in_plane *= isz[i];
    A.isz[i] = isz[i];
    A.osz[i] = osz[i];
  }}
  const int64_t tiles_x = (osz[{sp - 1}] + {tile_x - 1}) / {tile_x};
  const int64_t tiles_y = (osz[{sp - 2}] + {tile_y - 1}) / {tile_y};
  const int64_t nblocks = planes * {od} * tiles_x * tiles_y;
  if (nblocks >= 2147483647) return -4;  // more tiles than 32-bit block indices address
  {p}_fdiv_init(A.tiles_x, (uint64_t)tiles_x);
  {p}_fdiv_init(A.tiles_y, (uint64_t)tiles_y);
  {p}_fdiv_init(A.od, (uint64_t){od});
  A.nblocks = (uint32_t)nblocks;
{opt_in}  {p}_tile<<<(unsigned)nblocks, {threads}, {smem}, stream>>>(args, A);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""

    # -- host ------------------------------------------------------------------------------------

    def host(self) -> str:
        p, pool = self.p, self.pool
        sp, lead = pool.spatial, self.ndim - pool.spatial
        planes = " * ".join(f"(int64_t)({self.ctx.dim(self.src, d)})" for d in range(lead))
        isz = ", ".join(f"(int64_t)({self.ctx.dim(self.src, lead + i)})" for i in range(sp))
        osz = ", ".join(f"(int64_t)({self.ctx.dim(self.out_vid, lead + i)})" for i in range(sp))
        lines = [
            f"{{  // {p}: {pool.op} {sp}-D kernel={pool.kernel} stride={pool.stride} padding={pool.padding} "
            f"dilation={pool.dilation} ceil_mode={int(pool.ceil_mode)} {self.config.label()}",
            *io_fill_host(p, (self.n_in, self.n_out), self.used, self.ctx),
            f"  const int64_t {p}_planes = {planes};",
            f"  const int64_t {p}_isz[{sp}] = {{{isz}}};",
            f"  const int64_t {p}_osz[{sp}] = {{{osz}}};",
        ]
        for i in range(sp):
            k, s, pad, d = pool.kernel[i], pool.stride[i], pool.padding[i], pool.dilation[i]
            expected = f"{p}_out_size({p}_isz[{i}], {k}, {s}, {pad}, {d}, {int(pool.ceil_mode)})"
            lines.append(f"  if ({p}_osz[{i}] != {expected}) return -3;")
        lines += [
            f"  int64_t {p}_total = {p}_planes;",
            f"  for (int {p}_i = 0; {p}_i < {sp}; ++{p}_i) {p}_total *= {p}_osz[{p}_i];",
            f"  if ({p}_total > 0) {{",
            f"    const int {p}_err = {p}_launch({p}_planes, {p}_isz, {p}_osz, {p}_args, stream);",
            f"    if ({p}_err != 0) return {p}_err;",
            "  }",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def render(self) -> KernelCode:
        p, pool, config = self.p, self.pool, self.config
        if config.variant == "direct":
            threads, opt = int(config.get("threads")), int(config.get("outputs_per_thread"))
            kernel, launcher = self.direct_kernel(threads, opt), self.direct_launcher(threads, opt)
        else:
            tile_x, tile_y = int(config.get("tile_x")), int(config.get("tile_y"))
            kernel, smem = self.tile_kernel(tile_x, tile_y)
            launcher = self.tile_launcher(tile_x, tile_y, smem)
        kernel, self.used = compact_descriptors(kernel)
        device = [
            f"// ---- {p}: {pool.op} {pool.spatial}-D {config.label()} ----",
            io_struct_code(p, self.used, self.ctx),
            fast_div_code(p),
            f"""\
// PyTorch's pooling output size (pooling_output_shape): floor or ceil division, and in ceil mode
// the last window must start inside the input or the left padding.
static int64_t {p}_out_size(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d, int ceil_mode) {{
  const int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}}
""",
            kernel,
            launcher,
        ]
        return KernelCode(device="\n".join(device), host=self.host())


def _prod(values: tuple[int, ...]) -> int:
    out = 1
    for v in values:
        out *= v
    return out
