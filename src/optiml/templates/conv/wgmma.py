"""Hopper warp-group implicit-GEMM convolution kernels of the conv template (sm_90a).

Three variants, one structure:

* ``wgmma`` (float16 / bfloat16): ``wgmma.mma_async.m64n{bn}k16`` with fp32 accumulation, 64-deep k
  slices (one 128-byte row of 16-bit values a tile row).
* ``tf32x3_wgmma`` (float32, fp32 accuracy): the GEMM template's 3xTF32 arithmetic on
  ``wgmma.mma_async.m64n{bn}k8.tf32`` (:mod:`optiml.templates.gemm.tf32_wgmma`): each value is split
  once, when staged, into a big and a small TF32 part stored in two tiles; 32-deep k slices.
* ``tf32_wgmma`` (float32 tasks at PyTorch's default precision, ``OPTIML["precision"] = "tf32"``): the
  same instruction once a k-step on one tile an operand, every value rounded to TF32 to nearest — what
  cuDNN multiplies there (`benchmarks/tf32_rounding_probe.py`) — so the output matches that reference
  to summation order; the weights are rounded when reordered and copied by ``cp.async``, the gathered
  inputs rounded as they are stored.

The GEMM is the conv template's (:mod:`optiml.templates.conv.conv`): ``A[m][k]`` the weights (reordered: below), ``B``
the im2col matrix, never stored. A block is ``bm / 64`` warp groups (each owns 64 output channels) over a
``bm x bn`` tile. Both operands sit in shared memory k-major in the 128-byte swizzle the descriptors name
(16-byte chunk ``c`` of row ``r`` at chunk ``c ^ (r % 8)``; tiles on 1024-byte boundaries), two stages:

* the weights are copied into the workspace at every call (:func:`weight_kernel`: they are an input) with
  rows padded to a 16-byte chunk, so a weight chunk is one aligned load (half values by ``cp.async``
  straight into the stage, floats through registers to be split), and **tap-major** (``k = tap * Cin_g +
  ci``) where ``Cin_g`` is a multiple of a chunk;
* each thread gathers 16-byte chunks (8 halves or 4 floats: consecutive k) of one im2col column, lanes on
  consecutive columns so a warp's loads are coalesced along the output row. In the kernel's ``FAST``
  instance (tap-major) a chunk is one tap of consecutive channels: one tap-table read and one bounds test,
  then loads a plane apart; otherwise k walks each channel's taps (a multiply-high division per chunk).
  Offsets within an image's channels of a group are 32-bit (launch-checked). Only the bounds of the
  convolution's own spatial dims are tested. A half pointwise convolution whose images hold a multiple of
  8 pixels gathers nothing: its ``FAST`` instance copies 8 pixels at a time by ``cp.async`` into n-major
  panels that the MMA reads transposed.

**Channels last** (``nhwc=1``; a windowed convolution whose k is tap-major): the input is copied channels-last into
the workspace first (:func:`input_kernel`; 1xTF32 rounds it there, 3xTF32 writes its big and small parts as two
copies, and the weights' reorder splits them too), so a chunk of the
im2col matrix (one tap, consecutive channels) is 16 contiguous bytes: one ``cp.async`` straight into the stage,
zero-filled outside the input, in place of a chunk's 4 or 8 loads a plane apart through registers. Eight lanes
copy one column's eight chunks (128 contiguous bytes where a k slice lies in one tap); each thread decodes the
columns it copies once per block. Every copy being asynchronous, the instance runs :data:`PIPELINE_STAGES` stages
(three with 3xTF32's double tiles where four do not fit).

A slice's MMAs are issued, then the next slice is loaded and stored into the other stage while they run;
the block commits and waits for its copies (``cp.async.wait_group`` waits for committed groups only), waits
for its MMAs, and one barrier ends the slice (the stage the stores refill was read by the MMAs of the slice
before, finished before that barrier). The accumulators go through the fused epilogue one element at a time: by
default (``staged=1``) through shared memory, a warp storing 32 consecutive pixels of one output channel at a time
(:func:`_staged_epilogue`); with ``staged=0`` straight from the fragments, a thread's output channels read once and
its columns walked in order (:func:`_epilogue`).
"""

from __future__ import annotations

from typing import Protocol

from optiml.templates.base import GroupConfig
from optiml.templates.gemm import tf32_wgmma as gemm_tf32_wgmma
from optiml.templates.ptx import wgmma_function

ROW = 128  # bytes of a slice row: one 128-byte swizzle row
ALIGN = 1024  # a 128-byte-swizzle atom (8 rows)
MAX_SMEM = 227 * 1024
VARIANTS = ("wgmma", "tf32x3_wgmma", "tf32_wgmma")
REORDER_THREADS = 256
#: Fields of the conv template's problem struct only these kernels use (:func:`host` fills them).
PROB_FIELDS = (
    "  void* wt;                      // the weights reordered into the workspace (weight_kernel)",
    "  int64_t Kp;                    // their row pitch: K rounded up to a 16-byte chunk",
    "  int tapmajor;                  // k = tap * Cin_g + ci (Cin_g a multiple of a chunk), else as stored",
    "  uint32_t cg_mul;               // k / Cin_g by multiply-high (0: Cin_g == 1)",
    "  int cg_shr;",
    "  void* xn;                      // the input channels-last in the workspace (nhwc=1's instance)",
    "  int parts;                     // 3xTF32's NHWC instance: weights and input copied as big, then small parts",
)
HALF_KNOBS: dict[str, tuple[int, ...]] = {"bm": (64, 128), "bn": (64, 128, 256)}
TF32_KNOBS: dict[str, tuple[int, ...]] = {"bm": (64, 128), "bn": (64, 128)}
#: 1xTF32 (one tile an operand) also takes 256 pixels a tile: m64n256k8, 128 accumulators a thread
TF32_SINGLE_KNOBS: dict[str, tuple[int, ...]] = {"bm": (64, 128), "bn": (64, 128, 256)}
#: Stages of the channels-last instance, whose slices all move by ``cp.async``: three slices in flight while one
#: slice's MMAs run (two stages left the MMAs waiting on a slice's gather latency).
PIPELINE_STAGES = 4
TABLE_RESERVE = 16 * 1024  # shared memory the conv template's static tables may take beside the stages
#: Offered to windowed convolutions of the three variants.
NHWC_KNOB: dict[str, tuple[int, ...]] = {"nhwc": (0, 1)}
#: How the accumulators reach the output: ``staged`` 1 (left out: 1) through shared memory, a warp storing a row's
#: consecutive pixels; 0 straight from the accumulator fragments (8 channels by 4 pixels two apart a store).
STAGED_KNOB: dict[str, tuple[int, ...]] = {"staged": (0, 1)}
#: Columns the staged epilogue moves through shared memory at a time, and its row pitch in floats: 72 = 8 mod 32
#: banks, so a fragment's pair stores (8 rows by 4 column pairs a half-warp) meet no bank twice.
STAGED_COLUMNS = 64
STAGED_PITCH = STAGED_COLUMNS + 8


class ConvGeometry(Protocol):
    """What these kernels read of a convolution (:class:`optiml.templates.conv.conv.ConvProblem` has it)."""

    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    spatial: int
    pointwise: bool
    dtype: str


def split(config: GroupConfig) -> bool:
    """Whether ``config`` is the 3xTF32 variant (two tiles an operand: big and small parts)."""
    return config.variant == "tf32x3_wgmma"


def single_tf32(config: GroupConfig) -> bool:
    """Whether ``config`` is the 1xTF32 variant (a task at PyTorch's default precision: one tile an operand,
    each value rounded to TF32 to nearest, as cuDNN rounds there; one MMA a k-step, fp32 accumulation)."""
    return config.variant == "tf32_wgmma"


def floats(config: GroupConfig) -> bool:
    """Whether ``config`` stages fp32 values (the TF32 variants) rather than halves."""
    return split(config) or single_tf32(config)


def channels_last(config: GroupConfig) -> bool:
    """Whether ``config`` gathers from a channels-last copy of the input (``nhwc=1``)."""
    return bool(config.get("nhwc", 0))


def staged(config: GroupConfig) -> bool:
    """Whether ``config`` stores its accumulators through shared memory (``staged=1``, the default)."""
    return bool(config.get("staged", 1))


def parts(config: GroupConfig) -> int:
    """Copies of each value the workspace holds: 2 for 3xTF32's channels-last instance (big and small parts)."""
    return 2 if split(config) and channels_last(config) else 1


def threads(config: GroupConfig) -> int:
    return int(config.get("bm")) // 64 * 128


def stage_bytes(config: GroupConfig) -> int:
    bm, bn = int(config.get("bm")), int(config.get("bn"))
    return (2 if split(config) else 1) * (bm + bn) * ROW


def stages(config: GroupConfig) -> int:
    """Shared-memory stages: :data:`PIPELINE_STAGES` where every copy is asynchronous (``nhwc=1``), else two."""
    if not channels_last(config):
        return 2
    fits = PIPELINE_STAGES * stage_bytes(config) + ALIGN + TABLE_RESERVE <= MAX_SMEM
    return PIPELINE_STAGES if fits else PIPELINE_STAGES - 1


def smem_bytes(config: GroupConfig) -> int:
    """Dynamic shared memory: the stages and the alignment slack of the dynamic base."""
    return stages(config) * stage_bytes(config) + ALIGN


def vec(config: GroupConfig) -> int:
    """Values in a 16-byte chunk of a slice row: 4 floats or 8 halves."""
    return 4 if floats(config) else 8


def check(config: GroupConfig, tables: int) -> str | None:
    """Why ``config`` is illegal, or None (``tables``: the conv template's static shared tables, bytes)."""
    bm, bn = int(config.get("bm")), int(config.get("bn"))
    knobs = TF32_SINGLE_KNOBS if single_tf32(config) else TF32_KNOBS if floats(config) else HALF_KNOBS
    if bm not in knobs["bm"] or bn not in knobs["bn"]:
        return f"{config.label()}: bm in {knobs['bm']} (warp groups of 64 rows), bn in {knobs['bn']}"
    if bn > threads(config):
        return f"{config.label()}: one im2col column a thread ({bn} columns, {threads(config)} threads)"
    if smem_bytes(config) + tables > MAX_SMEM:
        return f"{config.label()}: {smem_bytes(config) + tables} B of shared memory (at most {MAX_SMEM})"
    return None


def _decode_column(prob: ConvGeometry, bn: int) -> str:
    """Statements: this thread's im2col column ``n0 + tid % bn`` as its image's first input channel of the
    group (``X``) and, for a windowed convolution, the window's origin (``iz``, ``iy``, ``ix``; ``xo`` its
    offset in the plane, maybe in the padding). Chunk ``f = tid + l * threads`` of the ``bn x 8``-chunk B
    tile is column ``f % bn``, chunk ``f / bn``: lanes take consecutive columns, and with ``threads`` a
    multiple of ``bn`` a thread keeps one column."""
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.padding
    lines = [
        f"  const int64_t n = n0 + (int)threadIdx.x % {bn};",
        "  const bool ncol = n < P.NP;",
        "  const int b = ncol ? (int)n / (int)P.OS : 0, o = ncol ? (int)n - b * (int)P.OS : 0;",
    ]
    if prob.pointwise:
        return "\n".join([*lines, "  const X_T* __restrict__ X = xp + (b * P.Cin + gz * P.Cin_g) * P.OS + o;"])
    return "\n".join(
        [
            *lines,
            "  const int od = o / (int)P.OHW, oh = (o / (int)P.OW) % (int)P.OH, ow = o % (int)P.OW;",
            f"  const int iz = od * {sd} - {pd}, iy = oh * {sh} - {ph}, ix = ow * {sw} - {pw};",
            "  const X_T* __restrict__ X = xp + (b * P.Cin + gz * P.Cin_g) * P.DHW;",
            "  const int xo = (iz * (int)P.H + iy) * (int)P.W + ix;",
        ]
    )


def _inside(prob: ConvGeometry, origin: tuple[str, str, str] = ("iz", "iy", "ix")) -> str:
    """The bounds test of a gathered element at tap ``tp`` of the window at ``origin`` (its z, y, x): the conv's
    spatial dims only (a 1-D or 2-D convolution's leading extents are 1 and its taps' offsets there 0)."""
    iz, iy, ix = origin
    tests = [
        f"(unsigned)({axis} + tp.{part}) < {bound}"
        for axis, part, bound, dim in ((iz, "x", "Du", 3), (iy, "y", "Hu", 2), (ix, "z", "Wu", 1))
        if prob.spatial >= dim
    ]
    return " && ".join(tests)


def _gather_chunk(prob: ConvGeometry, vec: int, ctype: str) -> str:
    """Statements: ``e[0..vec)``, the im2col values at k = ``gk`` .. ``gk + vec - 1`` of this thread's
    column, zero outside ``K`` and the input. Offsets from the column's ``X`` are 32-bit (the launch checks
    ``Cin_g * DHW < 2^31``). Tap-major (``FAST``: ``Cin_g`` a multiple of ``vec``): the chunk is one tap of
    ``vec`` consecutive channels, bounds-tested once; otherwise k walks the taps of each channel in turn."""
    if prob.pointwise:
        body = f"""\
          int off = (int)gk * OSi;
#pragma unroll
          for (int j = 0; j < {vec}; ++j) {{
            if (j < kin) e[j] = X[off];
            off += OSi;
          }}"""
    else:
        body = f"""\
          if (FAST) {{  // one tap of {vec} consecutive channels; K is a multiple of {vec}
            const int tap = P.cg_mul ? (int)(__umulhi((unsigned)gk, P.cg_mul) >> P.cg_shr) : (int)gk;
            const int4 tp = taps[tap];
            if ({_inside(prob)}) {{
              int off = ((int)gk - tap * CGi) * DHWi + xo + tp.w;
#pragma unroll
              for (int j = 0; j < {vec}; ++j) {{
                e[j] = X[off];
                off += DHWi;
              }}
            }}
          }} else {{  // k = ci * KS + tap: the taps of each channel in turn
            const int ci = P.ks_mul ? (int)(__umulhi((unsigned)gk, P.ks_mul) >> P.ks_shr) : (int)gk;
            int t = (int)gk - ci * KSi, off = ci * DHWi + xo;
#pragma unroll
            for (int j = 0; j < {vec}; ++j) {{
              const int4 tp = taps[t];
              if (j < kin && {_inside(prob)}) e[j] = X[off + tp.w];
              if (++t == KSi) {{
                t = 0;
                off += DHWi;
              }}
            }}
          }}"""
    return f"""\
        {ctype} e[{vec}];
#pragma unroll
        for (int j = 0; j < {vec}; ++j) e[j] = ({ctype})0;
        const int64_t gk = k0 + (int64_t)c * {vec};
        if (ncol && gk < P.K) {{
          const int kin = P.K - gk < {vec} ? (int)(P.K - gk) : {vec};
          (void)kin;
{body}
        }}"""


def _b_staging(p: str, prob: ConvGeometry, config: GroupConfig) -> tuple[str, str, str]:
    """(declarations, loads, stores) of the B tile: chunks gathered into registers ``rb``, then stored."""
    bn, nthreads, tf32 = int(config.get("bn")), threads(config), floats(config)
    per, chunk = bn * 8 // nthreads, f"(int)threadIdx.x / {bn} + l * {nthreads // bn}"
    vec, ctype = (4, "float") if tf32 else (8, "unsigned short")
    if tf32:
        keep = "rb[l] = make_float4(e[0], e[1], e[2], e[3]);"
        decl = f"  float4 rb[{per}];"
    else:
        words = ", ".join(f"e[{2 * q}] | ((unsigned)e[{2 * q + 1}] << 16)" for q in range(4))
        keep = f"rb[l] = make_uint4({words});"
        decl = f"  uint4 rb[{per}];"
    loads = f"""\
#pragma unroll
    for (int l = 0; l < {per}; ++l) {{
      const int c = {chunk};
{_gather_chunk(prob, vec, ctype)}
        {keep}
    }}
"""
    where = (
        f"const int c = {chunk}, r = (int)threadIdx.x % {bn};\n"
        f"      const unsigned at = (unsigned)(r * {ROW} + ((c ^ (r & 7)) << 4));"
    )
    if split(config):
        put = gemm_tf32_wgmma.split_float4(p, "rb[l]", 6) + "\n" + gemm_tf32_wgmma.store_split(p, "b", 6)
    elif tf32:  # 1xTF32: each value rounded as it is stored
        words = ", ".join(f"__float_as_uint(optiml_round_tf32(rb[l].{c}))" for c in "xyzw")
        put = f"      optiml_sts16(b_big + at, {words});"
    else:
        put = "      optiml_sts16(b_big + at, rb[l].x, rb[l].y, rb[l].z, rb[l].w);"
    stores = f"""\
#pragma unroll
    for (int l = 0; l < {per}; ++l) {{
      {where}
{put}
    }}
"""
    if prob.pointwise and not tf32:  # FAST: 16-byte copies of 8 pixels, B n-major (read transposed)
        loads = f"    if (FAST) {{\n{_pixel_copies(p, config)}    }} else {{\n{loads}    }}\n"
        stores = f"    if (!FAST) {{\n{stores}    }}\n"
    elif channels_last(config):  # NHWC (with FAST): 16-byte copies of one tap's channels from the copy
        loads = f"    if (NHWC) {{\n{_channel_copies(prob, config)}    }} else {{\n{loads}    }}\n"
        stores = f"    if (!NHWC) {{\n{stores}    }}\n"
    return decl, loads, stores


def _channel_rows(config: GroupConfig) -> tuple[int, int]:
    """(columns a thread copies, threads a column step apart) of the channel copies: 8 chunks a column."""
    return int(config.get("bn")) * 8 // threads(config), threads(config) // 8


def _channel_columns(prob: ConvGeometry, config: GroupConfig) -> str:
    """Statements: the columns this thread copies in :func:`_channel_copies` (``threadIdx.x / 8`` and every
    ``threads / 8`` after it), decoded once: each one's image in the channels-last copy (``cX``), its window's
    origin (``cz``, ``cy``, ``cx``) and that origin's pixel (``co``)."""
    per, rows = _channel_rows(config)
    sd, sh, sw = prob.stride
    pd, ph, pw = prob.padding
    return f"""  const int cc = (int)threadIdx.x & 7;  // this thread's 16-byte chunk of a slice row
  const X_T* __restrict__ xn = (const X_T*)P.xn;
  const X_T* cX[{per}];
  int cz[{per}], cy[{per}], cx[{per}], co[{per}];
  bool cn[{per}];
#pragma unroll
  for (int l = 0; l < {per}; ++l) {{
    const int64_t n = n0 + (int)threadIdx.x / 8 + l * {rows};
    cn[l] = n < P.NP;
    const int b = cn[l] ? (int)n / (int)P.OS : 0, o = cn[l] ? (int)n - b * (int)P.OS : 0;
    const int od = o / (int)P.OHW, oh = (o / (int)P.OW) % (int)P.OH, ow = o % (int)P.OW;
    cz[l] = od * {sd} - {pd};
    cy[l] = oh * {sh} - {ph};
    cx[l] = ow * {sw} - {pw};
    co[l] = (cz[l] * (int)P.H + cy[l]) * (int)P.W + cx[l];
    cX[l] = xn + (int64_t)b * P.DHW * P.Cin + gz * P.Cin_g;
  }}"""


def _channel_copies(prob: ConvGeometry, config: GroupConfig) -> str:
    """A slice of B by ``cp.async`` from the channels-last copy: chunk ``cc`` (k = ``k0 + 8 cc`` ..., one tap of
    consecutive channels: k is tap-major) of each of this thread's columns, stored where the register path stores
    it (row = column, 128-byte swizzle), zero-filled past ``K`` and outside the input."""
    per, rows = _channel_rows(config)
    inside = _inside(prob, ("cz[l]", "cy[l]", "cx[l]"))
    # 3xTF32: the small parts' copy lies one input after the big parts'
    small = "\n        optiml_cp16(b_small + at, ok ? (const void*)(src + P.B * P.DHW * P.Cin) : P.xn, ok);"
    small = small if split(config) else ""
    return f"""      const int64_t gk = k0 + (int64_t)cc * {vec(config)};
      const bool kin = gk < P.K;
      const int tap = !kin ? 0 : P.cg_mul ? (int)(__umulhi((unsigned)gk, P.cg_mul) >> P.cg_shr) : (int)gk;
      const int ci = (int)gk - tap * CGi;
      const int4 tp = taps[tap];
#pragma unroll
      for (int l = 0; l < {per}; ++l) {{
        const int r = (int)threadIdx.x / 8 + l * {rows};
        const bool ok = kin && cn[l] && {inside};
        const unsigned at = (unsigned)(r * {ROW} + ((cc ^ (r & 7)) << 4));
        const X_T* src = cX[l] + (int64_t)(co[l] + tp.w) * P.Cin + ci;
        optiml_cp16(b_big + at, ok ? (const void*)src : P.xn, ok);{small}
      }}
"""


def _pixel_columns(bn: int) -> str:
    """Statements: this thread's 8-pixel chunk of the tile's columns for :func:`_pixel_copies` (``OS`` a
    multiple of 8, so a chunk is 8 pixels of one image): its image's channels from ``Xpix``."""
    return f"""\
  const int pc = (int)threadIdx.x % {bn // 8};  // this thread's chunk of 8 columns (pixels)
  const int64_t npix = n0 + pc * 8;
  const bool pix_ok = npix < P.NP;
  const int pimg = pix_ok ? (int)npix / OSi : 0, popx = pix_ok ? (int)npix - pimg * OSi : 0;
  const X_T* __restrict__ Xpix = xp + ((int64_t)pimg * P.Cin + gz * P.Cin_g) * P.OS + popx;"""


def _pixel_copies(p: str, config: GroupConfig) -> str:
    """A pointwise half conv's B slice by ``cp.async``: ``B[k][n] = x[b][k][pixel]`` is contiguous in n, so
    it lands n-major, in 64-column panels of 64 k rows (128 bytes: the swizzle of the GEMM's ``a @ b``
    B, :mod:`optiml.templates.gemm.wgmma`), read transposed by the MMA."""
    bn, nthreads = int(config.get("bn")), threads(config)
    per_row = bn // 8
    return f"""\
#pragma unroll
      for (int l = 0; l < {bn * 8 // nthreads}; ++l) {{
        const int k = (int)threadIdx.x / {per_row} + l * {nthreads // per_row};
        const bool ok = pix_ok && k0 + k < P.K;
        const unsigned at = (unsigned)((pc >> 3) * {64 * ROW} + k * {ROW} + (((pc & 7) ^ (k & 7)) << 4));
        optiml_cp16(b_big + at, ok ? (const void*)(Xpix + (int64_t)(k0 + k) * OSi) : (const void*)xp, ok);
      }}
"""


def _a_staging(p: str, config: GroupConfig) -> tuple[str, str, str]:
    """(declarations, loads, stores) of the weight tile from the reordered weights (rows ``Kp`` apart, so
    every chunk is 16-byte aligned): ``bm x 8`` chunks, four a thread. Half: ``cp.async`` into the stage
    at load time. 3xTF32: through registers ``ra``, split when stored."""
    nthreads = threads(config)
    where = f"const int f = (int)threadIdx.x + l * {nthreads}, r = f >> 3, c = f & 7;"
    at = f"const unsigned at = (unsigned)(r * {ROW} + ((c ^ (r & 7)) << 4));"
    inside = f"const int64_t gm = m0 + r, gk = k0 + c * {vec(config)};\n      const bool ok = gm < P.M && gk < P.Kp;"

    def copies(parts: tuple[str, ...]) -> str:
        """The weight chunks by ``cp.async`` into each tile of ``parts`` (``big``, and 3xTF32's ``small``, whose
        copy the reorder wrote one weight tensor on)."""
        lines = [
            f"      optiml_cp16(a_{part} + at, Wg + {'P.Cout * P.Kp + ' if part == 'small' else ''}"
            "(ok ? gm * P.Kp + gk : 0), ok);"
            for part in parts
        ]
        return f"""\
#pragma unroll
    for (int l = 0; l < 4; ++l) {{
      {where}
      {inside}
      {at}
{chr(10).join(lines)}
    }}
"""

    if not split(config):
        return "", copies(("big",)), ""
    loads = f"""\
#pragma unroll
    for (int l = 0; l < 4; ++l) {{
      {where}
      {inside}
      ra[l] = ok ? *(const float4*)(Wg + gm * P.Kp + gk) : make_float4(0.f, 0.f, 0.f, 0.f);
    }}
"""
    if channels_last(config):  # the reorder wrote the big parts, then the small ones: both by cp.async
        loads = f"    if (NHWC) {{\n{copies(('big', 'small'))}    }} else {{\n{loads}    }}\n"
    stores = f"""\
#pragma unroll
    for (int l = 0; l < 4; ++l) {{
      {where}
      {at}
{gemm_tf32_wgmma.split_float4(p, "ra[l]", 6)}
{gemm_tf32_wgmma.store_split(p, "a", 6)}
    }}
"""
    if channels_last(config):
        stores = f"    if (!NHWC) {{\n{stores}    }}\n"
    return "  float4 ra[4];", loads, stores


# -- the kernel ------------------------------------------------------------------------------------------
def kernel(p: str, config: GroupConfig, prob: ConvGeometry, head: str, bias: str) -> str:
    """``{p}_wgmma_conv<FAST>`` (launch with :func:`smem_bytes` of dynamic shared memory, :func:`threads`).
    ``head``: statements decoding the block (``tmi``, ``tni``, ``gz``) and filling the tap table;
    ``bias``: the convolution's bias of channel ``co`` as a value ("" without one)."""
    bm, bn = int(config.get("bm")), int(config.get("bn"))
    nthreads, tf32 = threads(config), floats(config)
    a_bytes, b_bytes, stage = bm * ROW, bn * ROW, stage_bytes(config)
    ctype = "float" if tf32 else "unsigned short"
    a_decl, a_load, a_store = _a_staging(p, config)
    b_decl, b_load, b_store = _b_staging(p, prob, config)
    bk = 32 if tf32 else 64
    pixels = prob.pointwise and not tf32
    pixel_decl = ""
    if not tf32:  # B by 16-byte pixel copies, n-major (a pointwise conv's FAST instance)
        pixel_decl = f"  constexpr bool PIXELS = {'FAST' if pixels else 'false'};"
        pixel_decl = (_pixel_columns(bn) + "\n" if pixels else "") + pixel_decl
    if channels_last(config) and not prob.pointwise:
        pixel_decl += "\n" + _channel_columns(prob, config)
    if split(config):
        addresses = f"""\
    const unsigned a_big = s0 + (unsigned)buf * {stage}u, a_small = a_big + {a_bytes}u;
    const unsigned b_big = a_small + {a_bytes}u, b_small = b_big + {b_bytes}u;"""
        regs = f"""\
  float acc[{bn // 2}], part[{bn // 2}];
#pragma unroll
  for (int i = 0; i < {bn // 2}; ++i) acc[i] = part[i] = 0.f;"""
        mmas = gemm_tf32_wgmma.slice_mmas(p, bn, stage, a_bytes, b_bytes)
        sum_partial = f"#pragma unroll\n    for (int i = 0; i < {bn // 2}; ++i) acc[i] += part[i];"
        pipelined_mmas = gemm_tf32_wgmma.slice_mmas(p, bn, stage, a_bytes, b_bytes, f"(kt % {stages(config)})")
    else:  # one tile an operand: fp16 / bf16, or 1xTF32 on the rounded tiles, straight into the accumulators
        addresses = f"""\
    const unsigned a_big = s0 + (unsigned)buf * {stage}u, b_big = a_big + {a_bytes}u;"""
        regs = f"""\
  float acc[{bn // 2}];
#pragma unroll
  for (int i = 0; i < {bn // 2}; ++i) acc[i] = 0.f;"""
        if tf32:  # one MMA a k-step of 8
            da, db = (f"optiml_desc({base} + ks * 32u, 16u, 1024u)" for base in ("ab", "bb"))
            steps = f"""\
    for (unsigned ks = 0; ks < {bk // 8}; ++ks)
      optiml_wgmma_tf32<{bn}>(acc, {da}, {db}, 1);"""
        else:
            steps = f"""\
    for (unsigned ks = 0; ks < {bk // 16}; ++ks) {{
      const unsigned long long da = optiml_desc(ab + ks * 32u, 16u, 1024u);
      if (PIXELS)  // n-major panels: LBO the panel stride, SBO eight k rows
        {wgmma_function(prob.dtype, bn, False)}(acc, da, optiml_desc(bb + ks * {16 * ROW}u, {64 * ROW}u, 1024u));
      else
        {wgmma_function(prob.dtype, bn, True)}(acc, da, optiml_desc(bb + ks * 32u, 16u, 1024u));
    }}"""

        def issue(slot: str) -> str:
            return f"""\
    const unsigned ab = s0 + (unsigned){slot} * {stage}u + (unsigned)wg * {64 * ROW}u;
    const unsigned bb = s0 + (unsigned){slot} * {stage}u + {a_bytes}u;
    optiml_wg_fence();
#pragma unroll
{steps}
    optiml_wg_commit();"""

        mmas = issue("(kt & 1)")
        pipelined_mmas = issue(f"(kt % {stages(config)})")
        sum_partial = ""
    slice_code = f"""\
  {{
{addresses}
{a_load}{b_load}{a_store}{b_store}  }}
"""
    epilogue = _staged_epilogue(p, bm, bn, bias) if staged(config) else _epilogue(p, bn, bias)
    kind = (
        "3xTF32 (big / small tiles)"
        if split(config)
        else "1xTF32 (operands rounded to nearest)"
        if tf32
        else ("fp16 / bf16")
    )
    return f"""\
// Implicit GEMM on warp-group MMAs, {kind}: {bm}x{bn} tile per block, {bm // 64} warp group(s) of 64 output
// channels, {bk}-deep slices in two 128-byte-swizzled stages; the next slice is gathered and stored while the
// current one's MMAs run{" (NHWC: copied from the input's channels-last copy)" if channels_last(config) else ""}.
template <bool FAST, bool NHWC>
__global__ void __launch_bounds__({nthreads}) {p}_wgmma_conv(const {p}_prob P) {{
  typedef {ctype} X_T;
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  const unsigned s0 = ((unsigned)__cvta_generic_to_shared({p}_smem) + {ALIGN - 1}u) & ~{ALIGN - 1}u;
  const int wg = (int)threadIdx.x >> 7, lane = (int)threadIdx.x & 31, warp = ((int)threadIdx.x >> 5) & 3;
{head}
  const int64_t m0 = tmi * {bm}, n0 = tni * {bn};
  const X_T* __restrict__ Wg = (const X_T*)P.wt + gz * P.M * P.Kp;
  const X_T* __restrict__ xp = (const X_T*)P.x;
  const int KSi = (int)P.KS, CGi = (int)P.Cin_g, DHWi = (int)P.DHW, OSi = (int)P.OS;
  const unsigned Du = (unsigned)P.D, Hu = (unsigned)P.H, Wu = (unsigned)P.W;
  (void)KSi, (void)CGi, (void)DHWi, (void)OSi, (void)Du, (void)Hu, (void)Wu;
{_decode_column(prob, bn)}
{pixel_decl}
{a_decl}
{b_decl}
{regs}
  const int64_t KT = (P.K + {bk - 1}) / {bk};
{_pipelined_loop(config, bk, slice_code, pipelined_mmas, sum_partial) if channels_last(config) else ""}\
  {{
  if (KT > 0) {{
    const int buf = 0;
    const int64_t k0 = 0;
{slice_code}  }}
  optiml_cp_commit();  // wait_group waits for committed groups only
  optiml_cp_wait<0>();
  optiml_proxy_fence();
  __syncthreads();
  for (int64_t kt = 0; kt < KT; ++kt) {{
{mmas}
    if (kt + 1 < KT) {{  // the other stage was read by slice kt - 1's MMAs, finished before the last barrier
      const int buf = (int)((kt + 1) & 1);
      const int64_t k0 = (kt + 1) * {bk};
{slice_code}    }}
    optiml_wg_wait<0>();
{sum_partial}
    optiml_cp_commit();
    optiml_cp_wait<0>();
    optiml_proxy_fence();
    __syncthreads();
  }}
  }}
{epilogue}}}
"""


def _column_walk(first: str) -> str:
    """Statements: the output column ``first`` (an im2col column) as its image and pixel, its offset in the NCHW
    output less its channel's (``col_at``), and the step from past an image's last pixel to the next image's first
    (``next_image``): where the epilogues start walking a thread's columns (:data:`_WRAP_INTO_NEXT_IMAGE`)."""
    return f"""\
    const int64_t img = {first} / P.OS;
    int pix = (int)({first} - img * P.OS);
    int64_t col_at = img * P.Cout * P.OS + pix;  // the column's output offset, less its channel's
    const int64_t next_image = (P.Cout - 1) * P.OS;  // from past an image's last pixel to the next image's first"""


#: After a step of ``pix`` and ``col_at``: the column moved past its image's last pixel, into the images after it.
_WRAP_INTO_NEXT_IMAGE = """\
        while (pix >= OSi) {
          pix -= OSi;
          col_at += next_image;
        }"""


def _epilogue(p: str, bn: int, bias: str) -> str:
    """The accumulators into the NCHW output through the fused epilogue (``{p}_epi1``), element by element.
    Register ``4 j + 2 h + q`` is column ``8 j + 2 (lane % 4) + q`` of row ``16 w + lane / 4 + 8 h`` (the GEMM
    epilogue's layout, :func:`optiml.templates.gemm.wgmma.accumulator_epilogue`). A thread's two rows (output
    channels: their offset in an image and their bias) are read once; its columns are walked in order from the
    first one's image and pixel, stepping into the next image where a column passes the last pixel — in place of
    a division and a bias load an element."""
    row_bias = f"row_bias[h] = has_row[h] ? {bias} : 0.f;" if bias else ""
    add_bias = " + row_bias[h]" if bias else ""
    return f"""\
  // accumulator layout: warp w of the group has rows 16 w + lane / 4 (+ 8); register 4 j + 2 h + q is
  // column 8 j + 2 (lane % 4) + q of row + 8 h
  {{
    int64_t row_at[2];
    bool has_row[2];{chr(10) + "    float row_bias[2];" if bias else ""}
#pragma unroll
    for (int h = 0; h < 2; ++h) {{
      const int64_t m = m0 + wg * 64 + warp * 16 + lane / 4 + 8 * h, co = gz * P.M + m;
      has_row[h] = m < P.M;
      row_at[h] = co * P.OS;{chr(10) + "      " + row_bias if bias else ""}
    }}
    const int64_t first = n0 + 2 * (lane % 4);  // this thread's column of j = q = 0
    const int OSi = (int)P.OS;
{_column_walk("first")}
#pragma unroll
    for (int j = 0; j < {bn // 8}; ++j)
#pragma unroll
      for (int q = 0; q < 2; ++q) {{
        if (first + (8 * j + q) < P.NP) {{
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (has_row[h]) {p}_epi1(P, col_at + row_at[h], 0, acc[4 * j + 2 * h + q]{add_bias});
        }}
        const int step = q == 0 ? 1 : 7;  // to column 8 j + 2 (lane % 4) + 1, then to the next j's first
        pix += step;
        col_at += step;
{_WRAP_INTO_NEXT_IMAGE}
      }}
  }}
"""


def _staged_epilogue(p: str, bm: int, bn: int, bias: str) -> str:
    """The accumulators into the NCHW output through shared memory, :data:`STAGED_COLUMNS` columns at a time: the
    fragments are written to a ``bm x STAGED_COLUMNS`` tile (pitch :data:`STAGED_PITCH`), then each warp takes whole
    rows (an output channel: its offset and bias read once a row) and its lanes consecutive columns (pixels), so a
    store instruction writes 32 consecutive outputs of one channel — where the fragments' order writes 8 channels by
    4 pixels two apart, three times the sectors of the data (level 1's 63 at TF32: 12 sectors a request, L2 at 80 %
    of its peak; ncu_conv_tf32_63_h100_2026-12-07.json). A lane's columns are walked from its first one's image and
    pixel, 32 at a time, stepping into the next image past an image's last pixel. The stage tiles fit the tile (the
    smallest, 64 + 64 rows of two stages, holds 64 rows of it); a barrier first: the other warp group's MMAs read
    the stages until it."""
    chunks, per_lane = bn // STAGED_COLUMNS, STAGED_COLUMNS // 32
    add_bias = " + b" if bias else ""
    row_bias = f"\n          const float b = {bias};" if bias else ""
    return f"""\
  // accumulator layout: warp w of the group has rows 16 w + lane / 4 (+ 8); register 4 j + 2 h + q is
  // column 8 j + 2 (lane % 4) + q of row + 8 h. Staged: {chunks} chunk(s) of {STAGED_COLUMNS} columns through shared
  // memory, each warp storing whole rows, its lanes on consecutive pixels.
  {{
    float* const tile = reinterpret_cast<float*>({p}_smem);
    const int wid = (int)threadIdx.x >> 5;
    int64_t col = n0 + lane;  // this lane's column of the tile, walked 32 at a time
{_column_walk("col")}
#pragma unroll
    for (int chunk = 0; chunk < {chunks}; ++chunk) {{
      __syncthreads();  // the stages (or the chunk before) are read no more
#pragma unroll
      for (int jj = 0; jj < {STAGED_COLUMNS // 8}; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {{
          const int r = wg * 64 + warp * 16 + lane / 4 + 8 * h, j = chunk * {STAGED_COLUMNS // 8} + jj;
          float2* const at = (float2*)&tile[r * {STAGED_PITCH} + 8 * jj + 2 * (lane % 4)];
          *at = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        }}
      __syncthreads();
      int64_t at[{per_lane}];
      bool in[{per_lane}];
#pragma unroll
      for (int k = 0; k < {per_lane}; ++k) {{
        in[k] = col < P.NP;
        at[k] = col_at;
        col += 32;
        pix += 32;
        col_at += 32;
{_WRAP_INTO_NEXT_IMAGE}
      }}
      for (int r = wid; r < {bm}; r += {bm // 16}) {{
        const int64_t m = m0 + r;
        if (m < P.M) {{
          const int64_t co = gz * P.M + m, row_at = co * P.OS;{row_bias}
#pragma unroll
          for (int k = 0; k < {per_lane}; ++k)
            if (in[k]) {p}_epi1(P, at[k] + row_at, 0, tile[r * {STAGED_PITCH} + 32 * k + lane]{add_bias});
        }}
      }}
    }}
  }}
"""


def _pipelined_loop(config: GroupConfig, bk: int, slice_code: str, mmas: str, sum_partial: str) -> str:
    """The channels-last instance's main loop: ``S`` stages, slices ``kt + 1 .. kt + S - 1`` in flight while slice
    ``kt``'s MMAs run. One commit group a slice (empty past the last), so waiting until ``S - 2`` groups are pending
    means slice ``kt`` has landed; the stage refilled in iteration ``kt`` held slice ``kt - 1``, whose MMAs every
    thread waited for before the barrier that opens the iteration."""
    n = stages(config)
    return f"""\
  if (NHWC) {{  // every copy asynchronous: {n} stages
  for (int s = 0; s < {n - 1}; ++s) {{
    if (s < KT) {{
      const int buf = s;
      const int64_t k0 = (int64_t)s * {bk};
{slice_code}    }}
    optiml_cp_commit();
  }}
  for (int64_t kt = 0; kt < KT; ++kt) {{
    optiml_cp_wait<{n - 2}>();
    optiml_proxy_fence();
    __syncthreads();
{mmas}
    if (kt + {n - 1} < KT) {{
      const int buf = (int)((kt + {n - 1}) % {n});
      const int64_t k0 = (kt + {n - 1}) * {bk};
{slice_code}    }}
    optiml_cp_commit();
    optiml_wg_wait<0>();
{sum_partial}
  }}
  optiml_cp_wait<0>();
  }} else
"""


# -- the weights, the launch -----------------------------------------------------------------------------
def weight_kernel(p: str, config: GroupConfig) -> str:
    """``{p}_wreorder``: the weights copied into the workspace as the kernel reads them (every call: they
    are an input), rows ``Kp`` apart and zero past ``K``, tap-major where ``P.tapmajor``."""
    ctype = "float" if floats(config) else "unsigned short"
    value = "w[m * P.K + (P.tapmajor ? ci * P.KS + tap : k)]"
    if single_tf32(config):
        value = f"optiml_round_tf32({value})"
    rounded = " (rounded to TF32: the 1xTF32 kernel copies them as they are)" if single_tf32(config) else ""
    store = "wt[i] = v;"
    if parts(config) == 2:  # the NHWC instance copies the parts: big ones, then small ones
        rounded = " (split into TF32 parts, big then small, for the NHWC instance)"
        store = (
            "if (P.parts) { unsigned big, small; optiml_split(v, big, small); wt[i] = __uint_as_float(big); "
            "wt[total + i] = __uint_as_float(small); } else wt[i] = v;"
        )
    return f"""\
// The weights as the warp-group kernel reads them{rounded}: output channel m's row holds k in [0, Kp), tap-major
// (k = tap * Cin_g + ci) when P.tapmajor, else as stored (k = ci * KS + tap); zero past K.
__global__ void __launch_bounds__({REORDER_THREADS}) {p}_wreorder(const {p}_prob P) {{
  const {ctype}* __restrict__ w = (const {ctype}*)P.w;
  {ctype}* __restrict__ wt = ({ctype}*)P.wt;
  const int64_t total = P.Cout * P.Kp;
  for (int64_t i = (int64_t)blockIdx.x * {REORDER_THREADS} + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * {REORDER_THREADS}) {{
    const int64_t m = i / P.Kp, k = i - m * P.Kp;
    {ctype} v = ({ctype})0;
    if (k < P.K) {{
      const int64_t tap = k / P.Cin_g, ci = k - tap * P.Cin_g;
      v = {value};
    }}
    {store}
  }}
}}
"""


def input_kernel(p: str, config: GroupConfig) -> str:
    """``{p}_xnhwc``: the input copied channels-last into the workspace (``[B][DHW][Cin]``), by 32 x 32 tiles
    through shared memory (both sides coalesced); 1xTF32 rounds each value as it is copied."""
    ctype = "float" if floats(config) else "unsigned short"
    value = "optiml_round_tf32(t[tx][q])" if single_tf32(config) else "t[tx][q]"
    write = f"xn[at] = {value};"
    if split(config):  # the big parts, then one input on the small ones
        write = (
            "{ unsigned big, small; optiml_split(t[tx][q], big, small); xn[at] = __uint_as_float(big); "
            "xn[P.B * P.DHW * P.Cin + at] = __uint_as_float(small); }"
        )
    return f"""\
// The input channels-last (NHWC) for the warp-group kernel's NHWC instance: tile (image, 32 pixels, 32 channels)
// i of a grid-stride walk, read along pixels and written along channels. Tiles, pixels and channels counted in
// 32 bits (launch-checked); each tile's corners in the two layouts found once; a thread's four reads in flight
// together.
__global__ void __launch_bounds__(256) {p}_xnhwc(const {p}_prob P) {{
  __shared__ {ctype} t[32][33];
  const {ctype}* __restrict__ x = (const {ctype}*)P.x;
  {ctype}* __restrict__ xn = ({ctype}*)P.xn;
  const int DHWi = (int)P.DHW, Cini = (int)P.Cin;
  const unsigned tp = ((unsigned)DHWi + 31u) / 32u, tc = ((unsigned)Cini + 31u) / 32u, per_image = tp * tc;
  const unsigned tiles = (unsigned)P.B * per_image;
  const int tx = (int)threadIdx.x & 31, ty = (int)threadIdx.x >> 5;
  for (unsigned i = blockIdx.x; i < tiles; i += gridDim.x) {{
    const unsigned b = i / per_image, r = i - b * per_image;
    const int q0 = (int)(r / tc) * 32, c0 = (int)(r % tc) * 32;
    const int64_t from = ((int64_t)b * Cini + c0) * DHWi + q0, to = ((int64_t)b * DHWi + q0) * Cini + c0;
    {ctype} v[4];  // the four loads issued before any is stored
#pragma unroll
    for (int k = 0; k < 4; ++k) {{
      const int c = ty + 8 * k;
      v[k] = c0 + c < Cini && q0 + tx < DHWi ? x[from + (int64_t)c * DHWi + tx] : ({ctype})0;
    }}
#pragma unroll
    for (int k = 0; k < 4; ++k) t[ty + 8 * k][tx] = v[k];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 4; ++k) {{
      const int q = ty + 8 * k;
      const int64_t at = to + (int64_t)q * Cini + tx;
      if (c0 + tx < Cini && q0 + q < DHWi) {write}
    }}
    __syncthreads();
  }}
}}
"""


def launch(p: str, config: GroupConfig, prob: ConvGeometry, max_taps: int) -> str:
    """``{p}_launch``: the weights reordered, then the kernel's ``FAST`` instance where it applies (a windowed
    convolution: ``Cin_g`` a multiple of a chunk, so k is tap-major; a half pointwise one: pixels per image
    a multiple of 8 and the input 16-byte aligned, so B moves by 16-byte copies), else the general one."""
    bm, bn, nthreads, smem = int(config.get("bm")), int(config.get("bn")), threads(config), smem_bytes(config)

    def start(instance: str) -> str:
        kernel = f"{p}_wgmma_conv<{instance}>"
        copy = ""
        if instance == "true, true":  # the channels-last copy first
            copy = f"""\
    const int64_t tiles = P.B * ((P.DHW + 31) / 32) * ((P.Cin + 31) / 32);
    if (tiles > 2147483647LL || P.Cin > 2147483647LL) return -4;  // the copy counts them in 32 bits
    {p}_xnhwc<<<(unsigned)(tiles < 65536 ? tiles : 65536), 256, 0, stream>>>(P);
"""
        return f"""\
{copy}    // the shared-memory limit raised at every call (about a microsecond): no state kept across calls
    const cudaError_t e = cudaFuncSetAttribute({kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});
    if (e != cudaSuccess) return (int)e;
    {kernel}<<<(unsigned)blocks, {nthreads}, {smem}, stream>>>(P);"""

    if prob.pointwise and floats(config):  # no FAST instance: TF32 values are rounded through registers
        body = f"  {{\n{start('false, false')}\n  }}"
    else:
        fast = "P.OS % 8 == 0 && ((uintptr_t)P.x & 15) == 0" if prob.pointwise else "P.tapmajor != 0"
        nhwc = "true" if channels_last(config) and not prob.pointwise else "false"
        body = f"  if ({fast}) {{\n{start('true, ' + nhwc)}\n  }} else {{\n{start('false, false')}\n  }}"
    return f"""\
static int {p}_launch({p}_prob& P, cudaStream_t stream) {{
  if (P.M <= 0 || P.NP <= 0) return 0;
  // 32-bit pixels and offsets within an image's channels of a group
  if (P.K > 2147483647LL || P.NP > 2147483647LL || P.Cin_g * P.DHW > 2147483647LL) return -4;
  if (P.KS > {max_taps}) return -5;  // more kernel taps than the shared table holds
  P.tapmajor = P.Cin_g % {vec(config)} == 0;
  P.parts = {"P.tapmajor" if parts(config) == 2 and not prob.pointwise else "0"};
  P.tiles_m = (P.M + {bm - 1}) / {bm};
  P.tiles_n = (P.NP + {bn - 1}) / {bn};
  const int64_t blocks = P.G * P.tiles_m * P.tiles_n;
  if (blocks > 2147483647LL) return -4;
  const int64_t words = P.Cout * P.Kp;
  const int64_t reorder = (words + {REORDER_THREADS - 1}) / {REORDER_THREADS};
  {p}_wreorder<<<(unsigned)(reorder < 4096 ? reorder : 4096), {REORDER_THREADS}, 0, stream>>>(P);
{body}
  {{ const cudaError_t err = cudaGetLastError(); if (err != cudaSuccess) return (int)err; }}
  return 0;
}}
"""


def host(config: GroupConfig, workspace: str) -> list[str]:
    """Host statements after the shapes: the reordered weights' place and pitch, and the channels-last copy's
    place after them (256-byte aligned)."""
    size = (4 if floats(config) else 2) * parts(config)
    return [
        f"  P.Kp = (P.K + {vec(config) - 1}) / {vec(config)} * {vec(config)};",
        f"  P.wt = (void*)({workspace});",
        f"  P.xn = (void*)((char*)P.wt + (P.Cout * P.Kp * {size} + 255) / 256 * 256);",
    ]


def workspace_bytes(config: GroupConfig, weight_dims: list[str], input_dims: list[str]) -> str:
    """A C expression: the reordered weights' bytes (``weight_dims``: the weight's dims, ``[C_out][C_in/g]
    [k...]``): ``C_out`` rows of ``K`` rounded up to a chunk; with ``nhwc=1`` (windowed convolutions only), rounded
    up to 256 bytes and followed by the input's channels-last copy (``input_dims``: the input's dims)."""
    chunk, size = vec(config), (4 if floats(config) else 2) * parts(config)
    k = " * ".join(f"(int64_t)({d})" for d in weight_dims[1:])
    weights = f"((int64_t)({weight_dims[0]}) * ((({k}) + {chunk - 1}) / {chunk} * {chunk}) * {size})"
    if not channels_last(config):
        return weights
    copy = " * ".join(f"(int64_t)({d})" for d in input_dims)
    return f"(({weights} + 255) / 256 * 256 + {copy} * {size})"
