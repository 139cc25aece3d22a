"""GEMM template: matmul / bmm / mv / linear / addmm with a fused element-wise epilogue.

A GEMM group (:mod:`optiml.templates.plan`) is one canonical ``matmul`` node — ``torch.matmul``
semantics over stored operands, attrs ``trans_a`` / ``trans_b`` (an operand's last two dims are
swapped in memory) and ``batch`` (output batch dims; each operand's own batch dims broadcast into
them, right-aligned, so a broadcast batch reads the same matrix again with stride 0) — followed
by the element-wise nodes fused into its store. Every size is read at run time: the host code
derives ``M, N, K``, the operand strides and the batch strides from the operands' ABI shapes.

Variants (structural choices):

* ``simt`` (float32 tasks): register-tiled SGEMM in exact fp32 (``fmaf``, no TF32). A block of
  ``(bm/tm)·(bn/tn)`` threads computes a ``bm × bn`` tile, each thread a ``tm × tn`` sub-tile held
  in registers; ``bk``-deep slices of A and B are staged in shared memory, k-major (A transposed on
  the way in when it is k-contiguous, padded against bank conflicts), double buffered: the next
  slice's global loads are in flight (in registers) while the current one is multiplied, one
  barrier per slice. A thread's rows and columns are groups of 4 spread a quarter-tile apart, so
  its shared-memory reads are conflict-free 16-byte loads. Global loads are 16 bytes when the host
  sees 16-byte-aligned operands whose contiguous dims and strides are multiples of 4, else the
  scalar build of the same kernel runs (odd ``M``, ``N``, ``K``, offset views; it copies the next
  slice straight to shared memory after the multiply, no prefetch registers). Blocks walk the
  tiles in groups of 8 tile-rows (L2 reuse); batches are decoded from the block index.
* ``mma`` (float16 / bfloat16 tasks): tensor cores through ``mma.sync.m16n8k16`` (inline PTX)
  with fp32 accumulation. ``wm × wn`` warps per block, each owning a ``(bm/wm) × (bn/wn)`` warp
  tile of 16×8 MMA tiles. The 16-byte build (:mod:`optiml.templates.gemm.mma`) is a ``stages``-deep
  ``cp.async`` pipeline into dynamic shared memory with ``ldmatrix`` fragment loads (``.trans`` for
  an operand whose contiguous dim is not k); the scalar build keeps A as ``[m][k]`` and B as
  ``[n][k]`` in static shared memory, double buffered through registers, on a tile shrunk to fit.
* ``wgmma`` (fp16 / bf16 on sm_90a, A k-major): Hopper warp-group MMA from 128-byte-swizzled shared
  memory through descriptors (:mod:`optiml.templates.gemm.wgmma`); the scalar ``mma`` build when the
  operands do not allow 16-byte copies.
* ``wgmma_tma`` (the same products): the same MMAs fed by TMA copies from a producer warp group through
  mbarrier rings, no block-wide barrier in the k loop (:mod:`optiml.templates.gemm.wgmma_tma`); a batch
  runs the ``wgmma`` kernel of the same tile, unaligned operands the scalar ``mma`` build.
* ``tf32x3`` (float32 tasks, sm_80 and newer): each fp32 value split into two TF32 parts, three
  ``mma.sync.m16n8k8`` per tile (small terms first), each ``bk`` slice summed into a zeroed partial
  and added in fp32: fp32 accuracy on tensor cores (:mod:`optiml.templates.gemm.tf32`). A variant like
  any other: kept only where it verifies under the task's tolerance. A single product with an odd
  contiguous dim pads that operand into the workspace first; K is split as for ``simt``.
* ``tf32x3_wgmma`` (float32 on sm_90a, A k-major): the same 3xTF32 arithmetic on Hopper warp-group
  MMAs, each operand split once when its slice is staged into 128-byte-swizzled big / small tiles
  (:mod:`optiml.templates.gemm.tf32_wgmma`); the ``tf32x3`` 4-byte build of the same tile when the
  operands do not allow 16-byte loads. A seed, not the rule: on the suite the ``mma.sync`` kernel
  measured faster once its split took two integer operations (compute_quality_suite.json).
* ``tf32x3_tma`` (float32 on sm_90a, A k-major): the same arithmetic fed by TMA copies of the raw fp32
  slices from a producer warp group; the consumers split A into registers (the MMA reads A from
  registers) and B once into shared big / small tiles (:mod:`optiml.templates.gemm.tf32_tma`). A
  batch, or operands TMA cannot address, run the ``tf32x3`` builds of the same tile.
* ``gemv`` (any float dtype; the rule for ``min(M, N) <= 16``): the small side (``J``, ``rows`` of it
  per pass) against the big side (``I``). When the big operand is k-contiguous (``x @ W.T`` with a
  small batch, ``A @ v``) one to all of a block's warps own one big index, each over one part of its
  k range (more warps while the blocks would give the SMs fewer than four rounds of resident blocks:
  a last partial round idles SMs), its lanes stride over k (16-byte loads when aligned, up to four in
  flight a lane), a shuffle tree sums each of the ``rows`` dot products and the parts are added in
  order through shared memory; otherwise a thread owns one
  big index and walks k (coalesced across the warp). With too few blocks to fill the GPU, K is split
  into slices whose partial sums go to the workspace and a second kernel adds them in slice order
  (deterministic) and applies the epilogue.

The epilogue runs on each output element in fp32 (``cexpr.pointwise``) before the one rounding to
the stored dtype: the product, bias-like leaves (a leaf of shape ``[N]`` is read at ``n``, one equal
to the output at the output's index, others through strides derived at run time, size-1 dims
broadcast), constants and values recomputed from inputs. Every group output (the product itself,
or any fused value a later kernel reads) is stored at the output's linear index; fp32 outputs use
16-byte stores when aligned. Half-precision code is emitted only for half tasks (the fp32-strict
screening rule rejects it otherwise).

The planner's rule (:meth:`GemmTemplate.default`) on the primary (first) shape set:
``min(M, N) <= 16`` → ``gemv`` (``rows`` = the small side rounded up to a power of two, at most 16);
else float32 on sm_90a with A k-major, a single product → ``tf32x3_tma`` with 4 stages, the first of
128×128, 128×64, 64×64 whose tiles cover every SM, else 64×64 when K is long enough to split; other
float32 → ``tf32x3`` 64×128×32 on 2×2 warps, 4 stages, when TF32 MMAs exist, both operands'
contiguous dims are multiples of 4 (or it is a single product, whose odd operand is padded) and its
tiles cover every SM, else ``simt`` 64×64×16 / 8×8 when
there are at least four 64×64 tiles per SM, 128×128×8 / 8×8 when the 128×128 tiles cover every SM,
128×64×8 / 8×8 when those do, else 64×64×8 / 8×4; half with A k-major on sm_90a → ``wgmma_tma`` (a
single product) or ``wgmma`` (a batch) with 4 stages, the first of 128×256, 128×128, 64×128 whose tiles
cover every SM, else 64×64; other half
products → ``mma`` 128×128×64 on 2×2 warps, 3 stages, when its tiles cover every SM, else 64×64×32
on 2×2, 4 stages (the choices are the fastest measured by ``benchmarks/gemm_sweep.py`` on the H200).
"""

from __future__ import annotations

from typing import Any

from optiml.graph.sizes import SizeResolver
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    RenderContext,
    Space,
    TemplateError,
    c_type,
)
from optiml.templates.gemm import mma as gemm_mma
from optiml.templates.gemm import tf32 as gemm_tf32
from optiml.templates.gemm import tf32_tma as gemm_tf32_tma
from optiml.templates.gemm import tf32_wgmma as gemm_tf32_wgmma
from optiml.templates.gemm import wgmma as gemm_wgmma
from optiml.templates.gemm import wgmma_tma as gemm_wgmma_tma
from optiml.templates.gemm.common import (
    MAX_LOADS,
    SPLIT_MIN_K,
    STATIC_SMEM,
    common_code,
    launch_terms,
    loads_per_thread,
    prob_struct,
    split_plan,
    split_setup,
    splitk_code,
)
from optiml.templates.gemm.gemv import gemv_code
from optiml.templates.gemm.problem import HALF, Problem, cdiv
from optiml.templates.gemm.simt import mma_kernel, simt_kernel, simt_launch
from optiml.templates.group import Group
from optiml.templates.product.epilogue import Epilogue
from optiml.templates.product.mma import tensor_cores_take_tf32
from optiml.templates.ptx import INCLUDE as PTX_INCLUDE

SIMT_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (32, 64, 128),
    "bn": (32, 64, 128),
    "bk": (8, 16, 32),
    "tm": (4, 8),
    "tn": (4, 8),
}
MMA_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "bk": (32, 64),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
    "stages": (2, 3, 4),
}
WGMMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128, 256), "stages": (2, 3, 4)}
WGMMA_TMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128, 192, 256), "stages": (3, 4, 5, 6)}
TF32_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "bk": (16, 32),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
    "stages": (2, 3, 4),
}
TF32_WGMMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128)}
TF32_TMA_KNOBS: dict[str, tuple[Any, ...]] = {"bm": (64, 128), "bn": (64, 128), "stages": (2, 3, 4)}
#: the fastest tf32x3 tile at 4096^3 (a @ b), within 1.5 % of the best for a.T @ b (H200, gemm_sweep_tf32x3.json)
TF32_DEFAULT = GroupConfig.of("tf32x3", bm=64, bn=128, bk=32, wm=2, wn=2, stages=4)
GEMV_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (128, 256), "rows": (1, 2, 4, 8, 16)}
SMALL_SIDE = 16  # min(M, N) at most this: the gemv variant is the rule


def _tf32_units(p: str, config: GroupConfig, prob: Problem, epi: Epilogue, facts: DeviceFacts) -> list[str]:
    """Device code of the 3xTF32 variants: the 16-byte build (``mma.sync``, the warp-group kernel of
    ``tf32x3_wgmma``, or the TMA kernel of ``tf32x3_tma`` ahead of the ``mma.sync`` one), the ``mma.sync``
    4-byte build of the same block tile, split-K, padding, launch."""
    tiles = config if config.variant == "tf32x3" else gemm_tf32_wgmma.fallback_config(config)
    bm, bn, bk = (int(tiles.get(k)) for k in ("bm", "bn", "bk"))
    units: list[str] = []
    vec_build, first = None, ""
    if config.variant == "tf32x3_wgmma":
        units.append(gemm_tf32_wgmma.kernel(p, config, prob.a_k_major, prob.b_k_major))
        vec_build = (f"{p}_tf32w_vec", gemm_tf32_wgmma.threads(config), gemm_tf32_wgmma.smem_bytes(bm, bn))
    elif config.variant == "tf32x3_tma":  # tried first; the mma.sync 16-byte build stays for what TMA cannot take
        units += [gemm_wgmma_tma.tma_type(p, prob.dtype), gemm_tf32_tma.kernel(p, config, prob.b_k_major)]
        first = gemm_tf32_tma.tma_launch(p, config, prob.b_k_major)
    if vec_build is None:
        units.append(gemm_tf32.kernel(p, tiles, prob.a_k_major, prob.b_k_major, vec=True))
    setup = split_setup(p, bm, bn, bk)
    return [
        *units,
        gemm_tf32.kernel(p, tiles, prob.a_k_major, prob.b_k_major, vec=False),
        splitk_code(p),
        split_plan(p, bm, bn, bk, facts),
        gemm_tf32.padding(p, prob.a_k_major, prob.b_k_major),
        gemm_tf32.launch(
            p,
            tiles,
            prob.a_k_major,
            prob.b_k_major,
            launch_terms(p, prob, epi),
            setup,
            vec_build=vec_build,
            first=first,
        ),
    ]


# -- the template ------------------------------------------------------------------------------------
def _simt_check(config: GroupConfig) -> str | None:
    bm, bn, bk, tm, tn = (int(config.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    threads = (bm // tm) * (bn // tn)
    if threads % 32 or not 32 <= threads <= 256:
        return f"{config.label()}: {threads} threads per block (a multiple of 32, 32 to 256)"
    smem = 2 * bk * (bm + 4 + bn + 4) * 4
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    for outer, inner in ((bm, bk), (bk, bn)):
        if loads_per_thread(outer, inner, threads, 4) > MAX_LOADS:
            return f"{config.label()}: more than {MAX_LOADS} 16-byte loads per thread and slice (registers)"
    return None


def _mma_check(config: GroupConfig) -> str | None:
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    grid = gemm_mma.warp_grid_problem(config)
    if grid is not None:
        return grid
    threads = wm * wn * 32
    tiles = (bm // wm // 16) * (bn // wn // 8)
    if tiles > 16:
        return f"{config.label()}: {tiles} mma tiles per warp ({tiles * 4} accumulators: registers spill)"
    smem = 2 * (bm + bn) * (bk + 8) * 2
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    for outer, inner in ((bm, bk), (bn, bk)):
        if loads_per_thread(outer, inner, threads, 8) > MAX_LOADS:
            return f"{config.label()}: more than {MAX_LOADS} 16-byte loads per thread and slice (registers)"
    return None


def _space_check(config: GroupConfig) -> str | None:
    if config.variant == "simt":
        return _simt_check(config)
    if config.variant == "mma":
        return gemm_mma.check(config)
    if config.variant == "wgmma":
        return gemm_wgmma.check(config)
    if config.variant == "wgmma_tma":
        return gemm_wgmma_tma.check(config) or gemm_wgmma.check(config)
    if config.variant == "tf32x3":
        return gemm_tf32.check(config)
    if config.variant == "tf32x3_wgmma":
        return gemm_tf32_wgmma.check(config)
    if config.variant == "tf32x3_tma":
        return gemm_tf32_tma.check(config)
    return None


def tf32_wgmma_seed(b_k_major: bool) -> GroupConfig:
    """The warp-group 3xTF32 seed for A k-major (a seed, not the rule: the mma.sync kernel measured
    faster on the suite): 64x64 when B is k-major too (``x @ W.T``), 128x128 when B is transposed on
    its way into shared memory (``a @ b``), the fastest of each in gemm_sweep_tf32x3_wgmma.json."""
    return GroupConfig.of("tf32x3_wgmma", bm=64 if b_k_major else 128, bn=64 if b_k_major else 128)


def _within_k(config: GroupConfig, k: int) -> GroupConfig:
    """``config`` with a ``cp.async`` pipeline (``mma``, ``tf32x3``) no deeper than K's slices and the one being
    multiplied: the stages past them are shared memory no slice ever fills, and they cost blocks an SM — level 1's
    9 (K = 32, one slice) would hold two 110 KB blocks of four 64x128 ``tf32x3`` stages where two stages hold four
    (an output-bound product: its stores want blocks in flight). The loop is the same: every iteration commits a
    copy group, empty past K, so the waits count the same groups."""
    if config.variant not in ("mma", "tf32x3"):
        return config
    stages = max(2, min(int(config.get("stages")), cdiv(k, int(config.get("bk"))) + 1))
    return config if stages == int(config.get("stages")) else config.with_params(stages=stages)


class GemmTemplate:
    """matmul + fused element-wise epilogue (see the module docstring for variants and the rule)."""

    name = "gemm"

    def __init__(self, sizes: SizeResolver | None = None) -> None:
        self.sizes = sizes

    def _problem(self, group: Group) -> Problem:
        return Problem(group, self.sizes.graphs if self.sizes is not None else None)

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        prob = self._problem(group)
        knobs: dict[str, dict[str, tuple[Any, ...]]] = {}
        if prob.dtype in HALF:
            knobs["mma"] = dict(MMA_KNOBS)
            if prob.a_k_major and facts.arch == "sm_90a":  # warp-group MMA: Hopper, A read k-major
                knobs["wgmma"] = dict(WGMMA_KNOBS)
                knobs["wgmma_tma"] = dict(WGMMA_TMA_KNOBS)
        else:
            knobs["simt"] = dict(SIMT_KNOBS)
            if tensor_cores_take_tf32(facts):
                knobs["tf32x3"] = dict(TF32_KNOBS)
            if facts.arch == "sm_90a":  # TF32 warp-group MMA: Hopper
                knobs["tf32x3_wgmma"] = dict(TF32_WGMMA_KNOBS)
                if prob.a_k_major:  # A's fragments are read from a k-major raw slice
                    knobs["tf32x3_tma"] = dict(TF32_TMA_KNOBS)
        knobs["gemv"] = dict(GEMV_KNOBS)
        return Space(knobs=knobs, check=_space_check)

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        """min(M, N) <= 16 → gemv; fp32 → simt by tile coverage; half → mma (module docstring); a pipeline no
        deeper than K (:func:`_within_k`)."""
        prob = self._problem(group)
        return _within_k(self._rule(prob, facts), max(t.k for t in prob.traced))

    def _rule(self, prob: Problem, facts: DeviceFacts) -> GroupConfig:
        t = prob.primary
        small = min(t.m, t.n)
        if small <= SMALL_SIDE:
            rows = next(r for r in GEMV_KNOBS["rows"] if r >= small)
            return GroupConfig.of("gemv", threads=256, rows=rows)
        sms = max(1, facts.sm_count)
        if prob.dtype in HALF and prob.a_k_major and facts.arch == "sm_90a":
            # TMA copies and a producer warp group: 0.87-0.88x cuBLAS at 4096^3 where the cp.async kernel of the
            # same tile reaches 0.60-0.69x (gemm_sweep_wgmma_tma.json); a batch runs the latter, so it is named
            variant = "wgmma_tma" if t.batch == 1 else "wgmma"
            for bm, bn in ((128, 256), (128, 128), (64, 128)):
                if t.batch * cdiv(t.m, bm) * cdiv(t.n, bn) >= sms:
                    return GroupConfig.of(variant, bm=bm, bn=bn, stages=4)
            return GroupConfig.of(variant, bm=64, bn=64, stages=4)
        if prob.dtype in HALF:
            if t.batch * cdiv(t.m, 128) * cdiv(t.n, 128) >= sms:  # best at 4096^3 on the H200 (gemm_sweep)
                return GroupConfig.of("mma", bm=128, bn=128, bk=64, wm=2, wn=2, stages=3)
            return GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=4)
        if facts.arch == "sm_90a" and prob.a_k_major and t.batch == 1:
            # 3xTF32 fed by TMA: 1.82-1.98x exact-fp32 cuBLAS at 4096^3 where the mma.sync kernel reaches 1.16x
            # (gemm_sweep_tf32x3_tma.json); a single product (an odd operand is padded first)
            for bm, bn in ((128, 128), (128, 64), (64, 64)):
                if cdiv(t.m, bm) * cdiv(t.n, bn) >= sms:
                    return GroupConfig.of("tf32x3_tma", bm=bm, bn=bn, stages=4)
            if t.k >= 2 * SPLIT_MIN_K:  # few tiles, a long K: split-K fills the GPU
                return GroupConfig.of("tf32x3_tma", bm=64, bn=64, stages=4)
        if (
            tensor_cores_take_tf32(facts)
            and (prob.vector_friendly() or t.batch == 1)  # a single product pads an odd operand
            and t.batch * cdiv(t.m, 64) * cdiv(t.n, 128) >= sms
        ):
            return TF32_DEFAULT  # 1.04-1.06x cuBLAS SGEMM at 4096^3 on the H200 (gemm_sweep_tf32x3.json)
        if t.batch * cdiv(t.m, 64) * cdiv(t.n, 64) >= 4 * sms:  # best at 4096^3 on the H200 (gemm_sweep)
            return GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8)
        if t.batch * cdiv(t.m, 128) * cdiv(t.n, 128) >= sms:
            return GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)
        if t.batch * cdiv(t.m, 128) * cdiv(t.n, 64) >= sms:
            return GroupConfig.of("simt", bm=128, bn=64, bk=8, tm=8, tn=8)
        return GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        prob = self._problem(group)
        first = self.default(group, facts)
        if prob.dtype in HALF:
            wgmma = "wgmma" in self.space(group, facts).variants
            tma = wgmma and prob.primary.batch == 1  # a batch runs the wgmma kernel of a TMA configuration
            tiled = [
                *([GroupConfig.of("wgmma_tma", bm=128, bn=256, stages=4)] if tma else []),
                *([GroupConfig.of("wgmma_tma", bm=128, bn=128, stages=4)] if tma else []),
                *([GroupConfig.of("wgmma", bm=128, bn=256, stages=4)] if wgmma else []),
                *([GroupConfig.of("wgmma", bm=128, bn=128, stages=4)] if wgmma and not tma else []),
                *([GroupConfig.of("wgmma", bm=64, bn=64, stages=4)] if wgmma else []),
                GroupConfig.of("mma", bm=128, bn=128, bk=64, wm=2, wn=2, stages=3),
                GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=2, stages=4),
                GroupConfig.of("mma", bm=128, bn=256, bk=32, wm=2, wn=4, stages=3),
                GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=4),
            ]
        else:
            variants = self.space(group, facts).variants
            tf32 = "tf32x3" in variants
            tma = "tf32x3_tma" in variants and prob.primary.batch == 1
            # one or two 32-deep slices: the TMA kernel's register-bound block (one an SM) stores its tile with
            # nothing in flight behind it (level 1's 9, K = 32, a 4.3 GB output: 33 % of the DRAM floor, 0.59x
            # cuBLAS; H100, 2026-12-07), so a SIMT kernel of two blocks an SM is raced too
            short = prob.primary.k <= 2 * gemm_tf32_tma.BK
            tiled = [
                *([GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)] if short else []),
                *([GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=4)] if tma else []),
                *([TF32_DEFAULT, GroupConfig.of("tf32x3", bm=128, bn=64, bk=32, wm=2, wn=2, stages=2)] if tf32 else []),
                *([tf32_wgmma_seed(prob.b_k_major)] if "tf32x3_wgmma" in variants and prob.a_k_major else []),
                GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8),
                GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8),
                GroupConfig.of("simt", bm=128, bn=64, bk=16, tm=8, tn=8),
                GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4),
                GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=4, tn=4),
            ]
        if first.variant == "gemv":
            rows = int(first.get("rows"))
            others = [GroupConfig.of("gemv", threads=128, rows=rows)]
            if rows > 1:
                others.append(GroupConfig.of("gemv", threads=256, rows=rows // 2))
            others.append(tiled[-1])
        else:
            others = tiled
        seeds = [first]
        deepest = max(t.k for t in prob.traced)
        for config in others:
            config = _within_k(config, deepest)
            if config not in seeds:
                seeds.append(config)
        return seeds[:4]

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"gemm: {reason}")
        if ctx.loaders is not None or ctx.storers is not None:
            raise TemplateError("gemm: fused loaders / storers are not supported (the epilogue is the group's)")
        prob = self._problem(group)
        p = ctx.prefix
        epi = Epilogue(group, prob, ctx, self.sizes)
        ctype = c_type(prob.dtype)
        device = [
            f"// ---- {p}: {group.describe()} {config.label()} ----",
            prob_struct(p, ctype, prob.nb, epi),
            common_code(p, prob.nb),
            epi.device(p),
        ]
        includes: tuple[str, ...] = ()
        if prob.dtype == "bfloat16":
            includes = ("<cuda_bf16.h>",)
        elif prob.dtype == "float16":
            includes = ("<cuda_fp16.h>",)
        workspace = "0"
        if config.variant == "simt":
            device += [
                simt_kernel(p, config, prob, True, epi),
                simt_kernel(p, config, prob, False, epi),
                splitk_code(p),
                simt_launch(p, prob, config, ctx.facts, epi),
            ]
        elif config.variant == "mma":
            fallback = gemm_mma.fallback_config(config)
            if (why := _mma_check(fallback)) is not None:
                raise TemplateError(f"gemm: scalar fallback {why}")
            includes += (PTX_INCLUDE,)
            device += [
                gemm_mma.kernel(p, config, prob.a_k_major, prob.b_k_major, prob.dtype),
                mma_kernel(p, fallback, prob, False, epi),
                gemm_mma.launch(p, config, fallback, prob.a_k_major, prob.b_k_major, launch_terms(p, prob, epi)),
            ]
        elif config.variant == "wgmma":
            fallback = gemm_mma.fallback_config(config)
            if (why := _mma_check(fallback)) is not None:
                raise TemplateError(f"gemm: scalar fallback {why}")
            includes += (PTX_INCLUDE,)
            device += [
                gemm_wgmma.kernel(p, config, prob.b_k_major, prob.dtype),
                mma_kernel(p, fallback, prob, False, epi),
                gemm_wgmma.launch(p, config, fallback, launch_terms(p, prob, epi)),
            ]
        elif config.variant == "wgmma_tma":
            fallback = gemm_mma.fallback_config(config)
            if (why := _mma_check(fallback)) is not None:
                raise TemplateError(f"gemm: scalar fallback {why}")
            includes += ('"optiml_tma.h"', PTX_INCLUDE)
            device += [
                gemm_wgmma_tma.tma_type(p, prob.dtype),
                gemm_wgmma.kernel(p, config, prob.b_k_major, prob.dtype),
                gemm_wgmma_tma.kernel(p, config, prob.b_k_major, prob.dtype),
                mma_kernel(p, fallback, prob, False, epi),
                gemm_wgmma_tma.launch(p, config, fallback, prob.b_k_major, launch_terms(p, prob, epi)),
            ]
        elif config.variant in ("tf32x3", "tf32x3_wgmma", "tf32x3_tma"):
            includes += ('"optiml_tma.h"', PTX_INCLUDE) if config.variant == "tf32x3_tma" else (PTX_INCLUDE,)
            device += _tf32_units(p, config, prob, epi, ctx.facts)
        else:
            device.append(gemv_code(p, config, prob, ctx.facts))
        host = [f"{{  // {p}: {group.describe()} {config.label()}", f"  {p}_prob P = {{}};"]
        host += self._shape_host(p, group, prob, ctx)
        host += epi.host(p)
        host += [
            f"  const int {p}_err = {p}_launch(P, {ctx.workspace}, stream);",
            f"  if ({p}_err != 0) return {p}_err;",
            "}",
        ]
        if config.variant in ("gemv", "simt", "tf32x3", "tf32x3_wgmma", "tf32x3_tma"):
            m, n, k, batch = self._size_exprs(prob, ctx)
            workspace = f"{p}_ws_bytes({m}, {n}, {k}, {batch})"
            if config.variant.startswith("tf32x3"):  # the partial sums, then the padded copies (256-byte aligned)
                workspace = (
                    f"{p}_round256({p}_ws_bytes({m}, {n}, {k}, {batch})) + {p}_pad_bytes({m}, {n}, {k}, {batch})"
                )
        return KernelCode(
            device="\n".join(device), host="\n".join(host) + "\n", workspace_bytes=workspace, includes=includes
        )

    # -- host code: sizes and strides from the operands' shapes -----------------------------------------
    @staticmethod
    def _dims(vid: int, rank: int, ctx: RenderContext) -> list[str]:
        return [f"(int64_t)({ctx.dim(vid, d)})" for d in range(rank)]

    def _size_exprs(self, prob: Problem, ctx: RenderContext) -> tuple[str, str, str, str]:
        """C expressions of M, N, K and the batch count over the operands' dims (inputs only)."""
        da, db = self._dims(prob.a, prob.ra, ctx), self._dims(prob.b, prob.rb, ctx)
        if prob.ra >= 2:
            m, k = (da[-1], da[-2]) if prob.trans_a else (da[-2], da[-1])
        else:
            m, k = "(int64_t)1", da[0]
        n = (db[-2] if prob.trans_b else db[-1]) if prob.rb >= 2 else "(int64_t)1"
        terms = []
        for d in range(prob.nb):
            sa, sb = self._batch_dim(da, prob.ra, prob.nb, d), self._batch_dim(db, prob.rb, prob.nb, d)
            terms.append(f"({sa} != 1 ? {sa} : {sb})")
        batch = "(" + " * ".join(["(int64_t)1", *terms]) + ")"
        if prob.folds_batch:  # one GEMM of batch * M rows (Problem.folds_batch)
            return f"({batch} * {m})", n, k, "(int64_t)1"
        return m, n, k, batch

    @staticmethod
    def _batch_dim(dims: list[str], rank: int, nb: int, d: int) -> str:
        own = max(rank - 2, 0)
        i = d - (nb - own)
        return dims[i] if i >= 0 else "(int64_t)1"

    def _shape_host(self, p: str, group: Group, prob: Problem, ctx: RenderContext) -> list[str]:
        ia, ib = self._slot(group, prob.a), self._slot(group, prob.b)
        m, n, k, batch = self._size_exprs(prob, ctx)
        da, db = self._dims(prob.a, prob.ra, ctx), self._dims(prob.b, prob.rb, ctx)
        lines = [
            f"  P.a = {ctx.inp(ia).ptr};",
            f"  P.b = {ctx.inp(ib).ptr};",
            f"  P.M = {m};",
            f"  P.N = {n};",
            f"  P.K = {k};",
            f"  P.batch = {batch};",
        ]
        # A(m, k): row-major [M][K] (or a 1 x K vector), transposed [K][M]; B(k, n): [K][N], [N][K], or a vector.
        lines += ["  P.sam = 1;", "  P.sak = P.M;"] if prob.trans_a else ["  P.sam = P.K;", "  P.sak = 1;"]
        if prob.b_k_major:
            lines += ["  P.sbk = 1;", "  P.sbn = P.K;"]
        else:
            lines += ["  P.sbk = P.N;", "  P.sbn = 1;"]
        lines.append(f"  for (int {p}_d = 0; {p}_d < {p}_nbd; ++{p}_d) {{")
        lines.append(f"    P.bsz[{p}_d] = 1; P.bsa[{p}_d] = 0; P.bsb[{p}_d] = 0;")
        lines.append("  }")
        for name, dims, rank in (("bsa", da, prob.ra), ("bsb", db, prob.rb)):
            own = max(rank - 2, 0)
            if not own or prob.folds_batch:  # a folded batch is rows of A: no batch strides
                continue
            lines.append("  {")
            lines.append("    int64_t st = " + " * ".join(dims[own:]) + ";")
            for i in range(own - 1, -1, -1):
                d = i + prob.nb - own
                lines.append(f"    P.{name}[{d}] = {dims[i]} == 1 ? 0 : st;")
                lines.append(f"    st *= {dims[i]};")
            lines.append("  }")
        for d in range(0 if prob.folds_batch else prob.nb):
            sa, sb = self._batch_dim(da, prob.ra, prob.nb, d), self._batch_dim(db, prob.rb, prob.nb, d)
            lines.append(f"  P.bsz[{d}] = {sa} != 1 ? {sa} : {sb};")
        return lines

    @staticmethod
    def _slot(group: Group, vid: int) -> int:
        for k, v in enumerate(group.inputs):
            if v == vid:
                return k
        raise TemplateError(f"gemm: operand {vid} is not an input of the kernel")
