"""The row template: element-wise chains, reductions and norms over any dims, in one kernel.

A row group (see :mod:`optiml.templates.row.rowprog`) is rendered with one of five variants, the
structural choice of how threads share a row:

* ``warp_row`` — a warp per row (many short rows); shuffles only.
* ``block_row`` — a block per row; warp shuffles plus shared memory between warps.
* ``split_row`` — several blocks per row (few long rows, full reductions, purely element-wise
  kernels): each stage's partial results go to the workspace and the next launch combines them.
* ``col`` — a thread per row, consecutive threads on consecutive kept elements: reductions over
  an outer dim (``x.max(dim=0)``, softmax over channels) read coalesced rows of the tensor.
* ``col_split`` — the same with ``lanes`` threads sharing each column (strided along it, combined
  in shared memory): outer-dim reductions with too few columns to fill the GPU.
* ``col_chunks`` — ``col_split`` with each column cut into chunks along its length, a block a chunk of a tile of
  columns (``blocks_per_sm`` blocks an SM in all): each stage's partial results go to the workspace and the next
  launch combines them, as ``split_row`` does for rows. For long columns too few to fill the GPU even with lanes
  (a batch norm's statistics over the 204 800 rows of 48 channels gave ``col_split`` two blocks).
* ``col_cached`` — ``col`` with the thread's column held in ``items`` registers between passes: a norm
  or softmax over a short outer dim (RMSNorm over the 64 channels of NCHW) reads its input once, not
  once a pass. Offered where the column fits (at most 64 registers over its leaves) and is read more
  than once.

Knobs: ``threads``, ``vec`` (elements per 16-byte access along the row, used when run-time
alignment allows, else scalar), ``items`` (row elements each thread keeps in registers between
passes; 0 = re-read every pass), ``blocks_per_sm`` (split_row: how many blocks fill the GPU; 0, for groups with no
reduction, a block a tile of ``threads * vec`` elements, as many blocks as tiles), ``ilp`` (row variants: packs a
thread loads before it uses them, 1 or 2; left out, 1).
The planner's rule (:meth:`RowTemplate.default`): the innermost dim kept → ``col_cached`` where its
column fits in registers and is read more than once, else ``col`` (``col_split`` for too few columns,
``col_chunks`` where its blocks would leave over half the SMs idle and the columns are long);
fewer rows than SMs with long rows → ``split_row``; rows of at most 1024 elements → ``warp_row``; else
``block_row`` with a register cache sized to hold the row when it fits; packs as wide as 16 bytes and the row's
inner run at the traced shape allow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from optiml.graph.ir import Node
from optiml.graph.sizes import SizeResolver
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    RenderContext,
    Space,
    TemplateError,
    ceil_pow2,
    from_compute,
)
from optiml.templates.cexpr import literal
from optiml.templates.group import Group
from optiml.templates.row.cluster import (
    CLUSTER_SIZES,
    HELD_BYTES,
    SHARED_BY_TWO,
    cluster_for,
    offered,
    render_cluster,
    row_bytes,
)
from optiml.templates.row.rowprog import REDUCE_IDENTITY, CatPart, Leaf, Reduction, RowProgram, Scope, itemsize

#: Threads a block of ``col_cached``: KernelBench's 36_RMSNorm (64 channels of a 112x64x512x512 NCHW tensor)
#: ran 10.9 ms with 64, 12.2 ms with 128 and 13.2 ms with 256, against ``col(threads=256)``'s 13.2 ms (H100,
#: 0876201, benchmarks/results/template_sweep_col_cached_rmsnorm_h100.json), measured while ``x ** 2`` was still a
#: ``powf``; the same structure written by hand ran 5.16-5.19 ms at 64-256 threads (rmsnorm_nchw_probe_h100_*.json).
CACHED_COLUMN_THREADS = 64
#: Columns of at least this many elements are also seeded with 32 lanes a column: KernelBench's 47_Sum
#: (columns of 4096 in a 128x4096x4095 tensor) ran 3.20 ms as ``col_split(threads=1024, lanes=32)``, 3.46 ms as
#: ``col(threads=256)``, the rule's choice (H100, template_sweep_col_split_sum_h100.json).
LONG_COLUMN = 1024
#: Columns at least this long, too few for ``col_split`` to give half the SMs a block, are cut into chunks
#: (``col_chunks``): a chunk of one lane's 64 elements or more still streams, and the extra launch and the
#: partials' round trip through the workspace are small beside a pass over the column.
CHUNKED_COLUMN = 8192
#: The variants that walk a row along its inner run (packs, ``ilp``), as opposed to the column ones.
ROW_VARIANTS = ("warp_row", "block_row", "split_row")


@dataclass(frozen=True)
class Layout:
    """How the domain's dims map onto (row, r1, r2) for this group."""

    kept: tuple[int, ...]  # domain dims indexing rows, outermost first
    r1: tuple[int, ...]  # an outer run of reduced dims (may be empty)
    r2: tuple[int, ...]  # the inner run of reduced dims
    inner_reduced: bool  # the innermost domain dim is reduced (row variants) or kept (col)


def layout_of(prog: RowProgram) -> Layout:
    """The reduced dims as at most two runs, each indexed with one stride per operand.

    Adjacent reduced dims form a run, and a run is cut where an operand stops or starts covering
    it (``mean(x * y[:, None])`` over both dims of ``x``: ``y`` is indexed along the outer dim
    and broadcast along the inner one), so every operand either spans a run or is broadcast
    over all of it (stride 0), and before the dim a slice read in place runs along (its rows are
    its source's, apart). A dim of size 1 at every shape set cuts nothing: a reduced one belongs to no
    run, and runs join across it (``instance_norm`` reshapes ``[B, C, H, W]`` to ``[1, B*C, H, W]`` and
    reduces dims 0, 2 and 3: one run, ``H, W``)."""
    covers = [leaf.domain_dims() for leaf in prog.leaves]
    breaks = {m for leaf in prog.leaves for m in leaf.breaks}  # a slice's rows lie apart in its source
    breaks |= prog.cat_dims  # a fused cat's dim starts its run: a part's offset then moves one index
    trivial = {d for d in range(prog.n) if all(g.type(prog.anchor).shape[d] == 1 for g in prog.graphs)}
    runs: list[list[int]] = []
    for d in sorted(set(prog.rdims) - trivial):
        joins = (
            runs
            and all(k in trivial for k in range(runs[-1][-1] + 1, d))
            and d not in breaks
            and all((d in dims) == (runs[-1][-1] in dims) for dims in covers)
        )
        if joins:
            runs[-1].append(d)
        else:
            runs.append([d])
    if len(runs) > 2:
        raise TemplateError(
            f"{prog.group.describe()}: reductions over more than two runs of dims (counting the cuts where "
            "an operand is broadcast over part of a run)"
        )
    r2 = tuple(runs[-1]) if runs else ()
    r1 = tuple(runs[0]) if len(runs) == 2 else ()
    inner = bool(r2) and all(d in trivial for d in range(r2[-1] + 1, prog.n))  # size-1 dims after it: still inner
    return Layout(prog.kdims, r1, r2, inner)


class RowTemplate:
    name = "reduce"

    def __init__(self, sizes: SizeResolver, graphs: list) -> None:
        self.sizes = sizes
        self.graphs = graphs

    def program(self, group: Group, online: bool = False) -> RowProgram:
        return RowProgram(group, self.sizes, self.graphs, online=online)

    # -- space and rules ---------------------------------------------------------------------------
    def space(self, group: Group, facts: DeviceFacts) -> Space:
        prog = self.program(group)
        lay = layout_of(prog)
        knobs: dict[str, dict[str, tuple]] = {}
        # Variants that cannot be fast for this layout are not offered (measured on the H200: a thread
        # per row on a contiguous row, or one block for a single row of 67 M elements, ran into the
        # evaluation timeout): the innermost dim reduced → row variants, and a single traced row →
        # split_row alone; the innermost dim kept → column variants.
        if lay.inner_reduced:
            rows = _prod(prog.shape[d] for d in lay.kept)
            if rows > 1:
                knobs["warp_row"] = {
                    "threads": (128, 256),
                    "vec": (1, 2, 4, 8),
                    "items": (0, 1, 2, 4, 8, 16),
                    "ilp": (1, 2),
                }
                knobs["block_row"] = {
                    "threads": (128, 256, 512, 1024),
                    "vec": (1, 2, 4, 8),
                    "items": (0, 1, 2, 4, 8, 16),
                    "ilp": (1, 2),
                }
                if offered(prog, lay, facts):  # the row held in shared memory over a cluster's blocks
                    knobs["cluster_row"] = {"threads": (256, 512, 1024), "vec": (1, 2, 4, 8), "cluster": CLUSTER_SIZES}
            knobs["split_row"] = {
                "threads": (128, 256, 512, 1024),
                "vec": (1, 2, 4, 8),
                # 0: a block a tile of the row, as many blocks as tiles (eager's element-wise launches); only where
                # no reduction keeps a partial a block
                "blocks_per_sm": (0, 1, 2, 4, 8) if not prog.reductions else (1, 2, 4, 8),
                "ilp": (1, 2),
                # blocks take the row's tiles in turn (a front sweeping the row, as eager's element-wise kernels
                # do) rather than a contiguous chunk each; only where no reduction combines the blocks' parts in
                # chunk order (an arg-max's first index). A move, not a seed: it tied with chunks on 19_ReLU and
                # 21_Sigmoid (template_sweep_interleave_h100_2026-12-07.json)
                "interleave": (0, 1) if not prog.reductions else (0,),
            }
        else:
            knobs["col"] = {"threads": (64, 128, 256, 512)}
            knobs["col_split"] = {"threads": (128, 256, 512, 1024), "lanes": (4, 8, 16, 32)}
            knobs["col_chunks"] = {"threads": (256, 512, 1024), "lanes": (8, 16, 32), "blocks_per_sm": (2, 4, 8)}
            if _column_items(prog, lay):
                knobs["col_cached"] = {"threads": (64, 128, 256, 512), "items": (8, 16, 32, 64)}

        if prog.cat_dims:  # a fused cat reads each element where its part is: no register caches of a row, no pairs
            for knob in knobs.values():
                knob.update({k: v[:1] for k, v in knob.items() if k in ("items", "ilp")})
        if lay.r1:  # a row of two runs is walked flat, never cached: other register counts would render the same kernel
            for knob in knobs.values():
                knob.update({k: v[:1] for k, v in knob.items() if k == "items"})

        def check(config: GroupConfig) -> str | None:
            items = config.get("items", 0) or 0
            if items and config.get("vec", 1) * items > 64:
                return "vec * items > 64 registers per leaf"
            if config.get("ilp", 1) > 1 and config.get("vec", 1) == 1:
                return "ilp pairs packs: it needs vec > 1"
            if config.get("ilp", 1) > 1 and items:
                return "ilp pairs the packs of rows read anew each pass: it needs items = 0"
            if config.variant == "split_row" and config.get("blocks_per_sm") == 0 and config.get("interleave", 0):
                return "split_row with a block a tile (blocks_per_sm=0) has no tiles to take in turn (interleave=1)"
            if config.variant in ("col_split", "col_chunks") and config.get("threads") // config.get("lanes") < 32:
                return f"{config.variant} needs at least 32 columns per block (threads / lanes >= 32) to coalesce"
            return None

        implied: dict[str, dict[str, Any]] = {variant: {"ilp": 1} for variant in ROW_VARIANTS if variant in knobs}
        if "split_row" in implied:
            implied["split_row"]["interleave"] = 0
        return Space(knobs, check, implied)

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        prog = self.program(group)
        lay = layout_of(prog)
        if not lay.inner_reduced:
            columns = _prod(prog.shape[d] for d in lay.kept)
            reduced = _reduced_length(prog, lay)
            items = _column_items(prog, lay)
            if items:  # a column read in several passes, read once into registers (CACHED_COLUMN_THREADS)
                return GroupConfig.of("col_cached", threads=CACHED_COLUMN_THREADS, items=items)
            if columns >= facts.sm_count * 1024 or reduced == 1:  # (a reduction over size-1 dims: a thread a row)
                return GroupConfig.of("col", threads=256)
            lanes = min(32, max(4, ceil_pow2(facts.sm_count * 2048 // max(columns, 1))))
            split = GroupConfig.of("col_split", threads=max(256, 32 * lanes), lanes=lanes)
            # chunks where col_split's blocks would leave over half the SMs idle (its one tile a block was measured
            # where they fill it: 47_Sum; chunks are not yet timed)
            if 2 * -(-columns // (split.get("threads") // lanes)) < facts.sm_count and reduced >= CHUNKED_COLUMN:
                return GroupConfig.of("col_chunks", threads=512, lanes=16, blocks_per_sm=4)
            return split
        shape = prog.shape
        rows = _prod(shape[d] for d in lay.kept)
        length = _reduced_length(prog, lay)
        vec = _pack_width(self._vec(prog), _prod(shape[d] for d in lay.r2), length, constant_run(prog, lay))
        if (rows < facts.sm_count * 2 and length >= 8192) or rows == 1:
            if not prog.reductions:  # element-wise: eager's launch, a 128-thread block a tile: 19_ReLU 4.23 ms and
                # 21_Sigmoid 4.28 against the chunks' 4.47 and 4.49, eager 4.26 and 4.29 (H100, 147e79a,
                # template_sweep_tiles_seeds_h100_2026-12-07.json)
                return GroupConfig.of("split_row", threads=128, vec=vec, blocks_per_sm=0)
            return GroupConfig.of("split_row", threads=512, vec=vec, blocks_per_sm=4)
        if length <= 1024:
            items = min(16, max(1, ceil_pow2(-(-length // (32 * vec)))))
            while vec * items > 64:
                items //= 2
            return GroupConfig.of("warp_row", threads=256, vec=vec, items=0 if lay.r1 or prog.cat_dims else items)
        threads = 512 if length >= 4096 else 256
        items = -(-length // (threads * vec))
        items = ceil_pow2(items) if items <= 16 else 0
        if lay.r1 or vec * items > 64 or prog.cat_dims:
            items = 0
        blocks = _held_cluster(prog, lay, facts, rows, length, SHARED_BY_TWO) if not items else 0
        if blocks:  # rows re-read past L2, held on chip where two blocks an SM hold the segments
            return GroupConfig.of("cluster_row", threads=512, vec=vec, cluster=blocks)
        return GroupConfig.of("block_row", threads=threads, vec=vec, items=items)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        """The default, then alternatives that suit the shape: no warp per row for a handful of rows,
        no block per row for one row, other lane counts for column reductions."""
        first = self.default(group, facts)
        space = self.space(group, facts)
        prog = self.program(group)
        lay = layout_of(prog)
        rows = _prod(prog.shape[d] for d in lay.kept)
        length = _reduced_length(prog, lay)
        vec = first.get("vec", 1)
        options: list[GroupConfig] = []
        if lay.inner_reduced:
            if not prog.reductions:  # element-wise: the chunks a block a tile replaced, or a block a tile itself
                chunked = GroupConfig.of("split_row", threads=512, vec=vec, blocks_per_sm=4)
                tiles = GroupConfig.of("split_row", threads=128, vec=vec, blocks_per_sm=0)
                options.append(chunked if first == tiles else tiles)
            if rows > 1:  # a block a row where the row has a pack for each thread (nearest upsampling's rows of 256
                # ran 0.75-14 ms with a block each, 0.25 ms with a warp, H100, template_sweep_upsample_span_h100_*)
                options += [
                    GroupConfig.of("block_row", threads=threads, vec=vec, items=0)
                    for threads in (256, 1024)
                    if length >= threads * vec
                ]
            if first.variant == "cluster_row":  # and the row re-read, the rule before it was timed
                options.insert(0, GroupConfig.of("block_row", threads=512 if length >= 4096 else 256, vec=vec, items=0))
            # a row too long for registers and the rows re-read past L2, but no two blocks an SM hold its segments: one
            # block an SM holds them (SHARED_BY_TWO: a win or a loss by the row's arithmetic), raced second
            held = first.variant == "block_row" and not first.get("items")
            blocks = _held_cluster(prog, lay, facts, rows, length, HELD_BYTES) if held else 0
            if blocks:
                options.insert(0, GroupConfig.of("cluster_row", threads=512, vec=vec, cluster=blocks))
            if rows >= facts.sm_count * 4:
                options += [GroupConfig.of("warp_row", threads=threads, vec=vec, items=0) for threads in (256, 128)]
            options.append(GroupConfig.of("split_row", threads=256, vec=vec, blocks_per_sm=8))
        else:
            if first.variant == "col_chunks":  # fewer or more blocks an SM, and the rule's choice before chunks
                options += [
                    GroupConfig.of("col_chunks", threads=1024, lanes=32, blocks_per_sm=2),
                    GroupConfig.of("col_chunks", threads=256, lanes=8, blocks_per_sm=8),
                ]
            if _reduced_length(prog, lay) >= LONG_COLUMN:  # many lanes a column (LONG_COLUMN)
                options.append(GroupConfig.of("col_split", threads=1024, lanes=32))
            options += [
                GroupConfig.of("col", threads=256),
                GroupConfig.of("col_split", threads=256, lanes=8),
                GroupConfig.of("col_split", threads=512, lanes=16),
                GroupConfig.of("col", threads=128),
            ]
        out = [first]
        for candidate in options:
            if candidate not in out and space.reason_invalid(candidate) is None:
                out.append(candidate)
        return out[:4]

    def _vec(self, prog: RowProgram) -> int:
        """Elements a 16-byte pack holds of the widest operand read along the row. A leaf read once a row does
        not count: cross-entropy's int64 targets halved the pack over its float32 logits to 8 bytes."""
        widest = max((itemsize(leaf.dtype) for leaf in prog.full_leaves() or prog.leaves), default=4)
        return max(1, min(8, 16 // widest))

    # -- rendering -------------------------------------------------------------------------------
    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason:
            raise TemplateError(reason)
        # A row kernel that reads the row anew for each pass takes exp(x - max)'s sum in the max's pass (online); one
        # holding the row in registers (items) or splitting it over blocks (split_row) keeps its passes, and so do
        # the column kernels: a block's columns are read again from L2, where the online rescaling costs more than
        # the pass it saves (softmax over dim 1 of 16x1024x4096 ran 0.457 ms online against 0.296 ms, H100).
        online = config.variant in ("warp_row", "block_row", "cluster_row") and int(config.get("items", 0)) == 0
        prog = self.program(group, online=online)
        return _Renderer(prog, layout_of(prog), config, ctx).render()


def _held_cluster(prog: RowProgram, lay: Layout, facts: DeviceFacts, rows: int, length: int, budget: int) -> int:
    """The cluster size that holds rows of ``length`` on chip in segments of at most ``budget`` bytes, where
    ``cluster_row`` is offered and the rows, all together, would be re-read past L2; 0 where not."""
    if not offered(prog, lay, facts) or rows * row_bytes(prog, length) <= facts.l2_bytes:
        return 0
    return cluster_for(prog, length, budget)


def _reduced_length(prog: RowProgram, lay: Layout) -> int:
    """The elements a row (or a column) holds at the traced shape: its reduced dims' sizes, multiplied."""
    return _prod(prog.shape[d] for d in (*lay.r1, *lay.r2))


def _column_items(prog: RowProgram, lay: Layout) -> int:
    """The registers a thread of ``col_cached`` needs to hold its column (a power of two), or 0 where that
    variant does not suit the group: rows reduced (not columns), two runs of reduced dims, a fused cat, a
    column read only once, or one too long to keep (over 64 registers across the leaves it reads)."""
    if lay.inner_reduced or lay.r1 or prog.cat_dims:
        return 0
    full_leaves = prog.full_leaves()
    passes = prog.stages + (1 if prog.full_outputs() else 0)
    length = _prod(prog.shape[d] for d in lay.r2)
    if passes < 2 or not full_leaves or length < 2:
        return 0
    items = max(8, ceil_pow2(length))
    return items if items * len(full_leaves) <= 64 else 0


def _pack_width(vec: int, inner: int, length: int, run: int) -> int:
    """The pack the row at the timed shape takes on the vector path, ``vec`` elements making 16 bytes. Where the
    row's inner run is a constant ``run`` shorter than that, packs span runs and are as wide as lets an operand
    broadcast along each run load ``vec`` elements at once (at most 8 elements; ``run`` divides it and it the row's
    ``length``): nearest upsampling by 2 takes packs of 8 — a 16-byte load, two 16-byte stores; 0.248 ms against
    0.301 ms with packs of 4 and 0.372 ms with packs of 2 inside each run, H100, c6ddcb5,
    template_sweep_upsample_span_h100_2026-12-07.json. Otherwise the widest that divides the inner run of
    ``inner`` elements (an odd row the scalar path, labelled ``vec=1``)."""
    if 0 < run < 8:
        wide = min(8, vec * run)
        while wide > run and (wide % run or length % wide):
            wide //= 2
        if wide > run:
            return wide
    while vec > 1 and inner % vec:
        vec //= 2
    return vec


def constant_run(prog: RowProgram, lay: Layout) -> int:
    """The length of the row's inner run where packs may span runs: a row of two runs whose inner run has the
    same length at every call, not a shape (nearest upsampling's factor), so a pack's elements split into whole
    runs at compile time; 0 where the run's length is read from the tensors, or the row is one run."""
    if not lay.r1 or not lay.r2 or prog.cat_dims:
        return 0
    return _prod(prog.constant_domain_size(m) or 0 for m in lay.r2)


def _times(count: int, team: int | str) -> int | str:
    """``count`` teams' worth of threads: a number, or C text where the team is the grid's."""
    return count * team if isinstance(team, int) else f"{count} * {team}"


def _prod(values: Iterable[Any]) -> int:
    n = 1
    for v in values:
        n *= int(v)
    return n


_COMBINE = {
    "sum": "{a} + {b}",
    "sumsq": "{a} + {b}",  # partial sums of squares combine as sums
    "mean": "{a} + {b}",
    "prod": "{a} * {b}",
    "amax": "optiml_nanmax<{t}>({a}, {b})",
    "amin": "optiml_nanmin<{t}>({a}, {b})",
    # bitwise, not short-circuit: every lane must reach a warp shuffle in {b} (a lane whose {a} already
    # decides would skip it, and the warp deadlocks)
    "any": "({a}) | ({b})",
    "all": "({a}) & ({b})",
}

# (their device helpers, OptimlPack and the arg-max/min updates, are in the shipped header optiml_device.h)

Consume = Callable[[list[str], int | None], list[str]]


class _Renderer:
    """Renders one configuration of one row group (see the module docstring for the variants)."""

    def __init__(self, prog: RowProgram, lay: Layout, config: GroupConfig, ctx: RenderContext) -> None:
        self.p = prog
        self.lay = lay
        self.cfg = config
        self.ctx = ctx
        self.pre = ctx.prefix
        # col_cached renders as col with a register cache (the cache code serves any team and lane); col_chunks as
        # col_split's team over a chunk of the column (render_chunks)
        self.chunked = config.variant == "col_chunks"
        self.variant = {"col_cached": "col", "col_chunks": "col_split"}.get(config.variant, config.variant)
        self.threads = int(config.get("threads", 256))
        self.vec = int(config.get("vec", 1)) if self.variant != "col" else 1
        self.items = int(config.get("items", 0) or 0) if self.variant in ("warp_row", "block_row", "col") else 0
        self.lanes = int(config.get("lanes", 1)) if self.variant == "col_split" else 1
        self.cols = self.threads // self.lanes  # columns per block (col_split)
        self.team = {
            "warp_row": 32,
            "block_row": self.threads,
            "split_row": self.threads,
            "cluster_row": self.threads,
            "col": 1,
            "col_split": self.lanes,
        }[self.variant]
        self.lane = {"warp_row": "(threadIdx.x & 31)", "col": "0", "col_split": f"(threadIdx.x / {self.cols})"}.get(
            self.variant, "threadIdx.x"
        )
        # the team the row's loops stride by: the whole grid's threads where split_row's blocks interleave
        self.interleave = self.variant == "split_row" and bool(config.get("interleave", 0))
        self.loop_team: int | str = f"((int64_t)gridDim.x * {self.threads})" if self.interleave else self.team
        self.loop_lane = f"((int64_t)blockIdx.x * {self.threads} + threadIdx.x)" if self.interleave else self.lane
        self.full_outs = prog.full_outputs()
        self.outer_outs = [(o, m) for o, m in prog.outputs if not prog.is_full(o, m)]
        self.full_leaves = prog.full_leaves()
        self.cached = self.items > 0  # the space offers no cache to a row of two runs
        # packs each thread loads ahead of using them (the space offers 2 to row variants with packs, no fused cat)
        self.ilp = int(config.get("ilp", 1))
        # packs spanning whole inner runs of a constant length (nearest upsampling by 2: packs of 8 over four runs)
        run = constant_run(prog, lay) if self.variant in ROW_VARIANTS else 0
        self.span = run if 0 < run < self.vec and self.vec % run == 0 else 0
        self.direct: set[int] = set()  # leaves packed by the loops rendered so far (see :meth:`loops`)
        self.cat_packed: set[int] = set()  # leaves fused cats' parts read as packs (:meth:`cat_packed_elements`)
        self._smem = 0
        #: the row loops read the full leaves from the block's segment in shared memory (cluster_row's held row)
        self.smem_reads = False

    # ---- host side --------------------------------------------------------------------------------
    def _strides(self, vid: int, dmap: tuple[int, ...], present: tuple[bool, ...]) -> dict[int, str]:
        """Domain dim → C stride of a contiguous tensor shaped like ``vid`` (absent: broadcast); for
        a slice read in place, ``vid`` is its source, whose dims give the strides."""
        dims = [self.p.sizes.dim(vid, d) for d in range(len(dmap))]
        strides: dict[int, str] = {}
        for i, (m, here) in enumerate(zip(dmap, present, strict=True)):
            if m >= 0 and here:
                inner = dims[i + 1 :]
                strides[m] = "(" + " * ".join(inner) + ")" if inner else "((int64_t)1)"
        return strides

    def _fill_strides(self, name: str, st: dict[int, str]) -> list[str]:
        lay = self.lay
        zero = "((int64_t)0)"
        lines = [f"P.{name}_k[{j}] = {st.get(m, zero)};" for j, m in enumerate(lay.kept)]
        lines.append(f"P.{name}_r1 = {st.get(lay.r1[-1], zero) if lay.r1 else zero};")
        lines.append(f"P.{name}_r2 = {st.get(lay.r2[-1], zero) if lay.r2 else zero};")
        return lines

    def host_struct(self, extra_fields: list[str]) -> tuple[str, list[str]]:
        pre, lay = self.pre, self.lay
        nk = max(len(lay.kept), 1)
        fields: list[str] = []
        fill = [f"{pre}_P P;"]
        inputs = list(self.p.group.inputs)
        for leaf in self.p.leaves:
            slot = inputs.index(leaf.view) if leaf.view in inputs else inputs.index(leaf.storage)
            fields.append(f"const {self.p.leaf_ctype(leaf)}* __restrict__ l{leaf.index};")
            fields.append(f"int64_t l{leaf.index}_k[{nk}]; int64_t l{leaf.index}_r1, l{leaf.index}_r2;")
            if leaf.slice_node is None:
                fill.append(f"P.l{leaf.index} = {self.ctx.inputs[slot].ptr};")
                fill += self._fill_strides(f"l{leaf.index}", self._strides(leaf.view, leaf.dmap, leaf.present))
            else:  # a slice read in place: its source's strides, from the slice's start
                node, dim = leaf.slice_node, int(leaf.slice_node.attr("dim"))
                source = node.inputs[0]
                start = self.p.sizes.size(tuple(g.nodes[node.index].attr("start") for g in self.p.graphs))
                inner = " * ".join(f"(int64_t)({self.p.sizes.dim(source, d)})" for d in range(dim + 1, len(leaf.dmap)))
                fill.append(f"P.l{leaf.index} = {self.ctx.inputs[slot].ptr} + (int64_t)({start}) * {inner or 1};")
                fill += self._fill_strides(f"l{leaf.index}", self._strides(source, leaf.dmap, leaf.present))
        for k, (vid, dmap) in enumerate(self.p.outputs):
            out = self.ctx.outputs[k]
            fields.append(f"{out.ctype}* __restrict__ o{k};")
            fill.append(f"P.o{k} = {out.ptr};")
            if (vid, dmap) in self.full_outs:
                shapes = [g.type(vid).shape for g in self.p.graphs]
                present = tuple(any(s[d] != 1 for s in shapes) for d in range(len(dmap)))
                fields.append(f"int64_t o{k}_k[{nk}]; int64_t o{k}_r1, o{k}_r2;")
                fill += self._fill_strides(f"o{k}", self._strides(vid, dmap, present))
        fields.append(f"int64_t ks[{nk}]; int64_t rows, R1, R2, R;")
        for vid, expr in self.p.size_constants():
            fields.append(f"double sc{vid};")
            fill.append(f"P.sc{vid} = (double)({expr});")
        fields += extra_fields
        fill += [f"P.ks[{j}] = {self.p.domain_size(m)};" for j, m in enumerate(lay.kept)]
        fill.append("P.rows = " + (" * ".join(f"P.ks[{j}]" for j in range(len(lay.kept))) or "1") + ";")
        fill.append("P.R1 = " + (" * ".join(self.p.domain_size(m) for m in lay.r1) or "1") + ";")
        fill.append("P.R2 = " + (" * ".join(self.p.domain_size(m) for m in lay.r2) or "1") + ";")
        fill.append("P.R = P.R1 * P.R2;")
        for index, node in sorted(self.p.cats.items()):
            offsets = self.p.cat_offsets(node)
            fields.append(f"int64_t cat{index}[{len(offsets)}];")
            fill += [f"P.cat{index}[{k}] = {offset};" for k, offset in enumerate(offsets)]
        for run in (lay.r1, lay.r2):
            if len(run) > 1 and run[0] in self.p.cat_dims:  # a fused cat's dim starting a run: elements per index of it
                fields.append(f"int64_t cin{run[0]};")
                fill.append(
                    f"P.cin{run[0]} = " + " * ".join(["(int64_t)1", *(self.p.domain_size(d) for d in run[1:])]) + ";"
                )
        struct = f"struct {pre}_P {{\n  " + "\n  ".join(fields) + "\n};"
        return struct, fill

    def vec_ok(self) -> str:
        """Host condition for the vector path: aligned pointers; strides and row length multiples of VEC. Packs
        spanning runs (``span``) ask the row's length to be a multiple of VEC and each operand read along the
        inner run to be contiguous across runs (its outer stride the run's length)."""
        v, span = self.vec, self.span
        conds = [f"P.R % {v} == 0" if span else f"P.R2 % {v} == 0"]
        for leaf in self.full_leaves:
            if self.p.cat_dims and leaf.index not in self.direct:  # read only by a fused cat's part (CATV)
                continue
            conds += self._leaf_vec_ok(leaf)
        for vid, dmap in self.full_outs:
            k = self.p.outputs.index((vid, dmap))
            conds.append(f"((uintptr_t)P.o{k} % (sizeof({self.ctx.outputs[k].ctype}) * {v}) == 0) && P.o{k}_r2 == 1")
            conds += [f"P.o{k}_r1 == {span}"] if span else []
            conds += [f"P.o{k}_k[{j}] % {v} == 0" for j in range(len(self.lay.kept))]
        return " && ".join(conds)

    def cat_packs_ok(self) -> str:
        """Host condition for reading fused cats' parts as packs (``CATV``): every part along the row's inner
        run starts at a multiple of VEC (no pack straddles two), every leaf read that way is aligned."""
        v, lay = self.vec, self.lay
        conds = []
        for leaf in self.full_leaves:
            if leaf.index in self.cat_packed and leaf.index not in self.direct:
                conds += self._leaf_vec_ok(leaf)
        for index, node in sorted(self.p.cats.items()):
            m = self.p.cat_domain_dim[index]
            if lay.r2 and m == lay.r2[0]:
                per = f" * P.cin{m}" if len(lay.r2) > 1 else ""
                conds += [f"(P.cat{index}[{k}]{per}) % {v} == 0" for k in range(1, len(node.inputs))]
        return " && ".join(conds) or "true"

    def template_head(self) -> str:
        return "template <int VEC, bool CATV>" if self.p.cat_dims else "template <int VEC>"

    def _leaf_vec_ok(self, leaf: Leaf) -> list[str]:
        """Host conditions for reading ``leaf`` as packs: broadcast along the inner run (a pack is one element
        read once: any address will do), or contiguous along it from an aligned pointer with every other stride a
        multiple of VEC. (A per-channel weight in GroupNorm's row, stride 1 along its channels, sent the whole
        kernel down the scalar path until 2026-12-06.)"""
        i, v, span = leaf.index, self.vec, self.span

        def aligned(width: int, r1: str) -> str:
            return " && ".join(
                [
                    f"((uintptr_t)P.l{i} % (sizeof({self.p.leaf_ctype(leaf)}) * {width}) == 0)",
                    r1,
                    *(f"P.l{i}_k[{j}] % {width} == 0" for j in range(len(self.lay.kept))),
                ]
            )

        if span:  # along the runs, contiguous across them; or broadcast along the run, read in packs of VEC / span
            along, across = aligned(v, f"P.l{i}_r1 == {span}"), aligned(v // span, f"P.l{i}_r1 == 1")
            return [f"((P.l{i}_r2 == 1 && {along}) || (P.l{i}_r2 == 0 && (P.l{i}_r1 == 0 || ({across}))))"]
        return [f"(P.l{i}_r2 == 0 || (P.l{i}_r2 == 1 && " + aligned(v, f"P.l{i}_r1 % {v} == 0") + "))"]

    def launch(self, kernel: str, grid: str, args: str) -> str:
        call = "<<<" + grid + f", {self.threads}, 0, stream>>>({args});"
        if self.p.cat_dims and self.vec > 1:
            body = (
                f"if ({self.vec_ok()}) {{\nif ({self.cat_packs_ok()}) {kernel}<{self.vec}, true>{call}\n"
                f"else {kernel}<{self.vec}, false>{call}\n}} else {kernel}<1, false>{call}"
            )
        elif self.p.cat_dims:
            body = f"{kernel}<1, false>{call}"
        elif self.vec > 1:
            body = f"if ({self.vec_ok()}) {kernel}<{self.vec}>{call}\nelse {kernel}<1>{call}"
        else:
            body = f"{kernel}<1>{call}"
        return "{\n" + body + "\nconst cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e;\n}"

    # ---- device pieces ------------------------------------------------------------------------------
    def row_prologue(self) -> list[str]:
        """Decompose ``row`` into kept indices and each leaf's (and FULL output's) base offset."""
        nk = len(self.lay.kept)
        bases = [f"l{leaf.index}" for leaf in self.p.leaves]
        bases += [f"o{self.p.outputs.index(o)}" for o in self.full_outs]
        lines = [f"int64_t b_{b} = 0;" for b in bases]
        if nk and bases:
            lines.append("{ int64_t rem = row;")
            for j in reversed(range(nk)):
                lines.append(f"  {{ const int64_t ix = optiml_divmod(rem, p.ks[{j}]);")
                lines += [f"    b_{b} += ix * p.{b}_k[{j}];" for b in bases]
                lines.append("  }")
            lines.append("}")
        return lines

    def load(self, leaf: Leaf, r1: str, e: str) -> str:
        i = leaf.index
        return self.p.load_expr(leaf, f"p.l{i}", f"b_l{i} + ({r1}) * p.l{i}_r1 + ({e}) * p.l{i}_r2")

    # ---- fused cats: an element's index along a dim, and reads shifted along it -------------------------
    def coord(self, m: int, at: tuple[str, str] | None = None) -> str:
        """The current element's index along domain dim ``m``: a kept dim from ``row``, the first dim of a
        run from ``at`` (the element's r1 and e)."""
        lay = self.lay
        if m in lay.kept:
            j = lay.kept.index(m)
            inner = " * ".join(f"p.ks[{k}]" for k in range(j + 1, len(lay.kept)))
            return f"((row{f' / ({inner})' if inner else ''}) % p.ks[{j}])"
        if at is not None and lay.r2 and m == lay.r2[0]:
            return f"(({at[1]}){self._per_index(m, lay.r2, ' / ')})"
        if at is not None and lay.r1 and m == lay.r1[0]:
            return f"(({at[0]}){self._per_index(m, lay.r1, ' / ')})"
        raise TemplateError(f"internal: a fused cat along domain dim {m}, which starts no run of the row")

    @staticmethod
    def _per_index(m: int, run: tuple[int, ...], op: str) -> str:
        """``op`` and the elements per index of ``m`` in its run (nothing for a run of ``m`` alone: one)."""
        return f"{op}p.cin{m}" if len(run) > 1 else ""

    def shifted_offset(self, leaf: Leaf, m: int, part: CatPart, at: tuple[str, str] | None = None) -> str:
        """Where ``leaf`` holds the element whose index along domain dim ``m`` is lowered by ``part``'s offset."""
        i, lay, shift = leaf.index, self.lay, part.offset
        if m in lay.kept:
            base = f"b_l{i} - ({shift}) * p.l{i}_k[{lay.kept.index(m)}]"
            return base if at is None else f"{base} + ({at[0]}) * p.l{i}_r1 + ({at[1]}) * p.l{i}_r2"
        if at is not None and lay.r2 and m == lay.r2[0]:
            e = f"(({at[1]}) - ({shift}){self._per_index(m, lay.r2, ' * ')})"
            return f"b_l{i} + ({at[0]}) * p.l{i}_r1 + ({e}) * p.l{i}_r2"
        if at is not None and lay.r1 and m == lay.r1[0]:
            r1 = f"(({at[0]}) - ({shift}){self._per_index(m, lay.r1, ' * ')})"
            return f"b_l{i} + ({r1}) * p.l{i}_r1 + ({at[1]}) * p.l{i}_r2"
        raise TemplateError(f"internal: a fused cat along domain dim {m}, which starts no run of the row")

    def shifted_load(self, leaf: Leaf, m: int, part: CatPart, at: tuple[str, str] | None = None) -> str:
        """``leaf`` read with the element's index along domain dim ``m`` moved into ``part``."""
        return self.p.load_expr(leaf, f"p.l{leaf.index}", self.shifted_offset(leaf, m, part, at))

    def row_scope(self) -> Scope:
        """Where values that do not vary along the row are computed (a fused cat there runs along a kept dim)."""
        row = Scope(leaf=lambda leaf: self.p.load_expr(leaf, f"p.l{leaf.index}", f"b_l{leaf.index}"), tag="u")
        if self.p.cat_dims:
            row.coord, row.shifted = self.coord, self.shifted_load
        return row

    def gather_renderer(self, row: Scope, stats: dict[int, str]) -> Callable[[Node, Scope], str]:
        def render(node: Node, scope: Scope) -> str:
            idx = self.p.emit(node.inputs[1], tuple(range(self.p.n)), row, stats, render)
            if self.lay.r1:
                r1, e = f"(({idx}) / p.R2)", f"(({idx}) % p.R2)"
            else:
                r1, e = "0", f"({idx})"
            sub = Scope(leaf=lambda leaf: self.load(leaf, r1, e), tag=f"q{node.index}_")
            value = self.p.emit(node.inputs[0], tuple(range(self.p.n)), sub, stats, render)
            row.lines.extend(sub.lines)
            return value

        return render

    def body(
        self,
        targets: list,
        leaf_code: Callable[[Leaf], str],
        row: Scope,
        stats: dict[int, str],
        consume: Consume,
        j: int | None,
        at: tuple[str, str] | None = None,
        shifted: Callable[[Leaf, int, CatPart], str] | None = None,
    ) -> list[str]:
        """The targets' values for one element; ``at``: its (r1, e) indices, which a fused cat needs (its
        parts' reads at those, shifted, unless ``shifted`` reads them)."""
        scope = Scope(leaf=leaf_code, outer=row, tag="t")
        if at is not None and self.p.cat_dims:
            scope.coord = partial(self.coord, at=at)
            scope.shifted = shifted or partial(self.shifted_load, at=at)
        gather = self.gather_renderer(row, stats)
        values = [self.p.emit(vid, dmap, scope, stats, gather) for vid, dmap in targets]
        return scope.lines + consume(values, j)

    def loops(
        self, lo: str, hi: str, targets: list, row: Scope, stats: dict[int, str], consume: Consume, stores: bool = False
    ) -> list[str]:
        """Team-strided loops over the flat row range [lo, hi); ``lo`` is a multiple of VEC.

        A row of two runs is walked flat: the whole team works however short the inner run is (a nested loop
        over r1 left all but R2 / VEC of its threads idle; rotary embeddings have R2 = 128), and a pack never
        crosses an inner run (the vector path needs R2 % VEC == 0) unless it spans whole runs of a
        constant length (``span``). Each element's (r1, e) is split from its
        flat index once, then stepped with the stride's own split (GroupNorm's one kernel, runs of H*W under a
        per-channel affine, divided once an iteration and moved half the bytes a second of its earlier two
        kernels). A column's thread walks its run alone: nested loops, no division."""
        team, lane, v = self.loop_team, self.loop_lane, self.vec
        flat = bool(self.lay.r1) and self.variant not in ("col", "col_split")
        index = "f" if flat else "r1 * p.R2 + e"

        def head(step: str, strides: int = 1) -> list[str]:
            """The loop's head; ``strides``: the team's strides a thread steps at once (``ilp``)."""
            if flat:
                advance = "r1s += sq, es += sr, r1s += (es >= p.R2), es -= (es >= p.R2) ? p.R2 : 0"
                return [
                    f"{{ const int64_t f0 = ({lo}) + (int64_t)({lane}){step}, fs = (int64_t){team}{step};",
                    "  int64_t r1s = f0; int64_t es = optiml_divmod(r1s, p.R2);",
                    "  int64_t sq = fs; const int64_t sr = optiml_divmod(sq, p.R2);",
                    f"  for (int64_t f = f0; f < ({hi}); f += {strides} * fs, {', '.join([advance] * strides)}) {{",
                    "  const int64_t r1 = r1s, e = es, rr = f; (void)rr;",
                ]
            stride = f"(int64_t){_times(strides, team)}{step}"
            return [
                f"for (int64_t r1 = ({lo}) / p.R2; r1 < p.R1 && r1 * p.R2 < ({hi}); ++r1) {{",
                f"  const int64_t e0 = ({lo}) - r1 * p.R2 > 0 ? ({lo}) - r1 * p.R2 : 0;",
                f"  const int64_t e1 = ({hi}) - r1 * p.R2 < p.R2 ? ({hi}) - r1 * p.R2 : p.R2;",
                f"  for (int64_t e = e0 + (int64_t)({lane}){step}; e < e1; e += {stride}) {{",
                *([] if step else ["    const int64_t rr = r1 * p.R2 + e; (void)rr;"]),
            ]

        tail = ["  }", "}"]
        direct: set[int] = set()  # leaves read at the element's own index (a fused cat's parts read shifted)

        def read(leaf: Leaf) -> str:
            direct.add(leaf.index)
            self.direct.add(leaf.index)
            if self.smem_reads:
                return self.p.load_expr(leaf, f"s{leaf.index}", f"e - lo + h{leaf.index}")
            return self.load(leaf, "r1", "e")

        scalar = [*head(""), *self.body(targets, read, row, stats, consume, None, ("r1", "e")), *tail]
        if v == 1:
            return scalar
        if self.ilp == 2:
            vector = self.paired_packs(head(" * VEC", 2), flat, hi, targets, row, stats, consume, index, direct, stores)
            return ["if (VEC > 1) {", *vector, *tail, "} else {", *scalar, "}"]
        vector = [*head(" * VEC"), *self.pack_loads("r1", "e", direct)]
        vector += self.pack_decls() if stores else []
        # a part of a fused cat reads its leaves one element at a time, each where its part puts it
        elements = self.pack_elements(targets, row, stats, consume, index, self.element_at)
        if self.p.cat_dims:
            packed = self.cat_packed_elements(targets, row, stats, consume, index)
            elements = ["if (CATV) {", *packed, "} else {", *elements, "}"]
        vector += elements
        vector += self.pack_stores("r1", "e") if stores else []
        vector += tail
        return ["if (VEC > 1) {", *vector, "} else {", *scalar, "}"]

    def paired_packs(
        self,
        head: list[str],
        flat: bool,
        hi: str,
        targets: list,
        row: Scope,
        stats: dict[int, str],
        consume: Consume,
        index: str,
        direct: set[int],
        stores: bool,
    ) -> list[str]:
        """The vector loop's body with two packs a thread (``ilp=2``): both loaded before either is used, so a thread
        keeps two 16-byte loads in flight where it kept one (a row kernel whose registers allow two 512-thread
        blocks an SM had 16 KB in flight an SM, too little to keep HBM busy). The loop steps twice the team's
        stride (``head``: the loop's head so stepped); the second pack, one stride on, is used where it lies before
        ``hi``. Its element code is the first pack's, in a scope where ``f``, ``r1``, ``e`` and the packs name the
        second's."""
        lines = list(head)
        if flat:
            lines += [
                f"  const int64_t fn = f + fs; const bool more = fn < ({hi});",
                "  int64_t r1n = r1s + sq, en = es + sr; if (en >= p.R2) { r1n += 1; en -= p.R2; }",
            ]
        else:
            lines += [f"  const int64_t en = e + (int64_t){self.loop_team} * VEC, r1n = r1; const bool more = en < e1;"]
        lines += self.pack_loads("r1", "e", direct)
        lines += self.pack_loads("r1n", "en", direct, name="pn", guard="more")
        renamed = [
            f"const OptimlPack<{self.p.leaf_ctype(leaf)}, VEC> pk{leaf.index} = pn{leaf.index};"
            for leaf in self.full_leaves
            if leaf.index in direct
        ]
        pack = [
            *(self.pack_decls() if stores else []),
            *self.pack_elements(targets, row, stats, consume, index, self.element_at),
            *(self.pack_stores("r1", "e") if stores else []),
        ]
        shadow = ("const int64_t f = fn, " if flat else "const int64_t ") + "r1 = r1n, e = en; (void)r1; (void)e;"
        return [*lines, "{", *pack, "}", "if (more) {", shadow, *renamed, *pack, "}"]

    def cat_packed_elements(
        self, targets: list, row: Scope, stats: dict[int, str], consume: Consume, index: str
    ) -> list[str]:
        """A pack's elements where no pack straddles a fused cat's parts (``CATV``: the host checked that each
        part along a run starts at a multiple of VEC and that the leaves the parts read are aligned). Every
        element takes the part its pack's first element lies in, and each leaf a part reads is loaded once a
        pack, at the shifted index, where that part holds the pack (rotate-half: ``x``'s other half as one
        16-byte load, not four scalar ones)."""
        at = ("r1", "e")
        packs: dict[tuple[int, int, CatPart], str] = {}
        loads: list[str] = []

        def shifted(leaf: Leaf, m: int, part: CatPart, j: int) -> str:
            key = (leaf.index, m, part)
            if key not in packs:
                name = packs[key] = f"pc{len(packs)}"
                i, ctype = leaf.index, self.p.leaf_ctype(leaf)
                where, coord = self.shifted_offset(leaf, m, part, at), self.coord(m, at)
                loads.append(
                    f"OptimlPack<{ctype}, VEC> {name}; if ({part.offset} <= {coord} && {coord} < {part.end}) {{ "
                    f"{self._pack_read(leaf, name, where, where)} }}"
                )
                self.cat_packed.add(i)
            return self.p.load_expr(leaf, f"{packs[key]}.v", str(j))

        elements = self.pack_elements(targets, row, stats, consume, index, lambda j: at, shifted)
        return loads + elements  # the loads the elements asked for, ahead of them

    def pack_elements(
        self,
        targets: list,
        row: Scope,
        stats: dict[int, str],
        consume: Consume,
        index: str,
        at: Callable[[int], tuple[str, str]],
        shifted: Callable[..., str] | None = None,
    ) -> list[str]:
        """Element ``j`` of the pack for every ``j`` < VEC: its leaves from the packs, its (r1, e) ``at(j)``,
        a fused cat's shifted reads by ``shifted`` (given ``j`` as a keyword) where not the default."""
        out = []
        for j in range(self.vec):
            out.append(f"if (VEC > {j}) {{ const int64_t rr = {index} + {j}; (void)rr;")
            read = partial(shifted, j=j) if shifted is not None else None
            out += self.body(targets, partial(self._pack_elem, j=j), row, stats, consume, j, at(j), read)
            out.append("}")
        return out

    def element_at(self, j: int) -> tuple[str, str]:
        """Element ``j`` of the pack at (``r1``, ``e``): its (r1, e), a later run's where packs span runs."""
        if self.span:
            return f"(r1 + {j // self.span})", f"(e + {j % self.span})"
        return "r1", f"(e + {j})"

    def _pack_read(self, leaf: Leaf, name: str, offset: str, broadcast_offset: str) -> str:
        """Fill pack ``name`` from ``leaf`` at ``offset``, or with its one element at ``broadcast_offset`` where
        the leaf is broadcast along the inner run."""
        i, ctype = leaf.index, self.p.leaf_ctype(leaf)
        full = f"if (p.l{i}_r2 != 0) {name} = *reinterpret_cast<const OptimlPack<{ctype}, VEC>*>(p.l{i} + {offset}); "
        if self.span:  # a run's element repeated along it: VEC / span consecutive runs' elements, one pack
            part = f"OptimlPack<{ctype}, (VEC > {self.span} ? VEC / {self.span} : 1)>"
            full += (
                f"else if (p.l{i}_r1 != 0) {{ const {part} h = *reinterpret_cast<const {part}*>(p.l{i} + "
                f"{broadcast_offset}); for (int j = 0; j < VEC; ++j) {name}.v[j] = h.v[j / {self.span}]; }} "
            )
        return full + (
            f"else {{ const {ctype} s = p.l{i}[{broadcast_offset}]; for (int j = 0; j < VEC; ++j) {name}.v[j] = s; }}"
        )

    def _pack_elem(self, leaf: Leaf, j: int) -> str:
        return self.p.load_expr(leaf, f"pk{leaf.index}.v", str(j))

    def pack_loads(self, r1: str, e: str, direct: set[int], name: str = "pk", guard: str = "") -> list[str]:
        """A pack of each full leaf read at the element's own index (``direct``; a leaf only a fused cat's
        part reads, shifted, could run past its row), named ``name`` and the leaf's index, read where ``guard``."""
        out = []
        for leaf in self.full_leaves:
            if leaf.index not in direct:
                continue
            i, row_start = leaf.index, f"b_l{leaf.index} + ({r1}) * p.l{leaf.index}_r1"
            if self.smem_reads:  # the held segment: broadcast leaves were spread along it when it was filled
                ctype = self.p.leaf_ctype(leaf)
                read = f"{name}{i} = *reinterpret_cast<const OptimlPack<{ctype}, VEC>*>(s{i} + ({e}) - lo + h{i});"
            else:
                read = self._pack_read(leaf, f"{name}{i}", f"{row_start} + ({e})", row_start)
            out.append(
                f"OptimlPack<{self.p.leaf_ctype(leaf)}, VEC> {name}{i}; "
                + (f"if ({guard}) {{ {read} }}" if guard else read)
            )
        return out

    def pack_decls(self) -> list[str]:
        return [
            f"OptimlPack<{self.ctx.outputs[self.p.outputs.index(o)].ctype}, VEC> so{self.p.outputs.index(o)};"
            for o in self.full_outs
        ]

    def pack_stores(self, r1: str, e: str) -> list[str]:
        out = []
        for o in self.full_outs:
            k = self.p.outputs.index(o)
            ctype = self.ctx.outputs[k].ctype
            out.append(f"optiml_store_pack<{ctype}, VEC>(p.o{k} + b_o{k} + ({r1}) * p.o{k}_r1 + ({e}), so{k});")
        return out

    def store_full(self, values: list[str], j: int | None) -> list[str]:
        out = []
        for (vid, dmap), value in zip(self.full_outs, values, strict=True):
            k = self.p.outputs.index((vid, dmap))
            converted = from_compute(value, self.p.g.type(vid).dtype)
            if j is None:
                out.append(f"p.o{k}[b_o{k} + r1 * p.o{k}_r1 + e * p.o{k}_r2] = {converted};")
            else:
                out.append(f"so{k}.v[{j}] = {converted};")
        return out

    def cache_decl(self) -> list[str]:
        return [f"OptimlPack<{self.p.leaf_ctype(leaf)}, VEC> c{leaf.index}[{self.items}];" for leaf in self.full_leaves]

    def cache_fill(self) -> list[str]:
        out = [
            f"#pragma unroll\nfor (int it = 0; it < {self.items}; ++it) {{",
            f"  const int64_t e = ((int64_t)it * {self.team} + {self.lane}) * VEC;",
            "  if (e < p.R2) {",
        ]
        for leaf in self.full_leaves:
            i, ctype = leaf.index, self.p.leaf_ctype(leaf)
            out.append(
                f"    if (VEC > 1 && p.l{i}_r2 != 0) c{i}[it] = *reinterpret_cast<const OptimlPack<{ctype}, VEC>*>"
                f"(p.l{i} + b_l{i} + e); else {{ for (int j = 0; j < VEC; ++j) c{i}[it].v[j] = "
                f"p.l{i}[b_l{i} + (e + j) * p.l{i}_r2]; }}"
            )
        return [*out, "  }", "}"]

    def cached_loops(
        self, targets: list, row: Scope, stats: dict[int, str], consume: Consume, stores: bool = False
    ) -> list[str]:
        out = []
        for it in range(self.items):
            out += [
                f"{{ const int64_t r1 = 0; const int64_t e = ((int64_t){it} * {self.team} + {self.lane}) * VEC;",
                "(void)r1; if (e < p.R2) {",
            ]
            out += self.pack_decls() if stores and self.vec > 1 else []
            for j in range(self.vec):
                out.append(f"if (VEC > {j}) {{ const int64_t rr = e + {j}; (void)rr;")

                def code(leaf: Leaf, it: int = it, j: int = j) -> str:
                    return self.p.load_expr(leaf, f"c{leaf.index}[{it}].v", str(j))

                out += self.body(targets, code, row, stats, consume, j if self.vec > 1 else None)
                out.append("}")
            out += self.pack_stores("0", "e") if stores and self.vec > 1 else []
            out.append("}}")
        return out

    # ---- reductions ---------------------------------------------------------------------------------
    def acc_type(self, red: Reduction) -> str:
        if red.kind in ("any", "all"):
            return "bool"
        if red.kind in ("sumsq", "sumexp"):
            return "double"  # Σx² − (Σx)²/n: double keeps the difference at the reference's accuracy
        source = self.p.value_type(red.source[0])
        if source == "bool" and red.kind in ("sum", "mean", "prod"):
            return "int64_t"  # PyTorch sums booleans as int64
        if source == "float" and red.kind in ("sum", "mean", "prod"):
            # one thread may add up millions of elements of a long row: fp64 keeps the result within
            # the reference's (cascaded fp32) accuracy at no cost to a memory-bound kernel
            return "double"
        return source

    def acc_init(self, red: Reduction) -> list[str]:
        t, k = self.acc_type(red), red.out
        if red.is_arg:
            start = "INFINITY" if red.kind == "argmin" else "-INFINITY"
            return [f"{t} a{k} = ({t}){start}; int64_t ai{k} = INT64_MAX;"]
        if red.kind == "sumexp":  # the sum of exp(x - am) and the running max am
            return [f"double a{k} = 0.0; {self.p.value_type(red.source[0])} am{k} = -INFINITY;"]
        ident = REDUCE_IDENTITY["sum" if red.kind == "sumsq" else red.kind]
        if ident in ("inf", "-inf"):
            return [f"{t} a{k} = ({t})({'-' if ident == '-inf' else ''}INFINITY);"]
        return [f"{t} a{k} = {literal(ident, t)};"]  # type: ignore[arg-type]

    def acc_update(self, red: Reduction, value: str) -> str:
        t, k = self.acc_type(red), red.out
        if red.is_arg:
            return f"optiml_{red.kind}_upd<{t}>(a{k}, ai{k}, {value}, rr);"
        if red.kind == "sumsq":
            return f"{{ const double q = (double)({value}); a{k} = a{k} + q * q; }}"
        if red.kind == "sumexp":
            v = self.p.value_type(red.source[0])
            return f"optiml_sumexp_add<{v}>(a{k}, am{k}, ({v})({value}));"
        return f"a{k} = {_COMBINE[red.kind].format(a=f'a{k}', b=value, t=t)};"

    def second_accumulator(self, red: Reduction) -> tuple[str, str] | None:
        """The name prefix and type of a reduction's second accumulator: an arg-reduction's index, the online
        sum's running max; None for the others."""
        if red.is_arg:
            return "ai", "int64_t"
        if red.kind == "sumexp":
            return "am", self.p.value_type(red.source[0])
        return None

    def team_reduce(self, reds: list[Reduction]) -> list[str]:
        out: list[str] = []
        if self.team == 1:
            return out
        if self.variant == "col_split":
            return self._lanes_reduce(reds)
        for red in reds:
            k, t = red.out, self.acc_type(red)
            if red.is_arg:
                out.append(
                    f"for (int o = 16; o > 0; o >>= 1) {{ const {t} v2 = __shfl_xor_sync(0xffffffffu, a{k}, o); "
                    f"const int64_t i2 = __shfl_xor_sync(0xffffffffu, ai{k}, o); "
                    f"optiml_{red.kind}_upd<{t}>(a{k}, ai{k}, v2, i2); }}"
                )
            elif red.kind == "sumexp":
                v = self.p.value_type(red.source[0])
                out.append(
                    f"for (int o = 16; o > 0; o >>= 1) {{ const double s2 = __shfl_xor_sync(0xffffffffu, a{k}, o); "
                    f"const {v} m2 = __shfl_xor_sync(0xffffffffu, am{k}, o); "
                    f"optiml_sumexp_merge<{v}>(a{k}, am{k}, s2, m2); }}"
                )
            else:
                comb = _COMBINE[red.kind].format(a=f"a{k}", b=f"__shfl_xor_sync(0xffffffffu, a{k}, o)", t=t)
                out.append(f"for (int o = 16; o > 0; o >>= 1) a{k} = {comb};")
            if self.team <= 32:
                continue
            nw = self.team // 32
            self._smem += 1
            sm, smi = f"sm{self._smem}_{k}", f"smi{self._smem}_{k}"
            second = self.second_accumulator(red)
            out.append(f"__shared__ {t} {sm}[{nw}];" + (f" __shared__ {second[1]} {smi}[{nw}];" if second else ""))
            out.append(
                f"if ((threadIdx.x & 31) == 0) {{ {sm}[threadIdx.x >> 5] = a{k};"
                + (f" {smi}[threadIdx.x >> 5] = {second[0]}{k};" if second else "")
                + " }"
            )
            out.append("__syncthreads();")
            out.append(f"a{k} = {sm}[0];" + (f" {second[0]}{k} = {smi}[0];" if second else ""))
            out.append(f"for (int w = 1; w < {nw}; ++w) {self.merge(red, f'{sm}[w]', f'{smi}[w]')}")
            out.append("__syncthreads();")
        return out

    def merge(self, red: Reduction, value: str, second: str) -> str:
        """The statement folding another partial (``value``, and ``second``: its arg-index or running max) into
        the reduction's accumulators."""
        k, t = red.out, self.acc_type(red)
        if red.is_arg:
            return f"optiml_{red.kind}_upd<{t}>(a{k}, ai{k}, {value}, {second});"
        if red.kind == "sumexp":
            return f"optiml_sumexp_merge<{self.p.value_type(red.source[0])}>(a{k}, am{k}, {value}, {second});"
        return f"a{k} = {_COMBINE[red.kind].format(a=f'a{k}', b=value, t=t)};"

    def _lanes_reduce(self, reds: list[Reduction]) -> list[str]:
        """Combine the ``lanes`` partials of each column through shared memory (every lane gets the result)."""
        out: list[str] = []
        col, lanes, cols = f"(threadIdx.x % {self.cols})", self.lanes, self.cols
        for red in reds:
            k, t = red.out, self.acc_type(red)
            self._smem += 1
            sm, smi = f"sm{self._smem}_{k}", f"smi{self._smem}_{k}"
            second = self.second_accumulator(red)
            out.append(
                f"__shared__ {t} {sm}[{lanes}][{cols}];"
                + (f" __shared__ {second[1]} {smi}[{lanes}][{cols}];" if second else "")
            )
            keep_second = f" {smi}[{self.lane}][{col}] = {second[0]}{k};" if second else ""
            out.append(f"{sm}[{self.lane}][{col}] = a{k};" + keep_second)
            out.append("__syncthreads();")
            out.append(f"a{k} = {sm}[0][{col}];" + (f" {second[0]}{k} = {smi}[0][{col}];" if second else ""))
            if red.is_arg:
                out.append(
                    f"for (int w = 1; w < {lanes}; ++w) optiml_{red.kind}_upd<{t}>(a{k}, ai{k}, {sm}[w][{col}], "
                    f"{smi}[w][{col}]);"
                )
            else:  # (online sums are row kernels' only: no column combines one)
                comb = _COMBINE[red.kind].format(a=f"a{k}", b=f"{sm}[w][{col}]", t=t)
                out.append(f"for (int w = 1; w < {lanes}; ++w) a{k} = {comb};")
            out.append("__syncthreads();")
        return out

    def finish(self, red: Reduction, stats: dict[int, str], row: Scope | None = None) -> list[str]:
        k, t = red.out, self.p.value_type(red.out)
        if red.is_arg:
            stats[k] = f"ai{k}"
            return []
        stats[k] = f"st{k}"
        if red.kind == "sumsq":  # the partner's sum is combined and finished first (same stage, earlier in order)
            assert red.partner is not None
            m = red.partner.out
            lines = [f"double q{k} = a{k} - a{m} * a{m} / (double)p.R; if (q{k} < 0.0) q{k} = 0.0;"]
            scale = " / (double)p.R" if red.node.op == "mean" else ""
            return [*lines, f"const {t} st{k} = ({t})(q{k}{scale});"]
        if red.kind == "sumexp":  # its max is finished first (same stage, earlier in order): the shift follows
            assert row is not None, "online sums are rendered by single-kernel variants only"
            start = len(row.lines)
            shift = self.p.emit(red.shift, self.p.frames[red.shift], row, stats, self.gather_renderer(row, stats))
            lines = row.lines[start:]
            del row.lines[start:]
            v = self.p.value_type(red.source[0])
            return [*lines, f"const {t} st{k} = ({t})optiml_sumexp_at<{v}>(a{k}, am{k}, ({v})({shift}));"]
        if red.kind == "mean":
            return [f"const {t} st{k} = ({t})(a{k} / ({self.acc_type(red)})p.R);"]
        return [f"const {t} st{k} = ({t})a{k};"]

    def stage(self, s: int) -> list[Reduction]:
        return [r for r in self.p.reductions if r.stage == s]

    def store_outer(self, row: Scope, stats: dict[int, str], guard: str) -> list[str]:
        start = len(row.lines)
        gather = self.gather_renderer(row, stats)
        writes = []
        for vid, dmap in self.outer_outs:
            value = self.p.emit(vid, dmap, row, stats, gather)
            k = self.p.outputs.index((vid, dmap))
            writes.append(f"p.o{k}[row] = {from_compute(value, self.p.g.type(vid).dtype)};")
        computed = row.lines[start:]
        del row.lines[start:]
        return computed + ([f"if ({guard}) {{", *writes, "}"] if writes else [])

    def pass_over_row(
        self, lo: str, hi: str, targets: list, row: Scope, stats: dict[int, str], consume: Consume, stores: bool = False
    ) -> list[str]:
        """One pass: per-row values it needs first, then the loops (register-cached when enabled)."""
        start = len(row.lines)
        loops = self.loops(lo, hi, targets, row, stats, consume, stores)
        if self.cached:
            cached = self.cached_loops(targets, row, stats, consume, stores)
            loops = ["if (cached) {", *cached, "} else {", *loops, "}"]
        needed = row.lines[start:]
        del row.lines[start:]
        return needed + loops

    # ---- whole kernels --------------------------------------------------------------------------------
    def render(self) -> KernelCode:
        if self.variant == "split_row":
            return self.render_split()
        if self.variant == "cluster_row":
            return render_cluster(self)
        if self.chunked:
            return self.render_chunks()
        return self.render_single()

    def render_single(self) -> KernelCode:
        pre, team = self.pre, self.team
        per_block = self.threads // team if team > 1 else self.threads
        if self.variant == "col_split":
            per_block = self.cols
        row_expr, step = {
            "col": ("(int64_t)blockIdx.x * blockDim.x + threadIdx.x", "(int64_t)gridDim.x * blockDim.x"),
            "col_split": (f"(int64_t)blockIdx.x * {self.cols}", f"(int64_t)gridDim.x * {self.cols}"),
            "warp_row": (
                f"(int64_t)blockIdx.x * {per_block} + (threadIdx.x >> 5)",
                f"(int64_t)gridDim.x * {per_block}",
            ),
        }.get(self.variant, ("(int64_t)blockIdx.x", "(int64_t)gridDim.x"))
        row = self.row_scope()
        stats: dict[int, str] = {}
        body: list[str] = []
        # col_split blocks iterate together (barriers): a lane past the last column runs empty loops
        hi, guard = ("hi_r", "active && ") if self.variant == "col_split" else ("p.R", "")
        for s in range(self.p.stages):
            reds = self.stage(s)

            def consume(vals: list[str], j: int | None, reds: list[Reduction] = reds) -> list[str]:
                return [self.acc_update(r, v) for r, v in zip(reds, vals, strict=True)]

            inits = [line for r in reds for line in self.acc_init(r)]
            body += inits + self.pass_over_row("0", hi, [r.source for r in reds], row, stats, consume)
            body += self.team_reduce(reds)
            for r in reds:
                body += self.finish(r, stats, row)
        if self.full_outs:
            body += self.pass_over_row("0", hi, list(self.full_outs), row, stats, self.store_full, stores=True)
        body += self.store_outer(row, stats, f"{guard}{self.lane} == 0")
        head = f"__global__ void __launch_bounds__({self.threads}) {pre}_kernel(const {pre}_P p) {{"
        lines = [f"{self.template_head()}\n{head}"]
        # block-wide teams must keep every thread in the loop (barriers); warps and threads may leave
        if self.variant == "col_split":
            lines.append(f"  for (int64_t base = {row_expr}; base < p.rows; base += {step}) {{")
            lines.append(f"  const int64_t row = base + threadIdx.x % {self.cols}; const bool active = row < p.rows;")
            lines.append("  const int64_t hi_r = active ? p.R : 0;")
        else:
            lines.append(f"  for (int64_t row = {row_expr}; row < p.rows; row += {step}) {{")
        lines += self.row_prologue()
        if self.cached:
            lines += self.cache_decl()
            lines.append(f"const bool cached = p.R1 == 1 && p.R2 <= (int64_t){team} * VEC * {self.items};")
            lines += ["if (cached) {", *self.cache_fill(), "}"]
        lines += body
        lines.append("  }\n}")
        struct, fill = self.host_struct([])
        grid = f"{pre}_grid"
        fill.append(f"const int64_t {grid}_n = (P.rows + {per_block} - 1) / {per_block};")
        fill.append(
            f"const unsigned {grid} = (unsigned)({grid}_n < 1 ? 1 : {grid}_n > 2147483647LL ? 2147483647LL : {grid}_n);"
        )
        host = "\n".join(fill) + "\n" + self.launch(f"{pre}_kernel", grid, "P")
        return KernelCode(device=struct + "\n" + "\n".join(lines), host=host)

    def render_split(self) -> KernelCode:
        pre = self.pre
        bps = int(self.cfg.get("blocks_per_sm", 4))
        sms = self.ctx.facts.sm_count
        kernels: list[str] = []
        launches: list[str] = []
        bounds = (  # the flat range this block's loops cover (all of it where the blocks interleave)
            "  const int64_t lo = 0, hi = p.R;"
            if self.interleave
            else "  const int64_t lo = (int64_t)blockIdx.x * p.clen;\n"
            "  const int64_t hi = lo + p.clen < p.R ? lo + p.clen : p.R;"
        )
        for s in range(self.p.stages + 1):
            final = s == self.p.stages
            body = self.stage_body(s, ("lo", "hi"), "", "blockDim.x")
            name = f"{pre}_s{s}"
            kernels.append(
                f"{self.template_head()}\n__global__ void __launch_bounds__({self.threads}) "
                f"{name}(const {pre}_P p, char* ws) {{\n"
                f"{bounds}\n"
                "  (void)ws; (void)hi;\n"
                "  for (int64_t row = blockIdx.y; row < p.rows; row += gridDim.y) {"
            )
            kernels += self.row_prologue() + body
            kernels.append("__syncthreads();\n  }\n}")
            gx = "P.C" if (not final or self.full_outs) else "1"
            grid = f"dim3((unsigned){gx}, (unsigned)(P.rows < 65535 ? P.rows : 65535))"
            launches.append(self.launch(name, grid, f"P, {self.ctx.workspace}"))
        unit = self.threads * self.vec
        cap = min(sms * bps, 4096)
        fields, placed, workspace = self.partial_fields(cap)
        struct, fill = self.host_struct(["int64_t C, clen;", *fields])
        # as many chunks as fill the GPU in full waves (optiml_wave_chunks), or a block a tile (blocks_per_sm=0)
        chunks = "most < 2147483647LL ? most : 2147483647LL" if bps == 0 else f"optiml_wave_chunks(P.rows, {cap}, most)"
        fill += [
            f"{{ const int64_t most = (P.R + {unit} - 1) / {unit};",
            f"  P.C = {chunks}; if (P.C < 1) P.C = 1;",
            f"  P.clen = ((P.R + P.C - 1) / P.C + {unit} - 1) / {unit} * {unit};",
            "  P.C = P.R > 0 ? (P.R + P.clen - 1) / P.clen : 1; }",
            *placed,
        ]
        host = "\n".join(fill) + "\n" + "\n".join(launches)
        return KernelCode(device=struct + "\n" + "\n".join(kernels), host=host, workspace_bytes=workspace)

    def partial_fields(self, cap: int) -> tuple[list[str], list[str], str]:
        """The workspace of the stages' partial results, ``P.C`` of them a row (at most ``cap``): the struct's
        offset fields, the host lines placing them, and the bytes to reserve at the traced shape."""
        fields = [f"int64_t off{r.out}, offi{r.out};" for r in self.p.reductions]
        fill: list[str] = []
        offset = "(int64_t)0"
        ws_terms = []
        rows_expr = " * ".join(self.p.domain_size(m) for m in self.lay.kept) or "(int64_t)1"
        for r in self.p.reductions:
            t = self.acc_type(r)
            fill.append(f"P.off{r.out} = {offset}; P.offi{r.out} = 0;")
            offset = f"(P.off{r.out} + ((P.rows * P.C * (int64_t)sizeof({t}) + 255) / 256 * 256))"
            ws_terms.append(f"(({rows_expr}) * {cap} * (int64_t)sizeof({t}) + 255) / 256 * 256")
            if r.is_arg:
                fill.append(f"P.offi{r.out} = {offset};")
                offset = f"(P.offi{r.out} + (P.rows * P.C * 8 + 255) / 256 * 256)"
                ws_terms.append(f"(({rows_expr}) * {cap} * 8 + 255) / 256 * 256")
        return fields, fill, "(" + " + ".join(ws_terms) + ")" if ws_terms else "0"

    def stage_body(self, s: int, span: tuple[str, str], active: str, step: str) -> list[str]:
        """Launch ``s``'s statements for one row (a column) of the variants that launch a kernel a stage: the
        earlier stages' results combined from their partials (``step``: the team's stride over them), then stage
        ``s``'s reductions over the block's range ``span`` (C expressions) written as this block's partials — or,
        after the last stage, the full outputs over that range and, from the first block along the row, the outer
        ones. ``active``: a condition prefix for threads that may have no row ("" or "active && ")."""
        lo, hi = span
        leader = f"{active}{self.lane} == 0"
        row = self.row_scope()
        stats: dict[int, str] = {}
        body = self.combined_partials([r for r in self.p.reductions if r.stage < s], stats, active, step)
        if s == self.p.stages:
            if self.full_outs:
                body += self.pass_over_row(lo, hi, list(self.full_outs), row, stats, self.store_full, True)
            return body + self.store_outer(row, stats, f"{leader} && blockIdx.x == 0")
        mine = self.stage(s)

        def consume(vals: list[str], j: int | None) -> list[str]:
            return [self.acc_update(r, v) for r, v in zip(mine, vals, strict=True)]

        body += [line for r in mine for line in self.acc_init(r)]
        body += self.pass_over_row(lo, hi, [r.source for r in mine], row, stats, consume)
        body += self.team_reduce(mine)
        for r in mine:
            k, t = r.out, self.acc_type(r)
            write = f"(({t}*)(ws + p.off{k}))[row * p.C + blockIdx.x] = a{k};"
            if r.is_arg:
                write += f" ((int64_t*)(ws + p.offi{k}))[row * p.C + blockIdx.x] = ai{k};"
            body.append(f"if ({leader}) {{ {write} }}")
        return body

    def combined_partials(self, reds: list[Reduction], stats: dict[int, str], guard: str, step: str) -> list[str]:
        """Each reduction of ``reds`` combined from its ``P.C`` partials in the workspace (this thread's share:
        chunks ``lane``, ``lane + step``, …; nothing where ``guard`` is false), the team's shares combined, finished."""
        body: list[str] = []
        for r in reds:
            k, t = r.out, self.acc_type(r)
            body += self.acc_init(r)
            part = f"(({t}*)(ws + p.off{k}))[row * p.C + c]"
            if r.is_arg:
                upd = f"optiml_{r.kind}_upd<{t}>(a{k}, ai{k}, {part}, ((int64_t*)(ws + p.offi{k}))[row * p.C + c]);"
            else:
                upd = f"a{k} = {_COMBINE[r.kind].format(a=f'a{k}', b=part, t=t)};"
            body.append(f"for (int64_t c = {self.lane}; {guard}c < p.C; c += {step}) {upd}")
            body += self.team_reduce([r]) + self.finish(r, stats)
        return body

    def render_chunks(self) -> KernelCode:
        """``col_chunks``: launch ``s`` of ``stages + 1`` has a block a (chunk, column tile); each reduces its chunk
        of its columns for stage ``s`` (the earlier stages' results combined first from every chunk's partials) and
        writes its partials; the last launch writes the full outputs over its chunk, the first chunk the rest."""
        pre, cols, lanes = self.pre, self.cols, self.lanes
        bps = int(self.cfg.get("blocks_per_sm", 4))
        cap = min(self.ctx.facts.sm_count * bps, 4096)
        kernels: list[str] = []
        launches: list[str] = []
        for s in range(self.p.stages + 1):
            final = s == self.p.stages
            body = self.stage_body(s, ("lo_r", "hi_r"), "active && ", f"{lanes}")
            name = f"{pre}_s{s}"
            kernels += [
                f"{self.template_head()}\n__global__ void __launch_bounds__({self.threads}) "
                f"{name}(const {pre}_P p, char* ws) {{",
                "  const int64_t lo = (int64_t)blockIdx.x * p.clen, hi = lo + p.clen < p.R ? lo + p.clen : p.R;",
                "  (void)ws;",
                # the block's threads meet at barriers: a lane past the last column runs empty loops
                f"  for (int64_t base = (int64_t)blockIdx.y * {cols}; base < p.rows;"
                f" base += (int64_t)gridDim.y * {cols}) {{",
                f"  const int64_t row = base + threadIdx.x % {cols}; const bool active = row < p.rows;",
                "  const int64_t lo_r = active ? lo : 0, hi_r = active ? hi : 0;",
                "  (void)lo_r; (void)hi_r;",
                *self.row_prologue(),
                *body,
                "__syncthreads();\n  }\n}",
            ]
            gx = "P.C" if (not final or self.full_outs) else "1"
            tiles = f"((P.rows + {cols - 1}) / {cols})"
            grid = f"dim3((unsigned){gx}, (unsigned)({tiles} < 65535 ? {tiles} : 65535))"
            launches.append(self.launch(name, grid, f"P, {self.ctx.workspace}"))
        fields, placed, workspace = self.partial_fields(cap)
        struct, fill = self.host_struct(["int64_t C, clen;", *fields])
        fill += [  # chunks enough for the blocks to fill the GPU in full waves, of at least 64 elements a lane
            f"{{ const int64_t tiles = (P.rows + {cols - 1}) / {cols};",
            f"  const int64_t most = (P.R + {64 * lanes - 1}) / {64 * lanes};",
            f"  P.C = optiml_wave_chunks(tiles, {cap}, most);",
            "  P.clen = (P.R + P.C - 1) / P.C; if (P.clen < 1) P.clen = 1;",
            "  P.C = P.R > 0 ? (P.R + P.clen - 1) / P.clen : 1; }",
            *placed,
        ]
        host = "\n".join(fill) + "\n" + "\n".join(launches)
        return KernelCode(device=struct + "\n" + "\n".join(kernels), host=host, workspace_bytes=workspace)
