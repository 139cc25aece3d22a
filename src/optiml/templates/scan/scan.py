"""Scan template: inclusive / exclusive, forward / reverse cumsum and cumprod along one dim.

The scanned tensor (contiguous) is viewed as ``[outer, L, inner]``: ``L`` is the scanned dim's
size, ``outer`` the product of the dims before it, ``inner`` the product of the dims after it.
All three are computed at run time in the host code from the ABI shapes.

Variants (structural choices):

* ``row_block`` (inner == 1): one block per row (grid-stride over rows); the row is scanned in
  chunks of ``threads * items`` elements. A chunk is loaded coalesced into shared memory (padded
  one slot per 32, so the blocked reads are conflict-free), each thread scans its ``items``
  consecutive elements in registers, a ``__shfl_up_sync`` scan combines thread totals within a
  warp, a shared-memory scan combines warp totals, and a running carry links the chunks.
* ``row_warp`` (inner == 1, many short rows): the same with one warp per row, no block barriers.
* ``row_split`` (few long rows): reduce-then-scan over tiles of ``threads * items`` elements:
  kernel 1 writes each tile's total to the workspace, kernel 2 scans the tile totals of each line
  (one block per line, exclusive, in place), kernel 3 rescans each tile from its prefix. A line
  that fits in one tile skips kernels 1 and 2. The kernels take strided lines too (inner > 1).
* ``col`` (inner > 1): each thread owns one ``(outer, inner)`` column and walks ``L`` serially,
  ``unroll`` loads in flight; consecutive threads take consecutive inner indices (coalesced).
* ``col_tile`` (inner > 1): a block owns 32 consecutive columns and walks ``L`` in tiles of ``lanes * items``
  positions, ``lanes`` threads a column, each loading ``items`` consecutive positions (a warp: one position
  of 32 columns, coalesced) while the tile before is scanned. The lanes' totals meet in shared memory, each
  lane starts from the carry and the lanes before it, a carry links the tiles: one pass over the data with
  ``lanes`` times the threads of ``col`` (16 384 columns of ``cumsum_dim1`` left ``col`` at 48 % of the DRAM
  floor however deep its unrolling).

One kernel serves every shape set, so the host code dispatches at run time on the ``lines =
outer * inner`` independent scans: fewer lines than SMs, each at least ``SPLIT_MIN_LENGTH``
long, take the split kernels in every variant (``row_split``'s knobs, else ``SPLIT_FALLBACK``;
strided when inner > 1: a thread per column would leave the GPU idle); otherwise inner > 1 takes
the ``col`` or ``col_tile`` kernel (``COL_FALLBACK`` for the row variants) and inner == 1 the variant's own
kernel (``row_split``: the split kernels at any length). The ``col`` fallback is emitted only
when the scanned dim is not the last one (when it is, ``inner`` is 1 at every shape).

Kernels take the operands as typed pointer parameters: the context's pointer expressions are
host expressions (they may name host locals such as workspace offsets), evaluated in the host
code. Elements are read and written through the context's ``load`` / ``store`` applied to those
parameters. When the context carries fused loads or stores (``loaders`` / ``storers``, which may
name other ABI tensors), the kernels also receive a by-value copy of the ABI tensor descriptors
(``<prefix>_io``) and rebind ``inputs``, ``outputs`` and ``workspace`` in device code.

The planner's rule (:meth:`ScanTemplate.default`) on the traced shape: ``inner > 1`` → ``col``;
``rows >= 4 * sm_count`` and ``L <= 1024`` → ``row_warp``; ``rows < sm_count`` and
``L >= 16384`` → ``row_split``; otherwise ``row_block``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    Operand,
    RenderContext,
    Space,
    TemplateError,
    arithmetic_type,
    compute_type,
    to_compute,
)
from optiml.templates.cexpr import arith_type, literal, pointwise
from optiml.templates.descriptors import UsedDescriptors, compact_descriptors
from optiml.templates.group import Group, ScanSpec

ROW_BLOCK_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (128, 256, 512, 1024), "items": (1, 2, 4, 8, 16)}
ROW_WARP_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (128, 256), "items": (1, 2, 4, 8)}
ROW_SPLIT_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (256, 512, 1024), "items": (4, 8, 16)}
COL_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (128, 256, 512), "unroll": (1, 2, 4, 8, 16, 32)}
COL_TILE_KNOBS: dict[str, tuple[Any, ...]] = {"lanes": (4, 8, 16, 32), "items": (1, 2, 4, 8, 16)}
#: Below this many columns (a thread each) a column scan keeps too few loads in flight at unroll 4 (16 384 columns of
#: cumsum_dim1: 48 % of the DRAM floor): its seeds lead with 32 loads a thread.
FEW_COLUMNS = 1 << 18
#: Columns at least this long are tiled (``col_tile``: a tile of 16 lanes x 8 positions) below FEW_COLUMNS.
TILED_COLUMN_LENGTH = 128
COL_FALLBACK = GroupConfig.of("col", threads=256, unroll=4)  # row variants when inner > 1 at run time
SPLIT_FALLBACK = GroupConfig.of("row_split", threads=256, items=4)  # other variants on few long lines
SPLIT_MIN_LENGTH = 16384  # with fewer lines than SMs, lines this long go to the split kernels
SPLIT_SCAN_ITEMS = 4  # elements per thread of kernel 2 (the scan of tile totals)
STATIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory
REGISTER_CHUNK_BYTES = 64 * 1024  # threads * items * sizeof(compute) above this spills (measured, sm_90a)
_SIZEOF = {"float": 4, "double": 8}


def _padded(n: int) -> int:
    """Shared-memory slots for ``n`` staged elements (one pad slot per 32)."""
    return n + n // 32


def _stage_slots(threads: int, items: int) -> int:
    """Slots of a block chunk: staged elements (when items > 1) plus 32 warp totals."""
    return (_padded(threads * items) if items > 1 else 0) + 32


def _threads(config: GroupConfig) -> int:
    """A block's threads: the ``threads`` knob, or ``col_tile``'s 32 columns of ``lanes``."""
    return int(config.get("threads", 32 * int(config.get("lanes", 1))))


def _smem_bytes(config: GroupConfig, ctype: str) -> int:
    """Largest dynamic shared memory one block of ``config``'s kernels uses."""
    size = _SIZEOF.get(ctype, 8)
    threads, items = int(config.get("threads", 0)), int(config.get("items", 1))
    if config.variant == "row_block":
        return _stage_slots(threads, items) * size
    if config.variant == "row_split":
        return max(_stage_slots(threads, items), _stage_slots(threads, SPLIT_SCAN_ITEMS)) * size
    if config.variant == "row_warp":
        return (threads // 32) * _padded(32 * items) * size if items > 1 else 0
    return 0


def _source(group: Group) -> int:
    """The value the group scans: its first node's input (a reverse scan's first node is the flip). It is the
    group's input, or an element-wise prologue of its inputs (all of its shape) recomputed at each load."""
    return group.graph.nodes[group.nodes[0]].inputs[0]


def _geometry(group: Group) -> tuple[int, int, int, int, int]:
    """(ndim, dim, L, outer, inner) of the traced scanned shape."""
    shape = tuple(group.graph.type(_source(group)).shape)
    ndim = len(shape)
    dim = int(group.spec_of(ScanSpec).dim)
    if ndim == 0:
        return 0, 0, 1, 1, 1
    if not -ndim <= dim < ndim:
        raise TemplateError(f"scan dim {dim} out of range for a {ndim}-d tensor")
    dim %= ndim
    outer = 1
    for s in shape[:dim]:
        outer *= s
    inner = 1
    for s in shape[dim + 1 :]:
        inner *= s
    return ndim, dim, shape[dim], outer, inner


def _prod_expr(terms: list[str]) -> str:
    if not terms:
        return "(int64_t)1"
    return "((int64_t)1 * " + " * ".join(f"(int64_t)({t})" for t in terms) + ")"


class ScanTemplate:
    """cumsum / cumprod along one dim (see the module docstring for variants and the rule)."""

    name = "scan"

    # ---- the search space -------------------------------------------------------------------

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        _, _, _, _, inner = _geometry(group)
        dtype = group.graph.type(_source(group)).dtype
        ctype = compute_type(dtype)
        knobs: dict[str, dict[str, tuple[Any, ...]]] = {}
        if inner == 1:
            knobs["row_block"] = dict(ROW_BLOCK_KNOBS)
            knobs["row_warp"] = dict(ROW_WARP_KNOBS)
            knobs["row_split"] = dict(ROW_SPLIT_KNOBS)
        knobs["col"] = dict(COL_KNOBS)
        if inner > 1:
            knobs["col_tile"] = dict(COL_TILE_KNOBS)

        def check(config: GroupConfig) -> str | None:
            need = _smem_bytes(config, ctype)
            if need > facts.smem_per_block_optin:
                return f"{config.label()}: needs {need} B of shared memory, device allows {facts.smem_per_block_optin}"
            threads = _threads(config)
            if threads > 1024 or threads % 32:
                return f"{config.label()}: threads must be a multiple of 32, at most 1024"
            if config.variant in ("row_block", "row_split"):
                # Each thread keeps its items in registers (row_block: twice, with the prefetch);
                # past 64 KiB of values per block, 1024-thread blocks (64 registers each) spill.
                chunk_bytes = threads * int(config.get("items", 1)) * _SIZEOF.get(ctype, 8)
                if chunk_bytes > REGISTER_CHUNK_BYTES:
                    return f"{config.label()}: {chunk_bytes} B of {ctype} per block would spill registers"
            return None

        return Space(knobs=knobs, check=check)

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        """inner > 1 → col; rows >= 4*SMs and L <= 1024 → row_warp; rows < SMs and L >= 16384 →
        row_split; else row_block. Knobs: a chunk covers min(L, threads*items) sensibly."""
        _, _, length, outer, inner = _geometry(group)
        sms = max(1, facts.sm_count)
        if inner > 1:
            columns = outer * inner
            if columns < FEW_COLUMNS and length >= TILED_COLUMN_LENGTH:
                return GroupConfig.of("col_tile", lanes=16, items=8)
            threads = 256 if columns >= sms * 256 else 128
            unroll = 4 if length >= 4 else (2 if length >= 2 else 1)
            return GroupConfig.of("col", threads=threads, unroll=unroll)
        rows = outer
        if rows >= 4 * sms and length <= 1024:
            items = next((i for i in (1, 2, 4) if 32 * i >= length), 8)
            return GroupConfig.of("row_warp", threads=256, items=items)
        if rows < sms and length >= SPLIT_MIN_LENGTH:
            # The largest tile that still gives every SM about two tiles, else the smallest.
            for threads, items in ((1024, 16), (512, 16), (512, 8), (256, 8), (256, 4)):
                tiles = -(-length // (threads * items))
                if rows * tiles >= 2 * sms:
                    return GroupConfig.of("row_split", threads=threads, items=items)
            return GroupConfig.of("row_split", threads=256, items=4)
        if length <= 128:
            return GroupConfig.of("row_block", threads=128, items=1)
        if length <= 512:
            return GroupConfig.of("row_block", threads=128, items=4)
        if length <= 2048:
            return GroupConfig.of("row_block", threads=256, items=8)
        return GroupConfig.of("row_block", threads=512, items=8)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        first = self.default(group, facts)
        _, _, length, outer, inner = _geometry(group)
        if inner > 1:
            deep = GroupConfig.of("col", threads=128, unroll=32 if length >= 32 else 16)
            others = [
                GroupConfig.of("col_tile", lanes=8, items=16),
                GroupConfig.of("col_tile", lanes=32, items=4),
                GroupConfig.of("col", threads=256, unroll=4),
                GroupConfig.of("col", threads=128, unroll=8),
                GroupConfig.of("col", threads=512, unroll=2),
                GroupConfig.of("col", threads=128, unroll=1),
            ]
            others.insert(0 if outer * inner < FEW_COLUMNS else len(others), deep)
            if length < TILED_COLUMN_LENGTH:  # a tile longer than the column: lanes idle
                others = [config for config in others if config.variant == "col"]
        else:
            others = [
                GroupConfig.of("row_block", threads=512, items=8),
                GroupConfig.of("row_block", threads=256, items=4),
                GroupConfig.of("row_warp", threads=256, items=4),
                GroupConfig.of("row_split", threads=512, items=8),
                GroupConfig.of("row_block", threads=1024, items=16),
            ]
        space = self.space(group, facts)
        seeds = [first]
        for config in others:
            if len(seeds) >= 5:
                break
            if config not in seeds and space.reason_invalid(config) is None:
                seeds.append(config)
        return seeds

    # ---- rendering ----------------------------------------------------------------------------

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        knobs = {"row_block": ROW_BLOCK_KNOBS, "row_warp": ROW_WARP_KNOBS, "row_split": ROW_SPLIT_KNOBS}
        knobs["col"] = COL_KNOBS
        knobs["col_tile"] = COL_TILE_KNOBS
        if config.variant not in knobs:
            raise TemplateError(f"scan: unknown variant {config.variant!r}")
        for key, allowed in knobs[config.variant].items():
            if config.get(key) not in allowed:
                raise TemplateError(f"scan {config.label()}: {key} must be one of {list(allowed)}")
        kind = str(group.spec_of(ScanSpec).kind)
        if kind not in ("sum", "prod"):
            raise TemplateError(f"scan: unknown kind {kind!r} (sum or prod)")
        return _Renderer(group, config, ctx, kind).render()


class _Renderer:
    """Builds the C text of one scan group (a fresh one per render: no state between renders)."""

    def __init__(self, group: Group, config: GroupConfig, ctx: RenderContext, kind: str) -> None:
        self.source = _source(group)
        if self.source not in group.inputs:
            ctx = replace(
                ctx, compute_type=arithmetic_type(group.graph.type(self.source).dtype), loaders=[self.prologue]
            )
        self.group, self.config, self.ctx = group, config, ctx
        self.P = ctx.prefix
        self.T = ctx.compute_type
        self.reverse = bool(group.spec_of(ScanSpec).reverse)
        self.exclusive = bool(group.spec_of(ScanSpec).exclusive)
        self.op = "+" if kind == "sum" else "*"
        self.ident = f"(({self.T}){0 if kind == 'sum' else 1})"
        self.ndim, self.dim, _, _, _ = _geometry(group)
        self.kind = kind
        if not ctx.inputs or not ctx.outputs:
            raise TemplateError("scan: needs one input and one output operand")
        self.in_ctype = ctx.inputs[0].ctype
        self.out_ctype = ctx.outputs[0].ctype
        # Kernels take the operands as typed pointer parameters (`src`, `dst`): the context's
        # pointer expressions are host expressions, evaluated in the host code. Fused loads and
        # stores (ctx.loaders / ctx.storers) may name other ABI tensors, so those kernels also get
        # the ABI descriptors by value and rebind `inputs`, `outputs`, `workspace`.
        self.use_io = ctx.loaders is not None or ctx.storers is not None
        self.dev = replace(
            ctx,
            inputs=[Operand("src", self.in_ctype), *ctx.inputs[1:]],
            outputs=[Operand("dst", self.out_ctype), *ctx.outputs[1:]],
        )
        self.kparams = f"const {self.in_ctype}* __restrict__ src, {self.out_ctype}* __restrict__ dst"
        self.hargs = f"{self.P}_src, {self.P}_dst"
        if self.use_io:
            self.kparams += f", const {self.P}_io args"
            self.hargs += f", {self.P}_args"

    # -- small pieces --------------------------------------------------------------------------

    def sub(self, text: str, **extra: Any) -> str:
        values = {"P": self.P, "T": self.T, "ID": self.ident, "OP": self.op, "KP": self.kparams}
        values.update({k: str(v) for k, v in extra.items()})
        return text.format_map(values)

    def load(self, idx: str) -> str:
        return self.dev.load(0, idx)

    def prologue(self, idx: str) -> str:
        """The scanned value at linear index ``idx``, computed from the group's inputs there (the planner
        fuses an element-wise prologue only over inputs of the scanned shape: one index serves them all)."""
        g = self.group.graph

        def expr(vid: int) -> str:
            value = g.value(vid)
            ctype = arith_type(value.type.dtype)
            if value.is_const:
                return literal(value.const, ctype)  # type: ignore[arg-type]
            if vid in self.group.inputs:
                k = self.group.inputs.index(vid)
                return to_compute(f"{'src' if k == 0 else self.ctx.inputs[k].ptr}[{idx}]", value.type.dtype)
            producer = g.producer(vid)
            if producer is None:
                raise TemplateError(f"internal: scan prologue value {vid} is neither computed nor read")
            types = [arith_type(g.type(i).dtype) for i in producer.inputs]
            return pointwise(producer, [expr(i) for i in producer.inputs], types, ctype)

        return f"(({self.T})({expr(self.source)}))"

    def store(self, idx: str, value: str) -> str:
        return self.dev.store(0, idx, value)

    def phys(self, p: str, length: str = "L") -> str:
        """Offset within the row of logical (scan-order) position ``p``."""
        return f"({length} - 1 - {p})" if self.reverse else p

    def step(self, x: str, idx: str, acc: str = "acc") -> str:
        """Combine element ``x`` into ``acc`` and write the output at ``idx``."""
        combine = f"{acc} = {self.P}_op({acc}, {x});"
        if self.exclusive:
            return f"{self.store(idx, acc)} {combine}"
        return f"{combine} {self.store(idx, acc)}"

    def bind(self) -> str:
        if not self.use_io:
            return ""
        return (
            "  [[maybe_unused]] const optiml_tensor* inputs = args.in;\n"
            "  [[maybe_unused]] const optiml_tensor* outputs = args.out;\n"
            "  [[maybe_unused]] void* workspace = args.ws;\n"
        )

    # -- common device code --------------------------------------------------------------------

    def preamble(self, used: UsedDescriptors, block_scan: bool) -> str:
        text = _PREAMBLE + (_IO_STRUCT if self.use_io else "")
        if block_scan:
            text += _BLOCK_SCAN
        return self.sub(
            text,
            NI=used.input_slots,
            NO=used.output_slots,
            KIND=self.kind,
            REV=int(self.reverse),
            EXCL=int(self.exclusive),
            LABEL=self.config.label(),
        )

    def fetch(self, nt: int, it: int, tid: str, start: str, n: str, load: str) -> str:
        """Coalesced loads of the chunk at ``start`` into ``nx[it]`` (striped: ``nx[k]`` is position
        ``start + k*nt + tid``); ``load`` is the C expression of logical position ``p`` (identity
        past ``n``)."""
        return (
            "#pragma unroll\n"
            f"    for (int k = 0; k < {it}; ++k) {{\n"
            f"      const int64_t p = {start} + k * {nt} + {tid};\n"
            f"      nx[k] = (p < {n}) ? {load} : {self.ident};\n"
            "    }\n"
        )

    def stage(self, nt: int, it: int, tid: str, sync: str, s: str = "s") -> str:
        """Striped ``nx[it]`` to blocked ``v[it]`` (thread ``tid`` gets positions ``tid*it + k``)
        through shared memory padded one slot per 32 (conflict-free both ways)."""
        if it == 1:
            return "    v[0] = nx[0];\n"
        return (
            "#pragma unroll\n"
            f"    for (int k = 0; k < {it}; ++k) {{ const int e = k * {nt} + {tid}; {s}[e + (e >> 5)] = nx[k]; }}\n"
            f"    {sync}\n"
            "#pragma unroll\n"
            f"    for (int k = 0; k < {it}; ++k) {{ const int e = {tid} * {it} + k; v[k] = {s}[e + (e >> 5)]; }}\n"
        )

    def load_chunk(self, nt: int, it: int, tid: str, sync: str, n: str, load: str, s: str = "s") -> str:
        """Fill blocked ``v[it]`` with the chunk at ``c0``."""
        return f"    {self.T} nx[{it}];\n" + self.fetch(nt, it, tid, "c0", n, load) + self.stage(nt, it, tid, sync, s)

    def store_chunk(self, nt: int, it: int, tid: str, sync: str, n: str, store: str, s: str = "s") -> str:
        """Write ``v[it]`` back (``store`` is a C statement over position ``p`` and value ``val``)."""
        if it == 1:
            return f"    {{ const int64_t p = c0 + {tid}; const {self.T} val = v[0]; if (p < {n}) {{ {store} }} }}\n"
        return (
            "#pragma unroll\n"
            f"    for (int k = 0; k < {it}; ++k) {{ const int e = {tid} * {it} + k; {s}[e + (e >> 5)] = v[k]; }}\n"
            f"    {sync}\n"
            "#pragma unroll\n"
            f"    for (int k = 0; k < {it}; ++k) {{\n"
            f"      const int e = k * {nt} + {tid};\n"
            "      const int64_t p = c0 + e;\n"
            f"      const {self.T} val = {s}[e + (e >> 5)];\n"
            f"      if (p < {n}) {{ {store} }}\n"
            "    }\n"
        )

    def row_load(self, strided: bool = False) -> str:
        offset = f"{self.phys('p')} * inner" if strided else self.phys("p")
        return self.load(f"(base + {offset})")

    def row_store(self, strided: bool = False) -> str:
        offset = f"{self.phys('p')} * inner" if strided else self.phys("p")
        return self.store(f"(base + {offset})", "val")

    # -- kernels -------------------------------------------------------------------------------

    def row_block_kernel(self, nt: int, it: int) -> str:
        tid = "(int)threadIdx.x"
        excl = str(self.exclusive).lower()
        body = (
            self.stage(nt, it, tid, "__syncthreads();")
            + "    // Prefetch the next chunk: its loads are in flight while this one is scanned.\n"
            + self.fetch(nt, it, tid, f"(c0 + {nt * it})", "L", self.row_load())
            + f"    const {self.T} total = {self.P}_block_scan<{nt}, {it}, {excl}>(v, carry, wsm);\n"
            + self.store_chunk(nt, it, tid, "__syncthreads();", "L", self.row_store())
        )
        return self.sub(
            _ROW_BLOCK,
            NT=nt,
            IT=it,
            CHUNK=nt * it,
            SPAD=_padded(nt * it) if it > 1 else 0,
            BIND=self.bind(),
            FIRST=self.fetch(nt, it, tid, "(int64_t)0", "L", self.row_load()),
            BODY=body,
        )

    def row_warp_kernel(self, nt: int, it: int) -> str:
        body = self.load_chunk(32, it, "lane", "__syncwarp();", "L", self.row_load())
        body += self.sub(_WARP_SCAN, IT=it, EXCL=int(self.exclusive))
        body += self.store_chunk(32, it, "lane", "__syncwarp();", "L", self.row_store())
        staged = it > 1
        smem = (
            f"  extern __shared__ __align__(16) unsigned char {self.P}_smem[];\n"
            f"  {self.T}* s = reinterpret_cast<{self.T}*>({self.P}_smem) + (threadIdx.x >> 5) * {_padded(32 * it)};\n"
            if staged
            else ""
        )
        return self.sub(
            _ROW_WARP,
            NT=nt,
            NW=nt // 32,
            IT=it,
            CHUNK=32 * it,
            BIND=self.bind(),
            SMEM=smem,
            BODY=body,
            END="      __syncwarp();\n" if staged else "",
        )

    def split_kernels(self, nt: int, it: int) -> str:
        tid = "(int)threadIdx.x"
        reduce_loads = self.fetch(nt, it, tid, "c0", "L", self.row_load(strided=True))
        k2 = SPLIT_SCAN_ITEMS
        tiles_body = (
            self.load_chunk(nt, k2, tid, "__syncthreads();", "ntiles", "t[p]")
            + f"    const {self.T} total = {self.P}_block_scan<{nt}, {k2}, true>(v, carry, wsm);\n"
            + self.store_chunk(nt, k2, tid, "__syncthreads();", "ntiles", "t[p] = val;")
        )
        scan_body = (
            self.load_chunk(nt, it, tid, "__syncthreads();", "L", self.row_load(strided=True))
            + f"    (void){self.P}_block_scan<{nt}, {it}, {str(self.exclusive).lower()}>(v, carry, wsm);\n"
            + self.store_chunk(nt, it, tid, "__syncthreads();", "L", self.row_store(strided=True))
        )
        return self.sub(
            _ROW_SPLIT,
            NT=nt,
            NW=nt // 32,
            IT=it,
            K2=k2,
            CHUNK=nt * it,
            K2CHUNK=nt * k2,
            SPAD=_padded(nt * it) if it > 1 else 0,
            K2SPAD=_padded(nt * k2),
            BIND=self.bind(),
            REDUCE_LOADS=reduce_loads,
            TILES_BODY=tiles_body,
            SCAN_BODY=scan_body,
        )

    def col_kernel(self, nt: int, unroll: int) -> str:
        start = "base + (L - 1) * inner" if self.reverse else "base"
        stride = "-inner" if self.reverse else "inner"
        main = (
            f"    for (; j + {unroll} <= L; j += {unroll}, gi += {unroll} * ds) {{\n"
            f"      {self.T} v[{unroll}];\n"
            "#pragma unroll\n"
            f"      for (int u = 0; u < {unroll}; ++u) v[u] = {self.load('(gi + u * ds)')};\n"
            "#pragma unroll\n"
            f"      for (int u = 0; u < {unroll}; ++u) {{ {self.step('v[u]', '(gi + u * ds)')} }}\n"
            "    }\n"
        )
        tail = (
            f"    for (; j < L; ++j, gi += ds) {{ const {self.T} x = {self.load('gi')}; {self.step('x', 'gi')} }}\n"
            if unroll > 1
            else ""
        )
        return self.sub(_COL, NT=nt, BIND=self.bind(), START=start, STRIDE=stride, MAIN=main, TAIL=tail)

    def col_tile_kernel(self, lanes: int, it: int) -> str:
        at = f"(base + {self.phys('p')} * inner)"

        def loads(t0: str) -> str:
            return (
                "#pragma unroll\n"
                f"      for (int k = 0; k < {it}; ++k) {{\n"
                f"        const int64_t p = {t0} + lane * {it} + k;\n"
                f"        nx[k] = (active && p < L) ? {self.load(at)} : {self.ident};\n"
                "      }\n"
            )

        step = self.step("v[k]", at)
        return self.sub(
            _COL_TILE,
            NT=32 * lanes,
            LANES=lanes,
            IT=it,
            TILE=lanes * it,
            BIND=self.bind(),
            FIRST=loads("(int64_t)0"),
            NEXT=loads(f"(t0 + {lanes * it})"),
            STEP=step,
        )

    # -- host code -----------------------------------------------------------------------------

    def host_col(self, nt: int) -> str:
        return (
            f"    {self.P}_col<<<{self.P}_grid(optiml_cdiv({self.P}_outer * {self.P}_inner, {nt})), {nt}, 0, stream>>>"
            f"({self.hargs}, {self.P}_outer * {self.P}_inner, {self.P}_L, {self.P}_inner);\n"
        )

    def host_col_tile(self, lanes: int) -> str:
        return (
            f"    {self.P}_col_tile<<<{self.P}_grid(optiml_cdiv({self.P}_lines, 32)), {32 * lanes}, 0, stream>>>"
            f"({self.hargs}, {self.P}_lines, {self.P}_L, {self.P}_inner);\n"
        )

    def host_opt_in(self, kernel: str, smem: str) -> str:
        return (
            f"    if ({smem} > {STATIC_SMEM_LIMIT}) {{\n"
            f"      const cudaError_t {self.P}_err = cudaFuncSetAttribute({kernel}, "
            f"cudaFuncAttributeMaxDynamicSharedMemorySize, (int)({smem}));\n"
            f"      if ({self.P}_err != cudaSuccess) return (int){self.P}_err;\n"
            "    }\n"
        )

    def host_row(self, variant: str, nt: int, it: int) -> str:
        P, T = self.P, self.T
        if variant == "row_block":
            smem = f"((size_t){_stage_slots(nt, it)} * sizeof({T}))"
            return (
                self.host_opt_in(f"{P}_row_block", smem)
                + f"    {P}_row_block<<<{P}_grid({P}_outer), {nt}, {smem}, stream>>>({self.hargs}, {P}_outer, {P}_L);\n"
            )
        if variant == "row_warp":
            smem = f"((size_t){(nt // 32) * _padded(32 * it)} * sizeof({T}))" if it > 1 else "0"
            return (
                f"    {P}_row_warp<<<{P}_grid(optiml_cdiv({P}_outer, {nt // 32})), {nt}, {smem}, stream>>>"
                f"({self.hargs}, {P}_outer, {P}_L);\n"
            )
        raise TemplateError(f"scan: no row kernel for {variant}")

    def host_split(self, nt: int, it: int) -> str:
        """Reduce-then-scan over the ``outer * inner`` lines (strided when inner > 1)."""
        P, T = self.P, self.T
        smem_scan = f"((size_t){_stage_slots(nt, it)} * sizeof({T}))"
        smem_tiles = f"((size_t){_stage_slots(nt, SPLIT_SCAN_ITEMS)} * sizeof({T}))"
        return (
            f"    const int64_t {P}_ntiles = optiml_cdiv({P}_L, {nt * it});\n"
            f"    {T}* {P}_tiles = ({T}*)({self.ctx.workspace});\n"
            f"    if ({P}_ntiles > 1) {{\n"
            f"      if (workspace == NULL) return -5;\n"
            f"      {P}_split_reduce<<<{P}_grid({P}_lines * {P}_ntiles), {nt}, 0, stream>>>"
            f"({self.hargs}, {P}_lines, {P}_L, {P}_inner, {P}_ntiles, {P}_tiles);\n"
            f"      {P}_split_tiles<<<{P}_grid({P}_lines), {nt}, {smem_tiles}, stream>>>"
            f"({P}_lines, {P}_ntiles, {P}_tiles);\n"
            "    }\n"
            + self.host_opt_in(f"{P}_split_scan", smem_scan)
            + f"    {P}_split_scan<<<{P}_grid({P}_lines * {P}_ntiles), {nt}, {smem_scan}, stream>>>"
            f"({self.hargs}, {P}_lines, {P}_L, {P}_inner, {P}_ntiles, {P}_tiles, (int)({P}_ntiles > 1));\n"
        )

    def sizes(self) -> tuple[str, str, str]:
        """C expressions of L, outer, inner over the scanned value's run-time shape."""
        vid = self.source
        if self.ndim == 0:
            return "(int64_t)1", "(int64_t)1", "(int64_t)1"
        length = f"(int64_t)({self.ctx.dim(vid, self.dim)})"
        outer = _prod_expr([self.ctx.dim(vid, d) for d in range(self.dim)])
        inner = _prod_expr([self.ctx.dim(vid, d) for d in range(self.dim + 1, self.ndim)])
        return length, outer, inner

    def render(self) -> KernelCode:
        P, T = self.P, self.T
        variant = self.config.variant
        inner_is_one = self.ndim == 0 or self.dim == self.ndim - 1  # no dims after the scanned one
        col_config = self.config if variant == "col" else (None if inner_is_one else COL_FALLBACK)
        split_config = self.config if variant == "row_split" else SPLIT_FALLBACK
        nt = _threads(self.config)
        it = int(self.config.get("items", 1))
        snt, sit = int(split_config.get("threads")), int(split_config.get("items"))

        device: list[str] = []
        if variant == "row_block":
            device.append(self.row_block_kernel(nt, it))
        elif variant == "row_warp":
            device.append(self.row_warp_kernel(nt, it))
        device.append(self.split_kernels(snt, sit))
        if variant == "col_tile":
            device.append(self.col_tile_kernel(int(self.config.get("lanes")), it))
        elif col_config is not None:
            device.append(self.col_kernel(int(col_config.get("threads")), int(col_config.get("unroll"))))

        kernels, used = compact_descriptors("".join(device))
        device = [self.preamble(used, block_scan=True), kernels]

        # Run-time dispatch: few long lines → split kernels (row_split: every contiguous line too);
        # else strided lines → col; else the variant's row kernel.
        length, outer, inner = self.sizes()
        sms = max(1, self.ctx.facts.sm_count)

        def few_long(lines: str, size: str) -> str:
            return f"({lines} < {sms} && {size} >= {SPLIT_MIN_LENGTH})"

        split_when = few_long(f"{P}_lines", f"{P}_L")
        ws_when = few_long(f"(({outer}) * ({inner}))", f"({length})")
        if variant == "row_split":
            split_when = "true" if inner_is_one else f"({P}_inner == 1 || {split_when})"
            ws_when = "true" if inner_is_one else f"(({inner}) == 1 || {ws_when})"
        branches: list[tuple[str, str]] = [(split_when, self.host_split(snt, sit))]
        if variant == "col_tile":
            branches.append(("true", self.host_col_tile(int(self.config.get("lanes")))))
        elif col_config is not None:
            col_when = "true" if variant in ("col", "row_split") else f"({P}_inner > 1)"
            branches.append((col_when, self.host_col(int(col_config.get("threads")))))
        if variant in ("row_block", "row_warp"):
            branches.append(("true", self.host_row(variant, nt, it)))

        host = [
            f"{{  // {P}: scan {self.kind} dim={self.dim} reverse={int(self.reverse)} "
            f"exclusive={int(self.exclusive)} {self.config.label()}\n",
            f"  const int64_t {P}_L = {length};\n",
            f"  const int64_t {P}_outer = {outer};\n",
            f"  const int64_t {P}_inner = {inner};\n",
            f"  const int64_t {P}_lines = {P}_outer * {P}_inner;\n",
            f"  if ({P}_L > 0 && {P}_lines > 0) {{\n",
            f"    const {self.in_ctype}* {P}_src = {self.ctx.inputs[0].ptr};\n",
            f"    {self.out_ctype}* {P}_dst = {self.ctx.outputs[0].ptr};\n",
        ]
        if self.use_io:
            host += [f"    {P}_io {P}_args;\n", *(f"    {line}\n" for line in used.fill(f"{P}_args"))]
            host.append(f"    {P}_args.ws = workspace;\n")
        host.append(_branches(branches))
        host.append("  }\n}\n")
        lines_expr = f"(({outer}) * ({inner}))"
        tiles = f"(size_t)({lines_expr} * optiml_cdiv({length}, {snt * sit})) * sizeof({T})"
        workspace_bytes = f"({tiles})" if ws_when == "true" else f"({ws_when} ? {tiles} : (size_t)0)"
        return KernelCode(device="".join(device), host="".join(host), workspace_bytes=workspace_bytes)


def _branches(branches: list[tuple[str, str]]) -> str:
    """An if / else-if / else chain of host blocks (conditions "true" end the chain)."""
    out: list[str] = []
    for k, (cond, code) in enumerate(branches):
        last = cond == "true" or k == len(branches) - 1
        body = "".join("  " + line + "\n" for line in code.splitlines())
        if k == 0 and last:
            return code
        if k == 0:
            out.append(f"    if ({cond}) {{\n{body}")
        elif last:
            out.append(f"    }} else {{\n{body}")
        else:
            out.append(f"    }} else if ({cond}) {{\n{body}")
        if last:
            break
    out.append("    }\n")
    return "".join(out)


_IO_STRUCT = """\
// The ABI tensor descriptors, passed by value so the context's fused loads and stores (written
// against the host names `inputs`, `outputs`, `workspace`) can be evaluated in device code.
struct {P}_io {{
  optiml_tensor in[{NI}];
  optiml_tensor out[{NO}];
  void* ws;
}};
"""

_PREAMBLE = """\
// ---- {P}: scan {KIND} reverse={REV} exclusive={EXCL} {LABEL} ----
static inline unsigned {P}_grid(int64_t n) {{
  return (unsigned)(n < 1 ? 1 : (n > 2147483647 ? 2147483647 : n));
}}

__device__ __forceinline__ {T} {P}_op({T} a, {T} b) {{ return a {OP} b; }}

// Inclusive scan across a warp (every lane participates).
__device__ __forceinline__ {T} {P}_warp_incl({T} x, int lane) {{
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {{
    const {T} y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x = {P}_op(y, x);
  }}
  return x;
}}

// Combination of x over a warp, in every lane.
__device__ __forceinline__ {T} {P}_warp_all({T} x) {{
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = {P}_op(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}}
"""

_BLOCK_SCAN = """\
// Scans one chunk held blocked in registers (thread t holds chunk positions t*IT .. t*IT+IT-1),
// with `carry` combined in front; returns the chunk's total (without carry). wsm: 32 slots of
// shared memory; the caller syncs the block before wsm is reused.
template <int NT, int IT, bool EXCL>
__device__ __forceinline__ {T} {P}_block_scan({T} (&v)[IT], {T} carry, {T}* wsm) {{
  constexpr int NW = NT / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  {T} t = v[0];
#pragma unroll
  for (int k = 1; k < IT; ++k) t = {P}_op(t, v[k]);
  const {T} incl = {P}_warp_incl(t, lane);
  if (lane == 31) wsm[warp] = incl;
  __syncthreads();
  if (warp == 0) {{
    {T} w = lane < NW ? wsm[lane] : {ID};
    w = {P}_warp_incl(w, lane);
    if (lane < NW) wsm[lane] = w;
  }}
  __syncthreads();
  {T} excl = __shfl_up_sync(0xffffffffu, incl, 1);
  if (lane == 0) excl = {ID};
  if (warp > 0) excl = {P}_op(wsm[warp - 1], excl);
  {T} run = {P}_op(carry, excl);
#pragma unroll
  for (int k = 0; k < IT; ++k) {{
    const {T} x = v[k];
    if (EXCL) {{
      v[k] = run;
      run = {P}_op(run, x);
    }} else {{
      run = {P}_op(run, x);
      v[k] = run;
    }}
  }}
  return wsm[NW - 1];
}}
"""

_ROW_BLOCK = """\
// One block per row (grid-stride), chunks of {CHUNK} elements, a carry between chunks.
__global__ void __launch_bounds__({NT}) {P}_row_block({KP}, int64_t rows, int64_t L) {{
{BIND}  extern __shared__ __align__(16) unsigned char {P}_smem[];
  {T}* s = reinterpret_cast<{T}*>({P}_smem);
  {T}* wsm = s + {SPAD};
  (void)s;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {{
    const int64_t base = row * L;
    {T} carry = {ID};
    {T} nx[{IT}];
{FIRST}    for (int64_t c0 = 0; c0 < L; c0 += {CHUNK}) {{
    {T} v[{IT}];
{BODY}    carry = {P}_op(carry, total);
    __syncthreads();
    }}
  }}
}}
"""

_WARP_SCAN = """\
    {T} t = v[0];
#pragma unroll
    for (int k = 1; k < {IT}; ++k) t = {P}_op(t, v[k]);
    const {T} incl = {P}_warp_incl(t, lane);
    {T} excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = {ID};
    const {T} total = __shfl_sync(0xffffffffu, incl, 31);
    {T} run = {P}_op(carry, excl);
#pragma unroll
    for (int k = 0; k < {IT}; ++k) {{
      const {T} x = v[k];
      if ({EXCL}) {{
        v[k] = run;
        run = {P}_op(run, x);
      }} else {{
        run = {P}_op(run, x);
        v[k] = run;
      }}
    }}
"""

_ROW_WARP = """\
// One warp per row (grid-stride over rows), chunks of {CHUNK} elements, a carry between chunks.
__global__ void __launch_bounds__({NT}) {P}_row_warp({KP}, int64_t rows, int64_t L) {{
{BIND}{SMEM}  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * {NW};
  for (int64_t row = (int64_t)blockIdx.x * {NW} + (threadIdx.x >> 5); row < rows; row += nwarps) {{
    const int64_t base = row * L;
    {T} carry = {ID};
    for (int64_t c0 = 0; c0 < L; c0 += {CHUNK}) {{
    {T} v[{IT}];
{BODY}    carry = {P}_op(carry, total);
{END}    }}
  }}
}}
"""

_ROW_SPLIT = """\
// Reduce-then-scan over tiles of {CHUNK} elements of each line (o, i): elements o*L*inner + j*inner + i.
// Kernel 1: each tile's total.
__global__ void __launch_bounds__({NT}) {P}_split_reduce({KP}, int64_t rows, int64_t L,
                                                        int64_t inner, int64_t ntiles, {T}* tiles) {{
{BIND}  __shared__ {T} wsm[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t b = blockIdx.x; b < rows * ntiles; b += gridDim.x) {{
    const int64_t row = b / ntiles;
    const int64_t o = row / inner;
    const int64_t base = o * L * inner + (row - o * inner);
    const int64_t c0 = (b - row * ntiles) * {CHUNK};
    {T} nx[{IT}];
{REDUCE_LOADS}    {T} t = nx[0];
#pragma unroll
    for (int k = 1; k < {IT}; ++k) t = {P}_op(t, nx[k]);
    t = {P}_warp_all(t);
    if (lane == 0) wsm[warp] = t;
    __syncthreads();
    if (warp == 0) {{
      {T} w = lane < {NW} ? wsm[lane] : {ID};
      w = {P}_warp_all(w);
      if (lane == 0) tiles[b] = w;
    }}
    __syncthreads();
  }}
}}

// Kernel 2: exclusive scan of each row's tile totals, in place (one block per row).
__global__ void __launch_bounds__({NT}) {P}_split_tiles(int64_t rows, int64_t ntiles, {T}* tiles) {{
  extern __shared__ __align__(16) unsigned char {P}_smem[];
  {T}* s = reinterpret_cast<{T}*>({P}_smem);
  {T}* wsm = s + {K2SPAD};
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {{
    {T}* t = tiles + row * ntiles;
    {T} carry = {ID};
    for (int64_t c0 = 0; c0 < ntiles; c0 += {K2CHUNK}) {{
    {T} v[{K2}];
{TILES_BODY}    carry = {P}_op(carry, total);
    __syncthreads();
    }}
  }}
}}

// Kernel 3: rescan each tile starting from its prefix.
__global__ void __launch_bounds__({NT}) {P}_split_scan({KP}, int64_t rows, int64_t L, int64_t inner,
                                                      int64_t ntiles, const {T}* tiles, int use_carry) {{
{BIND}  extern __shared__ __align__(16) unsigned char {P}_smem[];
  {T}* s = reinterpret_cast<{T}*>({P}_smem);
  {T}* wsm = s + {SPAD};
  (void)s;
  for (int64_t b = blockIdx.x; b < rows * ntiles; b += gridDim.x) {{
    const int64_t row = b / ntiles;
    const int64_t o = row / inner;
    const int64_t base = o * L * inner + (row - o * inner);
    const int64_t c0 = (b - row * ntiles) * {CHUNK};
    const {T} carry = use_carry ? tiles[b] : {ID};
    {T} v[{IT}];
{SCAN_BODY}    __syncthreads();
  }}
}}
"""

_COL = """\
// One thread per (outer, inner) column, walking L serially; consecutive threads, consecutive inner.
__global__ void __launch_bounds__({NT}) {P}_col({KP}, int64_t ncols, int64_t L, int64_t inner) {{
{BIND}  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t ds = {STRIDE};
  for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < ncols; c += step) {{
    const int64_t o = c / inner;
    const int64_t base = o * L * inner + (c - o * inner);
    {T} acc = {ID};
    int64_t j = 0;
    int64_t gi = {START};
{MAIN}{TAIL}  }}
}}
"""

_COL_TILE = """\
// A block takes 32 consecutive (outer, inner) columns, {LANES} lanes a column; a tile of {TILE} positions a
// column: each lane {IT} consecutive ones, loaded while the tile before is scanned. The lanes' totals meet in
// shared memory (two buffers: one barrier a tile), each lane starts from the carry and the lanes before it; the
// carry takes them all.
__global__ void __launch_bounds__({NT}) {P}_col_tile({KP}, int64_t ncols, int64_t L, int64_t inner) {{
{BIND}  __shared__ {T} tot[2][{LANES}][32];
  const int cx = threadIdx.x & 31, lane = threadIdx.x >> 5;
  for (int64_t c0 = (int64_t)blockIdx.x * 32; c0 < ncols; c0 += (int64_t)gridDim.x * 32) {{
    const int64_t c = c0 + cx;
    const bool active = c < ncols;
    const int64_t o = c / inner;
    const int64_t base = o * L * inner + (c - o * inner);
    {T} carry = {ID};
    {T} nx[{IT}];
{FIRST}    int buf = 0;
    for (int64_t t0 = 0; t0 < L; t0 += {TILE}, buf ^= 1) {{
      {T} v[{IT}];
#pragma unroll
      for (int k = 0; k < {IT}; ++k) v[k] = nx[k];
{NEXT}      {T} t = v[0];
#pragma unroll
      for (int k = 1; k < {IT}; ++k) t = {P}_op(t, v[k]);
      tot[buf][lane][cx] = t;
      __syncthreads();
      {T} acc = carry;
#pragma unroll
      for (int j = 0; j < {LANES}; ++j) {{
        const {T} y = tot[buf][j][cx];
        if (j < lane) acc = {P}_op(acc, y);
        carry = {P}_op(carry, y);
      }}
#pragma unroll
      for (int k = 0; k < {IT}; ++k) {{
        const int64_t p = t0 + lane * {IT} + k;
        if (active && p < L) {{ {STEP} }}
      }}
    }}
    __syncthreads();
  }}
}}
"""
