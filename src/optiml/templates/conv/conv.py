"""Convolution template: 1-D/2-D/3-D ``conv`` (``aten.convolution``) with a fused element-wise epilogue.

A conv group (:mod:`optiml.templates.plan`) is one ``conv`` node over ``(input, weight[, bias])`` —
stride, padding, dilation, output padding, groups and ``transposed`` are node attrs, compile-time
constants like pooling windows — followed by the element-wise nodes fused into its store. Every size
(batch, channels, spatial extents, kernel extents) is read at run time from the ABI shapes; the
output extents follow PyTorch's formulas over them. 1-D and 2-D convolutions run as 3-D ones with
leading extents of 1.

As an implicit GEMM, group ``z`` of the convolution is ``C[m][n] = sum_k A[m][k] B[k][n]`` with
``m`` its output channel (``M = C_out / groups``), ``n`` an output pixel of any image
(``N = batch * OD * OH * OW``) and ``k`` an (input channel, kernel offset) pair
(``K = C_in / groups * KD * KH * KW``): ``A`` is the weight as stored, ``B`` the im2col matrix,
gathered from the input on the way into shared memory (zero outside the padded input), never stored.

Variants:

* ``implicit`` (float32 tasks): exact fp32 SIMT (``fmaf``, no TF32). A ``bm x bn`` block tile,
  ``tm x tn`` per thread in registers (rows and columns in groups of 4 a quarter-tile apart: 16-byte,
  conflict-free shared-memory reads, as in the GEMM template), ``bk``-deep slices double buffered:
  the next slice's weights and gathered inputs are loaded into registers while the current one is
  multiplied. Each thread gathers one fixed im2col column, so its pixel's coordinates are decoded
  once, and a gathered element costs a multiply-high division of ``k`` by the tap count and a read
  of a shared table of the kernel's taps (at most 512 taps: a larger kernel runs ``direct``). A
  pointwise convolution (1x1 kernel, stride 1, no padding: the rule sees it in every shape set) is
  this GEMM with ``B[k][n] = x[b][k][pixel]``, no gather arithmetic. A transposed convolution runs
  as one such GEMM per *output phase* (``od % sd, oh % sh, ow % sw``: :func:`_phase_setup`): within a
  phase the taps whose ``(o + pad - k * dil)`` divides by the stride are fixed, and each reaches the input
  at a fixed offset, so the phase is a stride-1 correlation over its own taps and only the
  ``K / (sd * sh * sw)`` real products are gathered and multiplied (the all-tap form multiplied the
  zeros too: 4.07 ms against 1.04 ms for exact-fp32 cuDNN on the suite's 2-D stride-2 task, H200,
  2026-12-02). The weight, stored ``[C_in][C_out / groups][taps]``, is read through the phase's tap list.
* ``mma`` (float16 / bfloat16 tasks): the same implicit GEMM on tensor cores, ``mma.sync.m16n8k16``
  with fp32 accumulation (the GEMM template's instruction helper), ``wm x wn`` warps; shared memory
  holds A as ``[m][k]`` and B as ``[n][k]`` (k contiguous, rows padded by 8 halves), two buffers: the
  next slice is copied straight into the other buffer after the multiply. Staging (:func:`_staging`,
  shared with ``tf32x3``): the weights move in 16-byte words (8 halves, 4 floats) where ``K`` is a
  multiple and the weight 16-byte aligned (the kernel's ``AVEC`` instance, picked at launch), else
  as scalars packed into words; each thread gathers consecutive k of its im2col column, halves packed
  two to a register, and both tiles are stored to shared memory in 16-byte words (the suite's 3x3 mma
  convs: 238 registers before, 138 now; the pointwise one 128 with a 4-byte spill; not yet timed).
* ``tf32x3`` (float32 tasks, sm_80 and newer; transposed ones too, over their output phases, the weight
  read element by element through the phase's taps): the same implicit GEMM on tensor cores at fp32
  accuracy, the GEMM template's 3xTF32 slice (:func:`optiml.templates.gemm.tf32.slice_code`: each
  value split into two TF32 parts, three ``mma.sync.m16n8k8`` per tile, each slice summed into a
  zeroed partial added in fp32) over A as ``[m][k]`` and B as ``[n][k]`` (rows padded by 4 floats),
  double buffered, the next slice prefetched in registers.
* ``wgmma`` (float16 / bfloat16) and ``tf32x3_wgmma`` (float32), sm_90a, forward convolutions: the same
  implicit GEMM on Hopper warp-group MMAs, the weights reordered into the workspace each call (tap-major
  where the channels fill 16-byte chunks) so a gathered chunk is one tap of consecutive channels
  (:mod:`optiml.templates.conv.wgmma`).
* ``stencil`` (any float dtype, forward convolutions whose kernel extents are the same at every shape
  set, at most 64 taps; the rule for depthwise ones and others with few terms per output): a block
  stages the input box of an output tile in shared memory per input channel, each thread computes
  ``rows`` output rows of one column with the weights in registers (:mod:`optiml.templates.conv.stencil`).
* ``gather`` (transposed convolutions, any float dtype): output-stationary, a thread an output position and a
  chunk of output channels, walking only the taps that reach it (:mod:`optiml.templates.conv.gather`).
* ``direct`` (any float dtype; the rule where the stencil does not apply: few-term forward convolutions whose
  kernel changes between shape sets or exceeds 64 taps, transposed ones whose weights overflow the gather's): one
  thread per output element walks its input channels and kernel window (for a transposed
  convolution, the input positions that reach the output: ``(o + pad - k * dil)`` divisible by the
  stride), accumulating in fp32.

At PyTorch's default precision (a float32 task with ``OPTIML["precision"] = "tf32"``:
``DeviceFacts.tf32_convolutions``, :func:`rounds_to_tf32`) every variant multiplies operands rounded to TF32 to
nearest, as cuDNN does there, and sums in fp32: ``implicit``, ``direct`` and ``stencil`` round as they load,
``tf32_wgmma`` replaces ``tf32x3_wgmma``, and ``tf32`` (the ``tf32x3`` kernel with each fragment rounded to TF32 and
one ``mma.sync`` a k-step) replaces ``tf32x3`` — for transposed convolutions too, whose phases' GEMMs otherwise had
only SIMT kernels at that precision; depthwise convolutions (exact in cuDNN) stay exact.

The epilogue is the GEMM template's (:class:`~optiml.templates.product.epilogue.Epilogue`), indexed by the
output's linear index (its ``N`` is 1): bias-like leaves broadcast into the output through strides
derived at run time, so a ``[C, 1, 1]`` bias, an eval-mode batch norm's statistics and a residual
tensor all read the right element. A bias argument of the convolution itself is added to the
accumulator first. Values are rounded once, to the stored dtype.

The planner's rule (:meth:`ConvTemplate.default`) on the primary (first) shape set: transposed →
``gather`` where at most 64 products reach an output once the zero terms are left out (``transposed_terms``) or
no GEMM applies, else ``implicit`` (float32, at most 512 taps; its tile as below) with the gather its second seed;
fewer than 32 terms per output (``K``: depthwise 3x3 has 9) or one input channel per group (depthwise with any
kernel) → ``stencil`` (its tile by the output plane: :func:`optiml.templates.conv.stencil.tile`), else ``direct``;
float32 →
``tf32x3`` 128x128x16 on 2x4 warps when TF32 MMAs exist, ``M`` (output channels per group) fills a
128-row tile and the 128x128 tiles cover every SM (H200, 2026-12-02, conv_quality_tf32.json: 7-12 %
faster than ``implicit`` on the four 2-D fp32 convolutions, 1.7x slower on a 64-channel 3-D one, where
half of each tile is idle); otherwise ``implicit`` with ``bm`` 128 when ``M > 64`` (else 64) and ``bn``
128 when those tiles still cover every SM (else 64), with a ``tf32x3`` seed (64x128 when ``M < 128``).
Half → ``mma`` 128x128x32 on 2x4 warps when those tiles cover every SM, else 64x64x32 on 2x2. On sm_90a
the forward GEMM cases instead take ``tf32x3_wgmma`` (float32) or ``wgmma`` (half), ``bm`` 128 (64 for at
most 64 output channels per group) by ``bn`` 64: 1.1-2.6x exact-fp32 eager on the suite's convolutions
against 0.5-1.4x for the variants above (H200, 2026-12-02, compute_quality_suite_conv_wgmma.json); a windowed
one of 128-row tiles gathers from a channels-last copy of its input with 128 columns a tile (``nhwc=1``:
:func:`_channels_last_wide`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from optiml.conv_arithmetic import TF32
from optiml.graph.ir import Graph, Node
from optiml.graph.sizes import SizeResolver
from optiml.templates.base import (
    DeviceFacts,
    GroupConfig,
    KernelCode,
    RenderContext,
    Space,
    TemplateError,
    c_type,
    to_compute,
)
from optiml.templates.conv import gather as conv_gather
from optiml.templates.conv import stencil as conv_stencil
from optiml.templates.conv import wgmma as conv_wgmma
from optiml.templates.gemm import tf32 as gemm_tf32
from optiml.templates.gemm.mma import fragment_epilogue, warp_grid_problem, zeroed_accumulators
from optiml.templates.group import Group
from optiml.templates.product.epilogue import Epilogue
from optiml.templates.product.mma import mma_slice, tensor_cores_take_tf32
from optiml.templates.ptx import INCLUDE as PTX_INCLUDE

IMPLICIT_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (32, 64, 128),
    "bn": (32, 64, 128),
    "bk": (8, 16),
    "tm": (4, 8),
    "tn": (4, 8),
}
MMA_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (64, 128),
    "bn": (64, 128),
    "bk": (32,),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
}
TF32_KNOBS: dict[str, tuple[Any, ...]] = {
    "bm": (64, 128),
    "bn": (64, 128),
    "bk": (16, 32),
    "wm": (1, 2, 4),
    "wn": (1, 2, 4),
}
DIRECT_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (64, 128, 256)}
HALF = ("float16", "bfloat16")
DIRECT_MAX_K = 32  # fewer terms per output than this: the direct kernel is the rule
GATHER_MAX_TERMS = 64  # a transposed convolution with at most this many products an output: gather is the rule
STATIC_SMEM = 48 * 1024
MAX_PREFETCH = 16  # registers per operand holding the next slice
MAX_TAPS = 512  # kernel taps (KD * KH * KW) the implicit variants' shared table holds; more: direct only
TAPS_BYTES = 16 * MAX_TAPS
BLOCKS_PER_SM = 32  # the direct kernel's grid: grid-stride loops over at most this many blocks per SM
#: The tf32x3 tiles the rule and the seeds use: 128x128 where M (output channels per group) >= 128, else 64x128.
TF32_WIDE = GroupConfig.of("tf32x3", bm=128, bn=128, bk=16, wm=2, wn=4)
TF32_NARROW = GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=2, wn=4)


@dataclass(frozen=True)
class Traced:
    """A convolution's sizes at one shape set (3-D form: 1-D and 2-D have leading extents of 1)."""

    batch: int
    cin: int
    cout: int
    kernel: tuple[int, int, int]
    out: tuple[int, int, int]
    inp: tuple[int, int, int] = (1, 1, 1)

    @property
    def pixels(self) -> int:
        return self.batch * self.out[0] * self.out[1] * self.out[2]


def _pad3(values: tuple[int, ...], fill: int) -> tuple[int, int, int]:
    full = (fill,) * (3 - len(values)) + tuple(values)
    return (int(full[0]), int(full[1]), int(full[2]))


def _taps(t: Traced) -> int:
    return t.kernel[0] * t.kernel[1] * t.kernel[2]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class ConvProblem:
    """The conv node of a group: operands, hyper-parameters (3-D form) and traced sizes."""

    has_n = False  # for the GEMM epilogue: values are indexed by the output's linear index alone

    def __init__(self, group: Group, graphs: list[Graph] | None = None) -> None:
        g = group.graph
        if not group.nodes or g.nodes[group.nodes[0]].op != "conv":
            raise TemplateError(f"conv: {group.describe()} does not start with a convolution")
        self.node: Node = g.nodes[group.nodes[0]]
        self.x, self.w = self.node.inputs[0], self.node.inputs[1]
        self.bias = self.node.inputs[2] if len(self.node.inputs) > 2 else None
        self.out = self.node.outputs[0]
        self.spatial = int(self.node.attr("spatial"))
        self.stride = _pad3(tuple(self.node.attr("stride")), 1)
        self.padding = _pad3(tuple(self.node.attr("padding")), 0)
        self.dilation = _pad3(tuple(self.node.attr("dilation")), 1)
        self.output_padding = _pad3(tuple(self.node.attr("output_padding")), 0)
        self.transposed = bool(self.node.attr("transposed"))
        #: a stride-1 transposed convolution captured as the forward one it equals: its weight keeps the transposed
        #: layout ``[C_in, C_out / groups, k...]``, flipped and regrouped into the workspace each call
        self.transposed_weight = bool(self.node.attr("transposed_weight", False))
        self.groups = int(self.node.attr("groups"))
        #: the call as cuDNN saw it (:func:`optiml.conv_arithmetic.signature`): its measured arithmetic's key
        self.signature = str(self.node.attr("signature", ""))
        self.dtype = g.type(self.x).dtype
        for vid in (self.w, self.bias):
            if vid is not None and g.type(vid).dtype != self.dtype:
                raise TemplateError(f"conv: operands of {self.dtype} and {g.type(vid).dtype}")
        if self.dtype not in ("float32", *HALF):
            raise TemplateError(f"conv: no template for {self.dtype} convolutions")
        self.traced = [self._traced(gr) for gr in (graphs or [g])]
        self.pointwise = (
            not self.transposed
            and all(t.kernel == (1, 1, 1) for t in self.traced)
            and self.stride == (1, 1, 1)
            and self.padding == (0, 0, 0)
        )
        self.kernel = conv_stencil.fixed_kernel([t.kernel for t in self.traced])

    def _traced(self, g: Graph) -> Traced:
        sx, sw, so = g.type(self.x).shape, g.type(self.w).shape, g.type(self.out).shape
        cout = sw[1] * self.groups if self.transposed or self.transposed_weight else sw[0]
        return Traced(sx[0], sx[1], cout, _pad3(sw[2:], 1), _pad3(so[2:], 1), _pad3(sx[2:], 1))

    @property
    def primary(self) -> Traced:
        return self.traced[0]

    def gemm_sizes(self, t: Traced) -> tuple[int, int, int]:
        """(M, N, K) of one group's implicit GEMM at traced sizes."""
        ks = t.kernel[0] * t.kernel[1] * t.kernel[2]
        return t.cout // self.groups, t.pixels, t.cin // self.groups * ks


# -- shared code ---------------------------------------------------------------------------------------
def _prob_struct(p: str, ctype: str, epi: Epilogue, extra: tuple[str, ...] = ()) -> str:
    fields = "\n".join([*extra, *epi.fields()])
    return f"""\
struct {p}_prob {{
  const {ctype}* x;
  const {ctype}* w;
  const {ctype}* bias;             // nullptr: no bias argument
  int64_t B, Cin, Cout, G, Cin_g, Cout_g;
  int64_t D, H, W, KD, KH, KW, OD, OH, OW;
  int64_t OS, KS, KHW, OHW, DHW;   // output pixels per image, kernel taps, plane sizes
  int64_t M, NP, K;                // one group's implicit GEMM: Cout_g x (B * OS) x (Cin_g * KS)
  int64_t tiles_m, tiles_n;       // implicit / mma grid
  int64_t dgx, dgy;                // direct grid: pixel x plane blocks; stencil: row tiles a block, groups
  uint32_t ks_mul;                 // k / KS by multiply-high (0: KS == 1)
  int ks_shr;
  int64_t N;                       // 1: the epilogue is indexed by the output's linear index alone
{fields}
}};
"""


def _forward_weight_kernel(p: str, ctype: str) -> str:
    """The kernel writing a transposed weight ``[C_in][C_out / g][taps]`` as the forward one ``[C_out][C_in / g]
    [taps]``: each group's channels swapped, the taps reversed (every spatial dim flipped)."""
    return f"""\
__global__ void __launch_bounds__(256) {p}_forward_weight(const {ctype}* __restrict__ wt, {ctype}* __restrict__ wf,
                                                          int64_t cin_g, int64_t cout_g, int64_t taps, int64_t n) {{
  for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (int64_t)gridDim.x * 256) {{
    const int64_t tap = i % taps, row = i / taps, ci = row % cin_g, co = row / cin_g;
    const int64_t g = co / cout_g;
    wf[i] = wt[((g * cin_g + ci) * cout_g + (co - g * cout_g)) * taps + (taps - 1 - tap)];
  }}
}}"""


def _forward_weight_host(p: str, ctype: str, workspace: str) -> list[str]:
    """Host statements after the shapes: the forward weight written to the workspace's start, ``P.w`` pointed at
    it, ``{p}_fw_bytes`` the bytes it takes (256-byte aligned)."""
    return [
        "  {",
        "    const int64_t n = P.Cout * P.Cin_g * P.KS;",
        "    const int64_t blocks = (n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535;",
        f"    {p}_forward_weight<<<(unsigned)(blocks < 1 ? 1 : blocks), 256, 0, stream>>>(P.w, ({ctype}*)({workspace}),"
        " P.Cin_g, P.Cout_g, P.KS, n);",
        "    const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e;",
        f"    P.w = (const {ctype}*)({workspace});",
        "  }",
        f"  const int64_t {p}_fw_bytes = (P.Cout * P.Cin_g * P.KS * (int64_t)sizeof({ctype}) + 255) / 256 * 256;",
        f"  (void){p}_fw_bytes;",
    ]


def _bias_value(prob: ConvProblem, co: str) -> str:
    """The convolution's bias of channel ``co`` in the compute type, or "" without a bias."""
    return to_compute(f"P.bias[{co}]", prob.dtype) if prob.bias is not None else ""


def _bias(prob: ConvProblem, co: str) -> str:
    value = _bias_value(prob, co)
    return f"v += {value};" if value else ""


def _decode_column(prob: ConvProblem, x: str = "P.x") -> str:
    """Statements: this thread's im2col column ``n`` as image ``b`` and output pixel ``o`` (and its origin);
    ``x``: the input's base pointer (the mma build reads it as raw 16-bit values)."""
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.padding
    lines = [
        "  const int64_t n = n0 + bcol;",
        "  const bool ncol = n < P.NP;",
        "  const int b = ncol ? (int)n / (int)P.OS : 0, o = ncol ? (int)n - b * (int)P.OS : 0;",
    ]
    if prob.pointwise:
        lines.append(f"  const X_T* __restrict__ X = {x} + (b * P.Cin + gz * P.Cin_g) * P.OS + o;")
        return "\n".join(lines)
    lines += [
        "  const int od = o / (int)P.OHW, oh = (o / (int)P.OW) % (int)P.OH, ow = o % (int)P.OW;",
        f"  const int id0 = od * {sd} - {pd}, ih0 = oh * {sh} - {ph}, iw0 = ow * {sw} - {pw};",
        f"  const X_T* __restrict__ X = {x} + (b * P.Cin + gz * P.Cin_g) * P.DHW;",
        "  const int64_t xo = ((int64_t)id0 * P.H + ih0) * P.W + iw0;  // the window's origin (may be in the padding)",
    ]
    return "\n".join(lines)


def _tap_table(prob: ConvProblem, threads: int) -> str:
    """Statements filling the shared table of kernel taps (offsets along each axis, and in the input
    plane), so a gathered element costs a fast division and a table read instead of three divisions."""
    if prob.pointwise:
        return ""
    dd, dh, dw = prob.dilation
    return f"""  __shared__ int4 taps[{MAX_TAPS}];
  for (int t = (int)threadIdx.x; t < (int)P.KS; t += {threads}) {{
    const int kz = t / (int)P.KHW, ky = (t / (int)P.KW) % (int)P.KH, kx = t % (int)P.KW;
    taps[t] = make_int4(kz * {dd}, ky * {dh}, kx * {dw}, (kz * {dd} * (int)P.H + ky * {dh}) * (int)P.W + kx * {dw});
  }}
  __syncthreads();"""


#: ``gk / KS`` by multiply-high (``gk < 2^31``: host-checked; ``ks_mul`` 0 marks ``KS == 1``).
_KS_QUOTIENT = "P.ks_mul ? (int)(__umulhi((unsigned)gk, P.ks_mul) >> P.ks_shr) : (int)gk"


def _phase_quotient(k: str = "gk") -> str:
    """Expression: ``k / T`` (``T``: a transposed convolution's taps in this block's phase), the same way."""
    return f"t_mul ? (int)(__umulhi((unsigned){k}, t_mul) >> t_shr) : (int){k}"


def _weight_element(prob: ConvProblem, k: str = "gk") -> str:
    """Expression: the weight at (output channel ``gm``, k ``gk``) of group ``gz`` (``Wg``: the group's first).
    A convolution's weight is ``[C_out][C_in/g][taps]``, so row ``gm`` is contiguous in k; a transposed
    one's is ``[C_in][C_out/g][taps]`` and its k = (ci, j) runs over the phase's taps: ``tapk[j]`` is the
    weight's tap."""
    if not prob.transposed:
        return f"Wg[gm * P.K + {k}]"
    ci = f"(int64_t)({_phase_quotient(k)})"
    return f"Wg[({ci} * P.M + gm) * P.KS + tapk[(int)({k} - {ci} * T)]]"


def _gather(prob: ConvProblem, zero: str, load: str) -> str:
    """Statements: ``v``, the im2col element (k = gk, this thread's column); ``load`` reads ``X[idx]``."""
    if prob.pointwise:
        return f"v = (ncol && gk < P.K) ? {load.format(idx='gk * P.OS')} : {zero};"
    if prob.transposed:  # the phase's taps, each a fixed input offset from this column's position
        return f"""v = {zero};
      if (ncol && gk < KP) {{
        const int ci = {_phase_quotient()};
        const int4 e = taps[(int)gk - ci * T];
        const int id = qd + e.x, ih = qh + e.y, iw = qw + e.z;
        if ((unsigned)id < (unsigned)P.D && (unsigned)ih < (unsigned)P.H && (unsigned)iw < (unsigned)P.W)
          v = {load.format(idx="xo + ci * P.DHW + e.w")};
      }}"""
    return f"""v = {zero};
      if (ncol && gk < P.K) {{
        // ci = gk / KS by multiply-high (gk < 2^31: host-checked), then the tap's offsets from the table
        const int ci = {_KS_QUOTIENT};
        const int4 e = taps[(int)gk - ci * (int)P.KS];
        const int id = id0 + e.x, ih = ih0 + e.y, iw = iw0 + e.z;
        if ((unsigned)id < (unsigned)P.D && (unsigned)ih < (unsigned)P.H && (unsigned)iw < (unsigned)P.W)
          v = {load.format(idx="xo + ci * P.DHW + e.w")};
      }}"""


# -- transposed convolution as one stride-1 implicit GEMM per output phase -----------------------------
def _phase_setup(p: str, prob: ConvProblem, threads: int) -> str:
    """Statements: this block's output phase ``(od % sd, oh % sh, ow % sw)``, its extents, and its taps.

    Output ``od = qd * sd + rd`` is reached through tap ``kz`` from input ``(od + pad - kz * dil) / sd`` where
    that divides; within a phase the dividing taps are fixed, and the input is ``qd + dz`` with
    ``dz = (rd + pad - kz * dil) / sd``. So each phase is a stride-1 correlation over its own taps
    (``T`` of them, ``taps``: offsets; ``tapk``: the weight's tap) and ``K = C_in/g * T``: one term in
    ``sd * sh * sw`` of the all-tap GEMM, the zeros never gathered nor multiplied."""
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = prob.stride, prob.padding, prob.dilation
    counts = "\n".join(
        f"  for (int k = 0; k < (int)P.{ext}; ++k) {n} += (r{a} + {pad} - k * {dil}) % {st} == 0;"
        for n, a, ext, pad, dil, st in (
            ("nz", "d", "KD", pd, dd, sd),
            ("ny", "h", "KH", ph, dh, sh),
            ("nx", "w", "KW", pw, dw, sw),
        )
    )
    return f"""  // the output phase of this block and its extents (pixels per image: OSr)
  const int rd = (int)(phase / {sh * sw}), rh = (int)(phase / {sw}) % {sh}, rw = (int)(phase % {sw});
  const int ODr = ((int)P.OD - rd + {sd - 1}) / {sd}, OHr = ((int)P.OH - rh + {sh - 1}) / {sh};
  const int OWr = ((int)P.OW - rw + {sw - 1}) / {sw}, OHWr = OHr * OWr, OSr = ODr * OHWr;
  const int64_t NPr = P.B * (int64_t)OSr;
  __shared__ int4 taps[{MAX_TAPS}];
  __shared__ int tapk[{MAX_TAPS}];
  int nz = 0, ny = 0, nx = 0;
{counts}
  const int T = nz * ny * nx;
  for (int t = (int)threadIdx.x; t < T; t += {threads}) {{
    const int kz = {p}_nth_tap(t / (ny * nx), rd + {pd}, {dd}, {sd}, (int)P.KD);
    const int ky = {p}_nth_tap((t / nx) % ny, rh + {ph}, {dh}, {sh}, (int)P.KH);
    const int kx = {p}_nth_tap(t % nx, rw + {pw}, {dw}, {sw}, (int)P.KW);
    const int dz = (rd + {pd} - kz * {dd}) / {sd}, dy = (rh + {ph} - ky * {dh}) / {sh};
    const int dx = (rw + {pw} - kx * {dw}) / {sw};
    taps[t] = make_int4(dz, dy, dx, (dz * (int)P.H + dy) * (int)P.W + dx);
    tapk[t] = (kz * (int)P.KH + ky) * (int)P.KW + kx;
  }}
  __syncthreads();
  const int64_t KP = P.Cin_g * T;  // this phase's K
  uint32_t t_mul = 0u;  // k / T by multiply-high, as the host's ks_mul for KS (0: T <= 1)
  int t_shr = 0;
  if (T > 1) {{
    uint32_t lg = 0;
    while ((1u << lg) < (uint32_t)T) ++lg;
    t_mul = (uint32_t)(((1ull << (31 + lg)) + T - 1) / T);
    t_shr = (int)lg - 1;
  }}"""


def _phase_helper(p: str) -> str:
    return f"""\
// The i-th tap k (in order) of an axis that reaches a phase: (base - k * dil) divisible by the stride.
__device__ __forceinline__ int {p}_nth_tap(int i, int base, int dil, int stride, int taps) {{
  for (int k = 0; k < taps; ++k) {{
    if ((base - k * dil) % stride == 0) {{
      if (i == 0) return k;
      --i;
    }}
  }}
  return 0;
}}
"""


def _phase_column() -> str:
    """Statements: this thread's column of the phase's GEMM as image ``b`` and phase pixel ``(qd, qh, qw)``."""
    return """  const int64_t n = n0 + bcol;
  const bool ncol = n < NPr;
  const int b = ncol ? (int)n / OSr : 0, q = ncol ? (int)n - b * OSr : 0;
  const int qd = ncol ? q / OHWr : 0, qh = ncol ? (q / OWr) % OHr : 0, qw = ncol ? q % OWr : 0;
  const X_T* __restrict__ X = P.x + (b * P.Cin + gz * P.Cin_g) * P.DHW;
  const int64_t xo = ((int64_t)qd * P.H + qh) * P.W + qw;"""


def _phase_columns(count: int, column: str, prob: ConvProblem) -> str:
    """:func:`_columns` for a phase: its pixel ``(qd, qh, qw)`` is output ``(qd * sd + rd, ...)``."""
    sd, sh, sw = prob.stride
    return f"""  int64_t cb[{count}];
#pragma unroll
  for (int c = 0; c < {count}; ++c) {{
    const int64_t n = {column};
    cb[c] = -1;
    if (n < NPr) {{
      const int b = (int)n / OSr, q = (int)n - b * OSr;
      const int od = (q / OHWr) * {sd} + rd, oh = ((q / OWr) % OHr) * {sh} + rh, ow = (q % OWr) * {sw} + rw;
      cb[c] = (int64_t)b * P.Cout * P.OS + ((int64_t)od * P.OH + oh) * P.OW + ow;
    }}
  }}"""


def _phase_block_decode(phases: int) -> str:
    """:func:`_block_decode` with the output phase between the tiles and the group."""
    return f"""  uint32_t bid = blockIdx.x;  // 32-bit: the host keeps grids below 2^31
  const int64_t tmi = bid % (uint32_t)P.tiles_m;
  bid /= (uint32_t)P.tiles_m;
  const int64_t tni = bid % (uint32_t)P.tiles_n;
  bid /= (uint32_t)P.tiles_n;
  const int64_t phase = bid % {phases}u, gz = bid / {phases}u;"""


def _fast_division_host(divisor: str, into: str = "ks") -> list[str]:
    """Host statements: ``P.{into}_mul`` / ``P.{into}_shr`` with ``n / d == __umulhi(n, mul) >> shr`` for
    every ``n < 2^31`` (Granlund-Montgomery, as CUTLASS's FastDivmod); ``mul = 0`` marks ``d == 1``."""
    return [
        "  {",
        f"    const uint32_t d = (uint32_t){divisor};",
        "    uint32_t lg = 0;",
        "    while ((1ull << lg) < d) ++lg;  // ceil(log2(d))",
        "    const uint64_t p = 31 + lg;",
        f"    P.{into}_mul = d == 1 ? 0u : (uint32_t)(((1ull << p) + d - 1) / d);",
        f"    P.{into}_shr = (int)(p - 32);",
        "  }",
    ]


def _block_decode() -> str:
    """Block -> (group z, tile-row, tile-column): m tiles fastest, so blocks sharing input pixels run together."""
    return """  uint32_t bid = blockIdx.x;  // 32-bit: the host keeps grids below 2^31
  const int64_t tmi = bid % (uint32_t)P.tiles_m;
  bid /= (uint32_t)P.tiles_m;
  const int64_t tni = bid % (uint32_t)P.tiles_n;
  const int64_t gz = bid / (uint32_t)P.tiles_n;"""


def _columns(count: int, column: str) -> str:
    """Statements: ``cb[c]``, the output offset of this thread's c-th column (image b, pixel o: b * Cout * OS + o),
    or -1 past the last column; decoded once, not per output channel. ``column`` is column c's ``n``."""
    return f"""  int64_t cb[{count}];
#pragma unroll
  for (int c = 0; c < {count}; ++c) {{
    const int64_t n = {column};
    const int b = (int)n / (int)P.OS, o = (int)n - b * (int)P.OS;  // 32-bit: the host checks NP < 2^31
    cb[c] = n < P.NP ? (int64_t)b * P.Cout * P.OS + o : -1;
  }}"""


def _store(prob: ConvProblem, p: str, col: str) -> str:
    """Statements storing accumulator ``v`` of channel ``co`` and column ``col`` (an index of ``cb``) of
    group ``gz`` through the epilogue."""
    return f"""{_bias(prob, "co")}
          {p}_epi1(P, cb[{col}] + co * P.OS, 0, v);"""


# -- implicit (fp32 SIMT) ------------------------------------------------------------------------------
def _fp32_gemm_head(p: str, prob: ConvProblem, bm: int, bn: int, threads: int) -> tuple[str, str, str]:
    """The fp32 implicit GEMM kernels' (SIMT and ``tf32x3``) set-up: ``(K expression, device helpers, head
    statements)``, the head decoding the block, its tile origin, its group's weight rows and this thread's
    im2col column; a transposed convolution's runs one GEMM per output phase (:func:`_phase_setup`)."""
    origin = f"""  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const float* __restrict__ Wg = P.w + gz * P.M * P.K;
  const int bcol = (int)threadIdx.x % {bn}, brow0 = (int)threadIdx.x / {bn};"""
    if prob.transposed:
        parts = [_phase_block_decode(phases(prob)), origin, _phase_setup(p, prob, threads), _phase_column()]
        return "KP", _phase_helper(p), "\n".join(parts)
    return "P.K", "", "\n".join([_block_decode(), origin, _decode_column(prob), _tap_table(prob, threads)])


def _column_offsets(count: int, column: str, prob: ConvProblem) -> str:
    """:func:`_columns`, or :func:`_phase_columns` for a transposed convolution."""
    return _phase_columns(count, column, prob) if prob.transposed else _columns(count, column)


def phases(prob: ConvProblem) -> int:
    """Output phases of a transposed convolution (``sd * sh * sw``); 1 for any other."""
    sd, sh, sw = prob.stride
    return sd * sh * sw if prob.transposed else 1


def _implicit_kernel(p: str, cfg: GroupConfig, prob: ConvProblem, tf32: bool = False) -> str:
    """``tf32``: weights and gathered inputs rounded to TF32 as they are loaded (products exact, fp32 sums)."""
    bm, bn, bk, tm, tn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    rounded = "optiml_round_tf32({})" if tf32 else "{}"
    kind = "TF32 operands (rounded to nearest), fp32 sums" if tf32 else "exact fp32"
    tx, ty = bn // tn, bm // tm
    threads = tx * ty
    k_total, helper, head = _fp32_gemm_head(p, prob, bm, bn, threads)
    columns = _column_offsets(tn, f"n0 + (c / 4) * {tx * 4} + tx * 4 + (c % 4)", prob)
    la, lb, step = _cdiv(bm * bk, threads), bk * bn // threads, threads // bn
    guard_a = "f < " + str(bm * bk) + " && " if (bm * bk) % threads else ""
    frag_a = "\n".join(
        f"      {{ const float4 q = *(const float4*)&As[buf][kk][{c * ty * 4} + ty * 4]; "
        f"fa[{c * 4}] = q.x; fa[{c * 4 + 1}] = q.y; fa[{c * 4 + 2}] = q.z; fa[{c * 4 + 3}] = q.w; }}"
        for c in range(tm // 4)
    )
    frag_b = "\n".join(
        f"      {{ const float4 q = *(const float4*)&Bs[buf][kk][{c * tx * 4} + tx * 4]; "
        f"fb[{c * 4}] = q.x; fb[{c * 4 + 1}] = q.y; fb[{c * 4 + 2}] = q.z; fb[{c * 4 + 3}] = q.w; }}"
        for c in range(tn // 4)
    )
    load = f"""#pragma unroll
    for (int l = 0; l < {la}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads}, mm = f / {bk}, kk = f % {bk};
      const int64_t gm = m0 + mm, gk = k0 + kk;
      ra[l] = ({guard_a}gm < P.M && gk < {k_total}) ? {rounded.format(_weight_element(prob))} : 0.f;
    }}
#pragma unroll
    for (int l = 0; l < {lb}; ++l) {{
      const int64_t gk = k0 + brow0 + l * {step};
      float v;
      {_gather(prob, "0.f", rounded.format("X[{idx}]"))}
      rb[l] = v;
    }}"""
    store_a = f"""#pragma unroll
    for (int l = 0; l < {la}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads};
      {"if (f < " + str(bm * bk) + ") " if guard_a else ""}As[buf][f % {bk}][f / {bk}] = ra[l];
    }}
#pragma unroll
    for (int l = 0; l < {lb}; ++l) Bs[buf][brow0 + l * {step}][bcol] = rb[l];"""
    return f"""\
{helper}// Implicit GEMM, {kind}: {bm}x{bn} tile per block, {tm}x{tn} per thread, {bk}-deep slices double buffered.
__global__ void __launch_bounds__({threads}) {p}_implicit(const {p}_prob P) {{
  typedef float X_T;
  __shared__ __align__(16) float As[2][{bk}][{bm + 4}];
  __shared__ __align__(16) float Bs[2][{bk}][{bn + 4}];
  const int tx = (int)threadIdx.x % {tx}, ty = (int)threadIdx.x / {tx};
{head}
  float ra[{la}], rb[{lb}];
  float acc[{tm}][{tn}];
#pragma unroll
  for (int i = 0; i < {tm}; ++i)
#pragma unroll
    for (int j = 0; j < {tn}; ++j) acc[i][j] = 0.f;
{_first_slice(bk, load, store_a, k_total)}
    if (kt + 1 < KT) {{
      k0 = (kt + 1) * {bk};
{load}
    }}
#pragma unroll
    for (int kk = 0; kk < {bk}; ++kk) {{
      float fa[{tm}], fb[{tn}];
{frag_a}
{frag_b}
#pragma unroll
      for (int i = 0; i < {tm}; ++i)
#pragma unroll
        for (int j = 0; j < {tn}; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
    }}
    if (kt + 1 < KT) {{
      buf ^= 1;
{store_a}
    }}
    __syncthreads();
  }}
{columns}
#pragma unroll
  for (int i = 0; i < {tm}; ++i) {{
    const int64_t m = m0 + (i / 4) * {ty * 4} + ty * 4 + (i % 4);
    if (m >= P.M) continue;
    const int64_t co = gz * P.M + m;
#pragma unroll
    for (int j = 0; j < {tn}; ++j) {{
      if (cb[j] >= 0) {{
        float v = acc[i][j];
        {_store(prob, p, "j")}
      }}
    }}
  }}
}}
"""


# -- mma (fp16 / bf16 tensor cores) --------------------------------------------------------------------
def _staging(prob: ConvProblem, bm: int, bn: int, bk: int, threads: int, vtype: str, zero: str) -> tuple[str, str, str]:
    """The tensor-core kernels' slice staging through registers: (declarations, load, store) statements.

    ``load`` reads the weights' ``bm x bk`` tile into ``ra``, a 16-byte word per ``vec`` consecutive k
    of one row (``vec`` = 8 halves or 4 floats): one 16-byte load in the kernel's ``AVEC`` instance, which
    the launch picks where ``K`` and the weight's address allow it (:func:`_tiled_launch`), else ``vec``
    scalar loads packed into the word. It gathers
    this thread's im2col column into ``rb``, ``lb`` consecutive k (so they store as 16-byte words too:
    half values are packed two to a 32-bit register as they arrive). ``store`` writes both to ``As[buf]``
    (``[m][k]``) and ``Bs[buf]`` (``[n][k]``); both rows are 16-byte aligned (pitch and offsets)."""
    half = vtype != "float"
    k_total = "KP" if prob.transposed else "P.K"
    vec = 8 if half else 4
    chunks = bm * bk // vec  # 16-byte words of the A tile
    la, lb = _cdiv(chunks, threads), bk * bn // threads
    guard = f"f < {chunks} && " if chunks % threads else ""
    bits = "Wg" if half else "((const unsigned*)Wg)"
    if prob.transposed:  # [C_in][C_out/g][taps], read through the phase's taps: one element at a time
        if half:
            raise TemplateError("conv: half-precision transposed convolutions run direct")
        words = "e[0], e[1], e[2], e[3]"
    elif half:
        words = ", ".join(
            f"(unsigned)(gk + {2 * j} < P.K ? {bits}[row + {2 * j}] : 0u) | "
            f"((unsigned)(gk + {2 * j + 1} < P.K ? {bits}[row + {2 * j + 1}] : 0u) << 16)"
            for j in range(4)
        )
    else:
        words = ", ".join(f"gk + {j} < P.K ? {bits}[row + {j}] : 0u" for j in range(4))
    elements = ""
    if prob.transposed:
        elements = f"""
          unsigned e[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {{
            const int64_t kj = gk + j;
            e[j] = kj < KP ? __float_as_uint({_weight_element(prob, "kj")}) : 0u;
          }}"""
    decl = f"""  uint4 ra[{la}];
  {"unsigned rb[" + str(lb // 2) + "]" if half else "float rb[" + str(lb) + "]"};"""
    pack = "rb[l >> 1] = (l & 1) ? (rb[l >> 1] | ((unsigned)v << 16)) : (unsigned)v;" if half else "rb[l] = v;"
    load = f"""#pragma unroll
    for (int l = 0; l < {la}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads}, mm = f / {bk // vec}, kk = (f % {bk // vec}) * {vec};
      const int64_t gm = m0 + mm, gk = k0 + kk, row = gm * P.K + gk;
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if ({guard}gm < P.M && gk < {k_total}) {{
        if (AVEC) w = *reinterpret_cast<const uint4*>(Wg + row);
        else {{{elements}
          w = make_uint4({words});
        }}
      }}
      ra[l] = w;
    }}
#pragma unroll
    for (int l = 0; l < {lb}; ++l) {{
      const int64_t gk = k0 + brow0 * {lb} + l;
      {vtype} v;
      {_gather(prob, zero, "X[{idx}]")}
      {pack}
    }}"""
    if lb % vec == 0:
        word = "rb[{q} * 4], rb[{q} * 4 + 1], rb[{q} * 4 + 2], rb[{q} * 4 + 3]"
        cast, make = ("uint4", "make_uint4") if half else ("float4", "make_float4")
        store_b = "\n".join(
            f"    *reinterpret_cast<{cast}*>(&Bs[buf][bcol][brow0 * {lb} + {q * vec}]) = {make}({word.format(q=q)});"
            for q in range(lb // vec)
        )
    else:  # a column's k values do not fill whole 16-byte words: one store each
        value = "(unsigned short)(rb[l >> 1] >> ((l & 1) * 16))" if half else "rb[l]"
        store_b = f"""#pragma unroll
    for (int l = 0; l < {lb}; ++l) Bs[buf][bcol][brow0 * {lb} + l] = {value};"""
    a_row, a_col = f"f / {bk // vec}", f"(f % {bk // vec}) * {vec}"
    store = f"""#pragma unroll
    for (int l = 0; l < {la}; ++l) {{
      const int f = (int)threadIdx.x + l * {threads};
      {"if (f < " + str(chunks) + ") " if guard else ""}*reinterpret_cast<uint4*>(&As[buf][{a_row}][{a_col}]) = ra[l];
    }}
{store_b}"""
    return decl, load, store


def _first_slice(bk: int, load: str, store: str, k_total: str = "P.K") -> str:
    """The implicit GEMM kernels' slice loop head (SIMT and tensor cores): the first slice staged into
    buffer 0, then the loop over the ``KT`` slices of ``k_total`` with ``buf`` the one being multiplied."""
    return f"""\
  const int64_t KT = ({k_total} + {bk - 1}) / {bk};
  int64_t k0 = 0;
  int buf = 0;
  {{
{load}
{store}
  }}
  __syncthreads();
  for (int64_t kt = 0; kt < KT; ++kt) {{
    buf = (int)(kt & 1);"""


def _mma_kernel(p: str, cfg: GroupConfig, prob: ConvProblem) -> str:
    bm, bn, bk, wm, wn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    threads = wm * wn * 32
    wtm, wtn = bm // wm, bn // wn
    mi, ni = wtm // 16, wtn // 8
    pitch = bk + 8
    decl, load, store_a = _staging(prob, bm, bn, bk, threads, "unsigned short", "(unsigned short)0")
    return f"""\
// Implicit GEMM on tensor cores: {bm}x{bn} tile per block on {wm}x{wn} warps ({mi}x{ni} mma tiles each),
// {bk}-deep slices double buffered; shared memory holds raw 16-bit values, A as [m][k], B as [n][k].
template <bool AVEC>
__global__ void __launch_bounds__({threads}) {p}_mma_conv(const {p}_prob P) {{
  typedef unsigned short X_T;
  __shared__ __align__(16) unsigned short As[2][{bm}][{pitch}];
  __shared__ __align__(16) unsigned short Bs[2][{bn}][{pitch}];
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3, wy = warp / {wn}, wx = warp % {wn};
{_block_decode()}
  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const unsigned short* __restrict__ Wg = (const unsigned short*)P.w + gz * P.M * P.K;
  const int bcol = (int)threadIdx.x % {bn}, brow0 = (int)threadIdx.x / {bn};
  const unsigned short* __restrict__ xbits = (const unsigned short*)P.x;
{_decode_column(prob, x="xbits")}
{_tap_table(prob, threads)}
{decl}
{zeroed_accumulators(mi, ni)}
{_first_slice(bk, load, store_a)}
{mma_slice(prob.dtype, bk, mi, ni, wtm, wtn)}\
    if (kt + 1 < KT) {{  // the next slice straight into the other buffer: no prefetch registers
      k0 = (kt + 1) * {bk};
      buf ^= 1;
{load}
{store_a}
    }}
    __syncthreads();
  }}
{_tensor_core_store(p, prob, mi, ni, wtm, wtn)}}}
"""


# -- tf32x3 (fp32 on tensor cores) -------------------------------------------------------------------
def _tf32_kernel(p: str, cfg: GroupConfig, prob: ConvProblem, single: bool = False) -> str:
    """The implicit GEMM on tensor cores at fp32 accuracy: the GEMM template's 3xTF32 slice
    (:func:`optiml.templates.gemm.tf32.slice_code`) over A as ``[m][k]`` and B as ``[n][k]`` in shared
    memory (rows padded by 4 floats: conflict-free fragment reads), double buffered, the next slice's
    weights and gathered inputs prefetched in registers while the current one is multiplied. ``single``: the
    ``tf32`` variant, 1xTF32 at PyTorch's default precision (operands rounded to TF32 to nearest as the fragments
    are read, one MMA a k-step)."""
    bm, bn, bk, wm, wn = (int(cfg.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    threads = wm * wn * 32
    wtm, wtn = bm // wm, bn // wn
    mi, ni = wtm // 16, wtn // 8
    pitch = bk + gemm_tf32.PAD_K
    decl, load, store = _staging(prob, bm, bn, bk, threads, "float", "0.f")
    multiply = gemm_tf32.slice_code(p, bk, mi, ni, wtm, wtn, "As[buf][{m}][{k}]", "Bs[buf][{n}][{k}]", single)
    k_total, helper, head = _fp32_gemm_head(p, prob, bm, bn, threads)
    kind = "1xTF32 (operands rounded to nearest)" if single else "3xTF32"
    return f"""\
{helper}// Implicit GEMM in {kind} on tensor cores: {bm}x{bn} tile per block on {wm}x{wn} warps ({mi}x{ni} m16n8k8 tiles
// each), {bk}-deep slices double buffered through registers; A as [m][k], B as [n][k] in shared memory.
template <bool AVEC>
__global__ void __launch_bounds__({threads}) {p}_tf32_conv(const {p}_prob P) {{
  typedef float X_T;
  __shared__ __align__(16) float As[2][{bm}][{pitch}];
  __shared__ __align__(16) float Bs[2][{bn}][{pitch}];
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int g = lane >> 2, t4 = lane & 3, wy = warp / {wn}, wx = warp % {wn};
{head}
{decl}
{zeroed_accumulators(mi, ni)}
{_first_slice(bk, load, store, k_total)}
    if (kt + 1 < KT) {{  // the next slice's loads are in flight while this one is multiplied
      k0 = (kt + 1) * {bk};
{load}
    }}
{multiply}
    if (kt + 1 < KT) {{
      buf ^= 1;
{store}
    }}
    __syncthreads();
  }}
{_tensor_core_store(p, prob, mi, ni, wtm, wtn)}}}
"""


def _tensor_core_store(p: str, prob: ConvProblem, mi: int, ni: int, wtm: int, wtn: int) -> str:
    """The tensor-core kernels' stores: each warp's columns decoded once, then its accumulator tiles."""
    element = f"""\
          if (cb[2 * j + q] >= 0) {{
            float v = acc[i][j][2 * h + q];
            {_store(prob, p, "2 * j + q")}
          }}"""
    columns = _column_offsets(2 * ni, f"n0 + wx * {wtn} + (c / 2) * 8 + 2 * t4 + (c % 2)", prob)
    return columns + "\n" + fragment_epilogue(mi, ni, wtm, "const int64_t co = gz * P.M + m;", element)


def _tiled_launch(
    p: str, kernel: str, bm: int, bn: int, threads: int, vec: int = 0, stride: tuple[int, int, int] | None = None
) -> str:
    """The launch of a tiled kernel; with ``vec`` the kernel is a ``template <bool AVEC>`` whose true instance
    reads the weights in 16-byte words, launched when ``K`` is a multiple of ``vec`` and the weight 16-byte
    aligned (then every row of it is). With a transposed convolution's ``stride``, one GEMM per output
    phase: its columns are a phase's pixels (the first phase has the most)."""
    call = f"<<<(unsigned)blocks, {threads}, 0, stream>>>(P);"
    columns, count = "P.NP", 1
    if stride is not None:
        sd, sh, sw = stride
        columns = f"P.B * ((P.OD + {sd - 1}) / {sd}) * ((P.OH + {sh - 1}) / {sh}) * ((P.OW + {sw - 1}) / {sw})"
        count = sd * sh * sw
    if vec and stride is not None:  # a transposed weight is read through the phase's taps, never in words
        launch = f"{kernel}<false>{call}"
    elif vec:
        aligned = f"(P.K & {vec - 1}) == 0 && ((uintptr_t)P.w & 15) == 0"
        launch = f"if ({aligned}) {kernel}<true>{call}\n  else {kernel}<false>{call}"
    else:
        launch = kernel + call
    return f"""\
static int {p}_launch({p}_prob& P, cudaStream_t stream) {{
  if (P.M <= 0 || P.NP <= 0) return 0;
  if (P.K > 2147483647LL || P.NP > 2147483647LL || P.DHW > 2147483647LL) return -4;
  if (P.KS > {MAX_TAPS}) return -5;  // more kernel taps than the shared table holds
  P.tiles_m = (P.M + {bm - 1}) / {bm};
  P.tiles_n = ({columns} + {bn - 1}) / {bn};
  const int64_t blocks = P.G * {count} * P.tiles_m * P.tiles_n;
  if (blocks > 2147483647LL) return -4;
  {launch}
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""


# -- direct (any float dtype; depthwise; transposed) ---------------------------------------------------
def _direct_code(p: str, cfg: GroupConfig, prob: ConvProblem, facts: DeviceFacts, tf32: bool = False) -> str:
    """``tf32``: inputs and weights rounded to TF32 as they are loaded."""
    threads = int(cfg.get("threads"))
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.padding
    dd, dh, dw = prob.dilation

    def load(expr: str) -> str:
        value = to_compute(expr, prob.dtype)
        return f"optiml_round_tf32({value})" if tf32 else value

    extents = ("KD", "KH", "KW")
    if prob.transposed:
        # input position i reaches output o through tap k when o = i * s - pad + k * dil
        weight = "P.w + ((gz * P.Cin_g + ci) * P.Cout_g + (co - gz * P.Cout_g)) * P.KS"
        loops = conv_gather.tap_loops(prob)
    else:
        weight = "P.w + (co * P.Cin_g + ci) * P.KS"
        checks = [
            f"const int id = od * {sd} - {pd} + kz * {dd}; if (id < 0 || id >= P.D) continue;",
            f"const int ih = oh * {sh} - {ph} + ky * {dh}; if (ih < 0 || ih >= P.H) continue;",
            f"const int iw = ow * {sw} - {pw} + kx * {dw}; if (iw < 0 || iw >= P.W) continue;",
        ]
        loops = [
            (f"for (int {k} = 0; {k} < (int)P.{extent}; ++{k})", check)
            for k, extent, check in zip(("kz", "ky", "kx"), extents, checks, strict=True)
        ]
    # transposed: ptxas's own choice for the tap walks' loops at 128 threads was 40 registers and an 8-byte spill;
    # eight blocks an SM leave it 64 (50 used, unspilled)
    bounds = f"{threads}, {max(1, 1024 // threads)}" if prob.transposed else f"{threads}"
    product = (
        f"v = fmaf({load('xc[((int64_t)id * P.H + ih) * P.W + iw]')}, {load('wc[(kz * P.KH + ky) * P.KW + kx]')}, v);"
    )
    return f"""\
// One thread per output element: its input channels and kernel window, fp32 accumulation. The grid's y
// walks the (image, channel) planes and x their pixels (grid-stride both, a 1-D grid of dgx * dgy
// blocks), so no 64-bit division runs per element.
__global__ void __launch_bounds__({bounds}) {p}_direct(const {p}_prob P) {{
  const int64_t planes = P.B * P.Cout;
  const uint32_t bx = blockIdx.x % (uint32_t)P.dgx, by = blockIdx.x / (uint32_t)P.dgx;
  for (int64_t plane = by; plane < planes; plane += P.dgy) {{
    const int64_t co = (int)plane % (int)P.Cout, b = (int)plane / (int)P.Cout, gz = (int)co / (int)P.Cout_g;
    const int OW = (int)P.OW, OHW = (int)P.OHW;
    for (int o = (int)(bx * {threads} + threadIdx.x); o < (int)P.OS; o += (int)P.dgx * {threads}) {{
      const int od = o / OHW, oh = (o - od * OHW) / OW, ow = o % OW;
      float v = 0.f;
      for (int ci = 0; ci < (int)P.Cin_g; ++ci) {{
        const {c_type(prob.dtype)}* __restrict__ xc = P.x + (b * P.Cin + gz * P.Cin_g + ci) * P.DHW;
        const {c_type(prob.dtype)}* __restrict__ wc = {weight};
{conv_gather.nest(loops, product, "        ")}
      }}
      {_bias(prob, "co")}
      {p}_epi1(P, plane * P.OS + o, 0, v);
    }}
  }}
}}
static int {p}_launch({p}_prob& P, cudaStream_t stream) {{
  if (P.B * P.Cout <= 0 || P.OS <= 0) return 0;
  if (P.OS > 2147483647LL - {threads} || P.B * P.Cout > 2147483647LL) return -4;  // 32-bit pixels and planes
  const int64_t planes = P.B * P.Cout, per_plane = (P.OS + {threads - 1}) / {threads};
  const int64_t want = {facts.sm_count * BLOCKS_PER_SM};
  int64_t gy = planes < 65535 ? planes : 65535;
  int64_t gx = per_plane;
  if (gx * gy > want) gx = (want + gy - 1) / gy;
  if (gx < 1) gx = 1;
  P.dgx = gx;
  P.dgy = gy;
  {p}_direct<<<(unsigned)(gx * gy), {threads}, 0, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""


# -- the space -----------------------------------------------------------------------------------------
def rounds_to_tf32(prob: ConvProblem, facts: DeviceFacts) -> bool:
    """Whether this convolution multiplies operands rounded to TF32 (``facts.tf32_convolutions``, a float32 task at
    PyTorch's default precision): as cuDNN did for this call where the judge measured it
    (:mod:`optiml.conv_arithmetic`, ``facts.convolution_arithmetic``). Unmeasured (no GPU: ``optiml plan``), all but
    depthwise ones (one input channel a group), which cuDNN computes in exact fp32 there (H100, 2026-12-06,
    benchmarks/results/tf32_rounding_probe_h100_2026-12-06.json), and forward 3-D ones, for which cuDNN chose exact
    fp32 kernels too (level 1's 54, 59, 60 and 66: H100, 2026-12-07, level1_tf32_part5_h100_2026-12-07.md)."""
    if not facts.tf32_convolutions or prob.dtype != "float32":
        return False
    measured = facts.measured_arithmetic(prob.signature)
    if measured is not None:
        return measured == TF32
    forward_3d = prob.spatial == 3 and not prob.transposed and not prob.transposed_weight
    return not (prob.primary.cin // prob.groups <= 1 or forward_3d)


def _implicit_check(config: GroupConfig, tables: int) -> str | None:
    bm, bn, bk, tm, tn = (int(config.get(k)) for k in ("bm", "bn", "bk", "tm", "tn"))
    threads = (bm // tm) * (bn // tn)
    if threads % 32 or not 64 <= threads <= 256:
        return f"{config.label()}: {threads} threads per block (a multiple of 32, 64 to 256)"
    if threads % bn or bk % (threads // bn):
        return f"{config.label()}: each thread gathers one im2col column (threads a multiple of bn, bk of threads/bn)"
    smem = 2 * bk * (bm + 4 + bn + 4) * 4 + tables
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    if _cdiv(bm * bk, threads) > MAX_PREFETCH or bk * bn // threads > MAX_PREFETCH:
        return f"{config.label()}: more than {MAX_PREFETCH} prefetch registers per operand"
    return None


def _mma_check(config: GroupConfig, tables: int) -> str | None:
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    grid = warp_grid_problem(config)
    if grid is not None:
        return grid
    threads = wm * wn * 32
    if threads % bn or bk % (threads // bn):
        return f"{config.label()}: each thread gathers one im2col column (threads a multiple of bn)"
    tiles = (bm // wm // 16) * (bn // wn // 8)
    if tiles > 16:
        return f"{config.label()}: {tiles} mma tiles per warp ({tiles * 4} accumulators: registers spill)"
    smem = 2 * (bm + bn) * (bk + 8) * 2 + tables
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    if _cdiv(bm * bk, threads) + bk * bn // threads > 2 * MAX_PREFETCH:  # staged halves: at most 32 a thread
        return f"{config.label()}: more than {2 * MAX_PREFETCH} prefetch registers (registers spill)"
    return None


def _tf32_check(config: GroupConfig, tables: int) -> str | None:
    bm, bn, bk, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "bk", "wm", "wn"))
    grid = warp_grid_problem(config)
    if grid is not None:
        return grid
    threads = wm * wn * 32
    if threads % bn or bk % (threads // bn):
        return f"{config.label()}: each thread gathers one im2col column (threads a multiple of bn)"
    accumulators = (bm // wm) * (bn // wn) // 32
    if accumulators > gemm_tf32.MAX_ACCUMULATORS:
        return f"{config.label()}: {accumulators} accumulators per thread (registers spill)"
    smem = 2 * (bm + bn) * (bk + gemm_tf32.PAD_K) * 4 + tables
    if smem > STATIC_SMEM:
        return f"{config.label()}: {smem} B of shared memory (at most {STATIC_SMEM})"
    if _cdiv(bm * bk, threads) > MAX_PREFETCH or bk * bn // threads > MAX_PREFETCH:
        return f"{config.label()}: more than {MAX_PREFETCH} prefetch registers per operand"
    return None


def _gather_weights(prob: ConvProblem) -> int:
    """The most kernel taps x input channels per group at any shape set: a ``gather`` block's weights a channel."""
    return max(_taps(t) * (t.cin // prob.groups) for t in prob.traced)


def _gather_rule(prob: ConvProblem, facts: DeviceFacts) -> GroupConfig | None:
    return conv_gather.rule(prob, _gather_weights(prob), prob.primary.cout // prob.groups, facts)


def _space_check(prob: ConvProblem, facts: DeviceFacts, config: GroupConfig) -> str | None:
    """Why ``config`` is not valid, or None; a transposed convolution's kernels also hold the phase's tap
    indices (``tapk``) in shared memory."""
    if config.variant == "stencil":
        return conv_stencil.check(prob, prob.kernel, config)
    if config.variant == "gather":
        return conv_gather.check(prob, _gather_weights(prob), config, facts)
    tables = TAPS_BYTES + (4 * MAX_TAPS if prob.transposed else 0)
    if config.variant == "implicit":
        return _implicit_check(config, tables)
    if config.variant == "mma":
        return _mma_check(config, tables)
    if config.variant in ("tf32x3", "tf32"):
        return _tf32_check(config, tables)
    if config.variant in conv_wgmma.VARIANTS:
        return conv_wgmma.check(config, tables)
    return None


def transposed_terms(prob: ConvProblem) -> int:
    """Products per output of a transposed convolution: of the ``C_in/g * taps`` terms only one in
    ``stride_d * stride_h * stride_w`` reaches an output, about the ``K`` of one output phase's GEMM."""
    _, _, k = prob.gemm_sizes(prob.primary)
    sd, sh, sw = prob.stride
    return k // (sd * sh * sw)


def _mma_tf32_variant(variants: tuple[str, ...]) -> str | None:
    """The ``mma.sync`` TF32 variant the space offers: ``tf32x3`` (exact), ``tf32`` (PyTorch's default precision)."""
    return next((v for v in ("tf32x3", "tf32") if v in variants), None)


def _mma_tf32_tile(variant: str, wide: bool) -> GroupConfig:
    """:data:`TF32_WIDE` (``wide``) or :data:`TF32_NARROW` as ``variant``."""
    return GroupConfig.of(variant, **dict((TF32_WIDE if wide else TF32_NARROW).params))


def _channels_last_wide(config: GroupConfig, space: Space, pixels: int, sms: int) -> GroupConfig:
    """A windowed warp-group conv of 128-row tiles gathers from the input's channels-last copy, 128 columns a tile.
    Timed against the gathering kernel (128 x 64) with the warp-group epilogue and copy of b5e84e5 (H100,
    2026-12-07, template_sweep_conv_epilogue_*_h100_2026-12-07.json): 1.17x on conv2d_fp16, 1.32x on
    conv2d_bias_relu at TF32 (1.14x at 3xTF32 before that epilogue), 0.98-0.99x on conv2d_residual_bf16 and level 1's
    63 (16 input channels: 144 terms an output).

    1xTF32 takes 256 columns where ``pixels`` fill the SMs twice over in them (:data:`WIDE_TILE_WAVES`): each weight
    slice read from L2 then serves twice the pixels — level 1's 55 4.56 against 5.45 ms, 63 9.52 against 10.48 ms
    (H100, 147e79a, template_sweep_conv256_seeds_h100_2026-12-07.json).

    A 1xTF32 tile of 64 rows gathers from the copy too: 1.03-1.29x the gathering kernel on six convolutions (H100:
    level 1's 55, 63 and the suite's conv2d_bias_relu, conv2d_strided, template_sweep_conv_nhwc_tf32_h100_2026-12-07;
    57 7.57 against 8.13 ms and 65 3.52 against 4.55 ms, template_sweep_transposed_forward_h100_2026-12-07), where
    3xTF32's 64-row tiles lose with it (0.74-0.80x, template_sweep_conv_nhwc_exact_h100_2026-12-07)."""
    if "nhwc" not in space.knobs.get(config.variant, {}):
        return config
    if config.get("bm") != 128:
        narrow = config.with_params(nhwc=1)
        return narrow if config.variant == "tf32_wgmma" and space.reason_invalid(narrow) is None else config
    wide = config.with_params(nhwc=1, bn=256)
    if pixels >= WIDE_TILE_WAVES * sms * 256 and space.reason_invalid(wide) is None:
        return wide
    return config.with_params(nhwc=1, bn=128)


def _implicit_tile(prob: ConvProblem, m: int, n: int, sms: int) -> GroupConfig:
    """The exact fp32 implicit GEMM's tile: ``bm`` 128 when ``M > 64``, ``bn`` 128 while the tiles cover the SMs."""
    bm = 128 if m > 64 else 64
    if prob.groups * _cdiv(m, bm) * _cdiv(n, 128) >= sms:
        return GroupConfig.of("implicit", bm=bm, bn=128, bk=8, tm=8, tn=8)
    return GroupConfig.of("implicit", bm=bm, bn=64, bk=8, tm=8, tn=4 if bm == 64 else 8)


#: waves of 256-pixel tiles over the SMs a 1xTF32 conv needs before it takes them (:func:`_channels_last_wide`)
WIDE_TILE_WAVES = 2
#: Output channels a group needs before a few-term conv also gets an implicit-GEMM seed beside the stencil
STENCIL_GEMM_MIN_COUT = 16


def _stencil_gemm_seed(prob: ConvProblem, space: Space, facts: DeviceFacts) -> list[GroupConfig]:
    """An implicit-GEMM seed for a few-term conv that is not depthwise and has many output channels a group
    (KernelBench's 59: 3 input channels, a 3x3x1 kernel, 64 outputs). The stencil holds one output channel's
    weights in registers and reads the input tile again for every output channel; a GEMM tile reads it once for
    64-128 of them. Which is faster is measured, not assumed: the seed is timed beside the stencil's."""
    m, n, k = prob.gemm_sizes(prob.primary)
    if k == _taps(prob.primary) or m < STENCIL_GEMM_MIN_COUT or "implicit" not in space.variants:
        return []
    config = _implicit_tile(prob, m, n, max(1, facts.sm_count))
    return [config] if space.reason_invalid(config) is None else []


def _stencil_rule(prob: ConvProblem, space: Space) -> GroupConfig | None:
    """The stencil's tile for the primary shape set's output plane, if the space has the variant and it fits."""
    if "stencil" not in space.variants:
        return None
    config = conv_stencil.tile(prob.primary.out[1], prob.primary.out[2])
    return config if space.reason_invalid(config) is None else None


class ConvTemplate:
    """conv + fused element-wise epilogue (see the module docstring for variants and the rule)."""

    name = "conv"

    def __init__(self, sizes: SizeResolver | None = None) -> None:
        self.sizes = sizes

    def _problem(self, group: Group) -> ConvProblem:
        return ConvProblem(group, self.sizes.graphs if self.sizes is not None else None)

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        prob = self._problem(group)
        knobs: dict[str, dict[str, tuple[Any, ...]]] = {}
        table = all(_taps(t) <= MAX_TAPS for t in prob.traced)
        gemm = not prob.transposed and table
        # warp-group MMAs: Hopper, and 32-bit offsets within one image's channels of a group (launch-checked)
        warp_group = facts.arch == "sm_90a" and all(
            t.cin // prob.groups * t.inp[0] * t.inp[1] * t.inp[2] < 2**31 for t in prob.traced
        )
        # a windowed convolution's warp-group kernels may gather from a channels-last copy of the input
        nhwc = {} if prob.pointwise else conv_wgmma.NHWC_KNOB
        if gemm and prob.dtype in HALF:
            knobs["mma"] = dict(MMA_KNOBS)
            if warp_group:
                knobs["wgmma"] = {**conv_wgmma.HALF_KNOBS, **nhwc, **conv_wgmma.STAGED_KNOB}
        elif gemm:  # at PyTorch's default precision: 1xTF32, and no 3xTF32 (exact) variant
            tf32 = rounds_to_tf32(prob, facts)
            knobs["implicit"] = dict(IMPLICIT_KNOBS)
            if tensor_cores_take_tf32(facts):  # exact 3xTF32, or 1xTF32 at PyTorch's default precision
                knobs["tf32" if tf32 else "tf32x3"] = dict(TF32_KNOBS)
            if warp_group:
                knobs["tf32_wgmma" if tf32 else "tf32x3_wgmma"] = {
                    **(conv_wgmma.TF32_SINGLE_KNOBS if tf32 else conv_wgmma.TF32_KNOBS),
                    **nhwc,
                    **conv_wgmma.STAGED_KNOB,
                }
        elif prob.transposed and table and prob.dtype == "float32":
            knobs["implicit"] = dict(IMPLICIT_KNOBS)  # one GEMM per output phase (_phase_setup)
            if tensor_cores_take_tf32(facts):
                knobs["tf32" if rounds_to_tf32(prob, facts) else "tf32x3"] = dict(TF32_KNOBS)
        if not prob.transposed and prob.kernel is not None and _taps(prob.primary) <= conv_stencil.MAX_TAPS:
            knobs["stencil"] = dict(conv_stencil.STENCIL_KNOBS)
        if prob.transposed:
            knobs["gather"] = dict(conv_gather.GATHER_KNOBS)
        knobs["direct"] = dict(DIRECT_KNOBS)
        implied: dict[str, dict[str, Any]] = {
            variant: {"nhwc": 0, "staged": 1} if "nhwc" in knobs[variant] else {"staged": 1}
            for variant in conv_wgmma.VARIANTS
            if variant in knobs
        }
        if "gather" in knobs:
            implied["gather"] = dict(conv_gather.IMPLIED)
        return Space(knobs=knobs, check=partial(_space_check, prob, facts), implied=implied)

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        """transposed → gather (few products an output) or implicit; K < 32 or depthwise → stencil (else direct);
        fp32 → tf32x3 where its wide tiles fill M and the SMs, else implicit by M and tile coverage; half → mma
        (module docstring)."""
        prob = self._problem(group)
        m, n, k = prob.gemm_sizes(prob.primary)
        sms = max(1, facts.sm_count)
        if prob.transposed:
            gather = _gather_rule(prob, facts)
            gemm = "implicit" in self.space(group, facts).variants
            if gemm and (gather is None or transposed_terms(prob) > GATHER_MAX_TERMS):
                return _implicit_tile(prob, m, n, sms)
            return gather if gather is not None else GroupConfig.of("direct", threads=256)
        if k < DIRECT_MAX_K or k == _taps(prob.primary) or any(_taps(t) > MAX_TAPS for t in prob.traced):
            stencil = _stencil_rule(prob, self.space(group, facts))
            return stencil if stencil is not None else GroupConfig.of("direct", threads=256)
        space = self.space(group, facts)
        variants = space.variants
        if prob.dtype in HALF:
            if "wgmma" in variants:
                return _channels_last_wide(GroupConfig.of("wgmma", bm=128 if m > 64 else 64, bn=64), space, 0, sms)
            if prob.groups * _cdiv(m, 128) * _cdiv(n, 128) >= sms:
                return GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=4)
            return GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2)
        for warp_group in ("tf32_wgmma", "tf32x3_wgmma"):
            if warp_group in variants:
                return _channels_last_wide(GroupConfig.of(warp_group, bm=128 if m > 64 else 64, bn=64), space, n, sms)
        mma_variant = _mma_tf32_variant(variants)
        if mma_variant and m >= 128 and prob.groups * _cdiv(m, 128) * _cdiv(n, 128) >= sms:
            return _mma_tf32_tile(mma_variant, wide=True)
        return _implicit_tile(prob, m, n, sms)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        prob = self._problem(group)
        first = self.default(group, facts)
        if first.variant == "stencil":  # few terms per output
            others = [*_stencil_gemm_seed(prob, self.space(group, facts), facts), *conv_stencil.alternatives(first)]
            others.append(GroupConfig.of("direct", threads=256))
        elif prob.transposed:  # the output-stationary gather and the phases' GEMMs (SIMT, 3xTF32 or 1xTF32)
            variants = self.space(group, facts).variants
            gather = _gather_rule(prob, facts)
            mma_variant = _mma_tf32_variant(variants)
            gemms = [
                *([_mma_tf32_tile(mma_variant, wide=False)] if mma_variant else []),
                GroupConfig.of("implicit", bm=64, bn=128, bk=16, tm=8, tn=8),
                GroupConfig.of("implicit", bm=64, bn=64, bk=8, tm=8, tn=4),
            ]
            gathers = [] if gather is None else [gather, *conv_gather.alternatives(prob, gather)]
            if first.variant == "gather":  # the other column mapping, a narrower channel chunk, then the GEMMs
                others = [*gathers, *(gemms if "implicit" in variants else [])]
            else:  # the rule's GEMM races the gather, then the phases' TF32 tile and the other gathers
                others = [*gathers[:1], *(gemms[:1] if "implicit" in variants else []), *gathers[1:], *gemms[1:]]
            others.append(GroupConfig.of("direct", threads=256))
        elif self.space(group, facts).variants[0] == "direct":  # too many taps for the table
            others = [GroupConfig.of("direct", threads=128), GroupConfig.of("direct", threads=64)]
        elif prob.dtype in HALF:
            wide = first.variant == "wgmma" and first.get("bm") == 128
            others = [
                *([first.with_params(bn=256)] if wide else []),  # conv2d_fp16's fastest (sweep as in the rule)
                *([GroupConfig.of("wgmma", bm=128, bn=128)] if wide else []),
                GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=4),
                GroupConfig.of("mma", bm=128, bn=64, bk=32, wm=4, wn=2),
                GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2),
                GroupConfig.of("direct", threads=256),
            ]
        else:
            mma_variant = _mma_tf32_variant(self.space(group, facts).variants)
            narrow = prob.gemm_sizes(prob.primary)[0] < 128  # fewer output channels per group than a wide tile
            warp_group = first.variant in ("tf32x3_wgmma", "tf32_wgmma")
            others = [
                *([GroupConfig.of(first.variant, bm=first.get("bm"), bn=128)] if warp_group else []),
                *([_mma_tf32_tile(mma_variant, wide=not narrow)] if mma_variant else []),
                GroupConfig.of("implicit", bm=128, bn=128, bk=8, tm=8, tn=8),
                GroupConfig.of("implicit", bm=64, bn=128, bk=16, tm=8, tn=8),
                GroupConfig.of("implicit", bm=64, bn=64, bk=8, tm=8, tn=4),
                GroupConfig.of("direct", threads=256),
            ]
        if conv_wgmma.channels_last(first):  # the rule's kernel before (gathering from the input, its accumulators
            # stored from their fragments): the staged epilogue is not yet timed, so every run races the two
            others.insert(0, GroupConfig.of(first.variant, bm=first.get("bm"), bn=64, staged=0))
            if first.get("bn") == 256:  # and 128 pixels a tile, the rule before 256 was timed
                others.insert(0, first.with_params(bn=128))
        elif "nhwc" in self.space(group, facts).knobs.get(first.variant, {}):  # 64 rows: the channels-last copy too
            others.insert(0, first.with_params(nhwc=1))
        seeds = [first]
        for config in others:
            if config not in seeds:
                seeds.append(config)
        return seeds[:4]

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"conv: {reason}")
        if ctx.loaders is not None or ctx.storers is not None:
            raise TemplateError("conv: fused loaders / storers are not supported (the epilogue is the group's)")
        prob = self._problem(group)
        p = ctx.prefix
        # The GEMM epilogue reads only ``out`` and ``has_n`` of its problem; a ConvProblem has both.
        epi = Epilogue(group, prob, ctx, self.sizes)
        ctype = c_type(prob.dtype)
        warp_group = config.variant in conv_wgmma.VARIANTS
        extra = conv_wgmma.PROB_FIELDS if warp_group else ()
        device = [f"// ---- {p}: {group.describe()} {config.label()} ----", _prob_struct(p, ctype, epi, extra)]
        device.append(epi.device(p))
        workspace = "0"
        if prob.transposed_weight:
            device.append(_forward_weight_kernel(p, ctype))
        includes: tuple[str, ...] = ()
        if prob.dtype == "bfloat16":
            includes = ("<cuda_bf16.h>",)
        elif prob.dtype == "float16":
            includes = ("<cuda_fp16.h>",)
        tf32 = rounds_to_tf32(prob, ctx.facts)
        if tf32 and config.variant in ("implicit", "stencil", "direct", "gather"):
            includes += (PTX_INCLUDE,)  # optiml_round_tf32
        if config.variant == "implicit":
            bm, bn, tm, tn = (int(config.get(k)) for k in ("bm", "bn", "tm", "tn"))
            threads = (bm // tm) * (bn // tn)
            stride = prob.stride if prob.transposed else None
            device += [
                _implicit_kernel(p, config, prob, tf32),
                _tiled_launch(p, f"{p}_implicit", bm, bn, threads, stride=stride),
            ]
        elif config.variant in ("tf32x3", "tf32"):
            bm, bn, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "wm", "wn"))
            stride = prob.stride if prob.transposed else None
            includes += (PTX_INCLUDE,)
            device += [
                _tf32_kernel(p, config, prob, single=config.variant == "tf32"),
                _tiled_launch(p, f"{p}_tf32_conv", bm, bn, wm * wn * 32, vec=4, stride=stride),
            ]
        elif config.variant == "mma":
            bm, bn, wm, wn = (int(config.get(k)) for k in ("bm", "bn", "wm", "wn"))
            includes += (PTX_INCLUDE,)
            device += [
                _mma_kernel(p, config, prob),
                _tiled_launch(p, f"{p}_mma_conv", bm, bn, wm * wn * 32, vec=8),
            ]
        elif config.variant in conv_wgmma.VARIANTS:
            threads = conv_wgmma.threads(config)
            head = _block_decode() + "\n" + _tap_table(prob, threads)
            includes += (PTX_INCLUDE,)
            device += [
                conv_wgmma.weight_kernel(p, config),
                *([conv_wgmma.input_kernel(p, config)] if conv_wgmma.channels_last(config) else []),
                conv_wgmma.kernel(p, config, prob, head, _bias_value(prob, "co")),
                conv_wgmma.launch(p, config, prob, MAX_TAPS),
            ]
            dims = [ctx.dim(prob.w, d) for d in range(prob.spatial + 2)]
            if prob.transposed_weight:  # the forward weight's [C_out][C_in / g]: (C_out / g) * g, C_in / g
                dims[:2] = [f"(int64_t)({dims[1]}) * {prob.groups}", f"(int64_t)({dims[0]}) / {prob.groups}"]
            workspace = conv_wgmma.workspace_bytes(config, dims, [ctx.dim(prob.x, d) for d in range(prob.spatial + 2)])
        elif config.variant == "stencil":
            assert prob.kernel is not None  # the space offers stencil only then
            device.append(conv_stencil.code(p, config, prob, prob.kernel, _bias(prob, "co"), ctx.facts, tf32))
        elif config.variant == "gather":
            device.append(conv_gather.code(p, config, prob, _bias(prob, "gz * cout_g + c0 + c"), ctx.facts, tf32))
        else:
            device.append(_direct_code(p, config, prob, ctx.facts, tf32))
        host = [f"{{  // {p}: {group.describe()} {config.label()}", f"  {p}_prob P = {{}};"]
        host += self._shape_host(group, prob, ctx)
        after = ctx.workspace  # where the variants' own workspace starts
        if prob.transposed_weight:
            host += _forward_weight_host(p, ctype, ctx.workspace)
            weight_bytes = " * ".join(f"(int64_t)({ctx.dim(prob.w, d)})" for d in range(prob.spatial + 2))
            forward = f"(({weight_bytes} * (int64_t)sizeof({ctype}) + 255) / 256 * 256)"
            after = f"((char*)({ctx.workspace}) + {p}_fw_bytes)"
            workspace = f"({forward} + {workspace})"
        host += epi.host(p)
        if warp_group:
            host += conv_wgmma.host(config, after) + _fast_division_host("P.Cin_g", "cg")
        host += [f"  const int {p}_err = {p}_launch(P, stream);", f"  if ({p}_err != 0) return {p}_err;", "}"]
        return KernelCode(
            device="\n".join(device), host="\n".join(host) + "\n", workspace_bytes=workspace, includes=includes
        )

    # -- host code: sizes from the operands' shapes ------------------------------------------------------
    def _shape_host(self, group: Group, prob: ConvProblem, ctx: RenderContext) -> list[str]:
        nd = prob.spatial + 2
        dx = [f"(int64_t)({ctx.dim(prob.x, d)})" for d in range(nd)]
        dw = [f"(int64_t)({ctx.dim(prob.w, d)})" for d in range(nd)]
        ones = ["(int64_t)1"] * (3 - prob.spatial)
        ins, ks = ones + dx[2:], ones + dw[2:]
        lines = [
            f"  P.x = {ctx.inp(_slot(group, prob.x)).ptr};",
            f"  P.w = {ctx.inp(_slot(group, prob.w)).ptr};",
            f"  P.bias = {ctx.inp(_slot(group, prob.bias)).ptr if prob.bias is not None else 'nullptr'};",
            f"  P.B = {dx[0]};",
            f"  P.Cin = {dx[1]};",
            f"  P.G = {prob.groups};",
        ]
        if prob.transposed or prob.transposed_weight:  # weight [C_in, C_out / groups, k...]
            lines += ["  P.Cin_g = P.Cin / P.G;", f"  P.Cout_g = {dw[1]};", "  P.Cout = P.Cout_g * P.G;"]
            check = f"{dw[0]} != P.Cin"
        else:  # weight [C_out, C_in / groups, k...]
            lines += [f"  P.Cout = {dw[0]};", f"  P.Cin_g = {dw[1]};", "  P.Cout_g = P.Cout / P.G;"]
            check = "P.Cout % P.G"
        lines.append(f"  if (P.Cin_g * P.G != P.Cin || {check}) return -5;  // channels do not match the groups")
        for i, name in enumerate("DHW"):
            kname, oname, size, kern = f"K{name}", f"O{name}", ins[i], ks[i]
            s, pad, dil, opad = prob.stride[i], prob.padding[i], prob.dilation[i], prob.output_padding[i]
            lines += [f"  P.{name} = {size};", f"  P.{kname} = {kern};"]
            if prob.transposed:
                lines.append(f"  P.{oname} = (P.{name} - 1) * {s} - {2 * pad} + {dil} * (P.{kname} - 1) + {opad + 1};")
            else:
                lines.append(f"  P.{oname} = (P.{name} + {2 * pad} - {dil} * (P.{kname} - 1) - 1) / {s} + 1;")
            lines.append(f"  if (P.{oname} <= 0) return -5;")
        lines += [
            "  P.OS = P.OD * P.OH * P.OW;",
            "  P.OHW = P.OH * P.OW;",
            "  P.KS = P.KD * P.KH * P.KW;",
            "  P.KHW = P.KH * P.KW;",
            "  P.DHW = P.D * P.H * P.W;",
            "  P.M = P.Cout_g;",
            "  P.NP = P.B * P.OS;",
            "  P.K = P.Cin_g * P.KS;",
            "  P.N = 1;",
        ]
        lines += _fast_division_host("P.KS")
        if prob.pointwise:
            lines.append("  if (P.KS != 1) return -5;  // built for a 1x1 kernel")
        return lines


def _slot(group: Group, vid: int) -> int:
    for k, v in enumerate(group.inputs):
        if v == vid:
            return k
    raise TemplateError(f"conv: operand {vid} is not an input of the kernel")
