"""The ``stencil`` convolution variant: few terms per output, read from an input box in shared memory.

A convolution with few products per output (depthwise: one input channel per group; or a handful of
input channels and a small kernel) is bound by memory, not arithmetic, so the implicit GEMM's tiles
(one group's ``M`` is its output channels: 1 for depthwise) waste most of their work, and the
one-thread-per-output ``direct`` kernel spends its time on index arithmetic and re-reads every input
element once per tap through L1 (H200, 2026-12-02: 1.80 ms against exact-fp32 cuDNN's 1.05 ms on the
suite's 32 x 256 x 112 x 112 depthwise 3x3; the traffic floor is 0.20 ms).

A block owns a column strip of one output plane (``tx`` columns at one output depth, of one (image,
output channel)) and walks ``dgx`` of its row tiles (``ty * rows`` rows each): as many as leave the GPU
four rounds of resident blocks, so the block's index arithmetic and launch are paid once for several
tiles (one tile a block ran instruction-bound: 75 % issue, 19 % of DRAM bandwidth, ncu on the suite's
depthwise task). For each tile and input channel of the group it stages the input box that tile
reads (``KD`` depth slices of ``(TH - 1) * sh + (KH - 1) * dh + 1`` rows of
``(TW - 1) * sw + (KW - 1) * dw + 1`` columns, zero outside the input: the padding) in shared memory
with coalesced loads, holds that channel's kernel weights in registers, and each thread computes
``rows`` consecutive output rows of one column: every box row it reads (``KW`` values) feeds every
output row whose window covers it. The kernel extents are compile-time constants (the weight's shape
at every traced shape set; the launch returns -5 on any other), so the tap loops unroll and every
index is a constant offset.
"""

from __future__ import annotations

from typing import Any, Protocol

from optiml.templates.base import DeviceFacts, GroupConfig, c_type, ceil_pow2, to_compute

STENCIL_KNOBS: dict[str, tuple[Any, ...]] = {"tx": (32, 64, 128, 256), "ty": (1, 2, 4, 8), "rows": (1, 2, 4, 8)}
MAX_TAPS = 64  # kernel weights one thread holds in registers
SMEM_BYTES = 48 * 1024


class Geometry(Protocol):
    """What the stencil reads of a convolution (:class:`optiml.templates.conv.conv.ConvProblem` has it)."""

    dtype: str
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]
    transposed: bool


def fixed_kernel(kernels: list[tuple[int, int, int]]) -> tuple[int, int, int] | None:
    """The kernel extents if every traced shape set has the same ones (the stencil compiles them in)."""
    return kernels[0] if len(set(kernels)) == 1 else None


def box_bytes(geo: Geometry, kernel: tuple[int, int, int], config: GroupConfig) -> int:
    tx, ty, rows = (int(config.get(k)) for k in ("tx", "ty", "rows"))
    _, bh, bw = _box(geo, kernel, tx, ty * rows)
    return kernel[0] * bh * bw * 4


def _box(geo: Geometry, kernel: tuple[int, int, int], tw: int, th: int) -> tuple[int, int, int]:
    """(depth slices, rows, columns) of the input box an output tile of ``th`` rows by ``tw`` columns reads."""
    (_, sh, sw), (_, dh, dw) = geo.stride, geo.dilation
    kd, kh, kw = kernel
    return kd, (th - 1) * sh + (kh - 1) * dh + 1, (tw - 1) * sw + (kw - 1) * dw + 1


def check(geo: Geometry, kernel: tuple[int, int, int] | None, config: GroupConfig) -> str | None:
    """Why ``config`` cannot be rendered for this convolution, or None."""
    if geo.transposed or kernel is None:
        return "stencil: a forward convolution with the same kernel extents at every shape set"
    taps = kernel[0] * kernel[1] * kernel[2]
    if taps > MAX_TAPS:
        return f"stencil: {taps} kernel taps (at most {MAX_TAPS} held in registers)"
    threads = int(config.get("tx")) * int(config.get("ty"))
    if threads > 512:
        return f"{config.label()}: {threads} threads per block (at most 512)"
    smem = box_bytes(geo, kernel, config)
    if smem > SMEM_BYTES:
        return f"{config.label()}: an input box of {smem} B (at most {SMEM_BYTES} of shared memory)"
    return None


def tile(out_h: int, out_w: int) -> GroupConfig:
    """The rule's tile for an output plane of ``out_h x out_w``: 64 columns by up to 16 rows on planes
    wider than 32 (the seed that won on all three depthwise suite tasks, H200, 2026-12-02,
    conv_stencil_register_cap.json: 0.60 ms against 0.88 ms for 32 x 32 on the 3x3 one, 0.31 against
    0.38 on the 5x5 one), else 32 columns by up to 32 rows; 4 rows a thread; columns widened while the
    block has fewer than 128 threads and the plane is wider."""
    wide = out_w > 32
    th = min(ceil_pow2(out_h), 16 if wide else 32)
    rows = min(4, th)
    ty = th // rows
    tx = 64 if wide else 32
    while tx * ty < 128 and tx < min(ceil_pow2(out_w), 256):
        tx *= 2
    return GroupConfig.of("stencil", tx=tx, ty=ty, rows=rows)


def alternatives(first: GroupConfig) -> list[GroupConfig]:
    """Seeds beside the rule's tile: twice the rows a thread computes, and twice the columns a block
    covers (half as many threads high), each staging less halo per output."""
    rows, tx, ty = (int(first.get(k)) for k in ("rows", "tx", "ty"))
    out = []
    if rows * 2 in STENCIL_KNOBS["rows"]:
        out.append(first.with_params(rows=rows * 2))
    if tx * 2 in STENCIL_KNOBS["tx"] and ty > 1:
        out.append(first.with_params(tx=tx * 2, ty=ty // 2))
    return out


def code(
    p: str,
    config: GroupConfig,
    geo: Geometry,
    kernel: tuple[int, int, int],
    bias: str,
    facts: DeviceFacts,
    tf32: bool = False,
) -> str:
    """The stencil kernel and its launch; ``bias`` is the statement adding the conv's bias to ``v``; ``tf32``:
    inputs and weights rounded to TF32 as they are staged (``optiml_round_tf32``, from ``optiml_ptx.h``)."""
    tx, ty, rows = (int(config.get(k)) for k in ("tx", "ty", "rows"))
    threads, th = tx * ty, ty * rows
    resident_blocks = facts.resident_blocks(threads)
    kd, kh, kw = kernel
    taps = kd * kh * kw
    # A register cap from what a thread holds (weights, accumulators, a box row, ~32 for indices and
    # pointers), trimmed by up to 8 towards 64: occupancy is what hides this kernel's memory latency.
    # Same-call A/Bs (H200, conv_stencil_register_cap.json): a 3x3 kernel at 48 registers against 64,
    # 0.644 -> 0.604 ms; a 5x5 one at 64 (a small spill) against 80, 0.309 against 0.363 ms. Larger
    # kernels (7x7: 96 estimated, capped at 88) are not measured. ptxas alone took 40 registers and a
    # spill in one fp16 config.
    estimate = -(-max(40, taps + rows + kw + 32) // 8) * 8
    registers = estimate if estimate <= 64 else max(64, estimate - 8)
    min_blocks = max(1, 65536 // (registers * threads))
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = geo.stride, geo.padding, geo.dilation
    _, bh, bw = _box(geo, kernel, tx, th)
    box = kd * bh * bw
    ctype = c_type(geo.dtype)
    in_rows = (rows - 1) * sh + (kh - 1) * dh + 1  # box rows one thread reads
    load = to_compute("src[x]", geo.dtype)
    weight = to_compute("wc[t]", geo.dtype)
    if tf32:
        load, weight = f"optiml_round_tf32({load})", f"optiml_round_tf32({weight})"
    # Which (output row, kernel row) pairs each box row of the thread feeds: all constants.
    feeds = []
    for j in range(in_rows):
        pairs = [(r, (j - r * sh) // dh) for r in range(rows) if j >= r * sh and (j - r * sh) % dh == 0]
        pairs = [(r, ky) for r, ky in pairs if ky < kh]
        if pairs:
            fmas = "\n".join(
                f"          acc[{r}] = fmaf(v[kx], wr[(kz * {kh} + {ky}) * {kw} + kx], acc[{r}]);" for r, ky in pairs
            )
            feeds.append(f"""\
      {{  // box row {j} of this thread
        const float* __restrict__ src = slice + (ly * {rows * sh} + {j}) * {bw} + lx * {sw};
        float v[{kw}];
#pragma unroll
        for (int kx = 0; kx < {kw}; ++kx) v[kx] = src[kx * {dw}];
#pragma unroll
        for (int kx = 0; kx < {kw}; ++kx) {{
{fmas}
        }}
      }}""")
    feed = "\n".join(feeds)
    return f"""\
// stencil: a block walks row tiles of {th} x {tx} outputs down one column strip of a plane; per tile and input
// channel it stages the tile's input box ({kd} x {bh} x {bw} floats), and each thread computes {rows} output rows
// of one column from it, the weights in registers.
__global__ void __launch_bounds__({threads}, {min_blocks}) {p}_stencil(const {p}_prob P) {{
  constexpr int KS = {taps};  // kernel taps
  __shared__ float box[{box}];
  uint32_t rest = blockIdx.x;
  const int tw = (int)(rest % (uint32_t)P.tiles_n);
  rest /= (uint32_t)P.tiles_n;
  const int group = (int)(rest % (uint32_t)P.dgy);
  rest /= (uint32_t)P.dgy;
  const int od = (int)(rest % (uint32_t)P.OD);
  const uint32_t plane = rest / (uint32_t)P.OD;
  const int co = (int)(plane % (uint32_t)P.Cout), b = (int)(plane / (uint32_t)P.Cout);
  const int gz = co / (int)P.Cout_g;
  const int ow0 = tw * {tx}, iw0 = ow0 * {sw} - {pw}, id0 = od * {sd} - {pd};
  const int lx = (int)threadIdx.x % {tx}, ly = (int)threadIdx.x / {tx};
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int ow = ow0 + lx;
  const int64_t plane_base = ((int64_t)plane * P.OD + od) * P.OHW;
  const int tr_end = (group + 1) * (int)P.dgx < (int)P.tiles_m ? (group + 1) * (int)P.dgx : (int)P.tiles_m;
  for (int tr = group * (int)P.dgx; tr < tr_end; ++tr) {{
    const int oh0 = tr * {th}, ih0 = oh0 * {sh} - {ph};
    float acc[{rows}];
#pragma unroll
    for (int r = 0; r < {rows}; ++r) acc[r] = 0.f;
    for (int ci = 0; ci < (int)P.Cin_g; ++ci) {{
      const {ctype}* __restrict__ xc = P.x + ((int64_t)b * P.Cin + gz * P.Cin_g + ci) * P.DHW;
      const {ctype}* __restrict__ wc = P.w + ((int64_t)co * P.Cin_g + ci) * KS;
      __syncthreads();  // every thread is done with the previous box
      // the box, a row per warp at a time (bounds and address once a row), lanes along the row
#pragma unroll 4
      for (int row = warp; row < {kd * bh}; row += {threads // 32}) {{
        const int z = row / {bh}, id = id0 + z * {dd}, ih = ih0 + row - z * {bh};
        const bool inside = (unsigned)id < (unsigned)P.D && (unsigned)ih < (unsigned)P.H;
        const {ctype}* __restrict__ src = xc + ((int64_t)id * P.H + ih) * P.W + iw0;
#pragma unroll
        for (int x = lane; x < {bw}; x += 32)
          box[row * {bw} + x] = inside && (unsigned)(iw0 + x) < (unsigned)P.W ? {load} : 0.f;
      }}
      float wr[KS];
#pragma unroll
      for (int t = 0; t < KS; ++t) wr[t] = {weight};
      __syncthreads();
#pragma unroll
      for (int kz = 0; kz < {kd}; ++kz) {{
        const float* __restrict__ slice = box + kz * {bh * bw};
{feed}
      }}
    }}
    if (ow < (int)P.OW) {{
#pragma unroll
      for (int r = 0; r < {rows}; ++r) {{
        const int oh = oh0 + ly * {rows} + r;
        if (oh < (int)P.OH) {{
          float v = acc[r];
          {bias}
          {p}_epi1(P, plane_base + (int64_t)oh * P.OW + ow, 0, v);
        }}
      }}
    }}
  }}
}}
static int {p}_launch({p}_prob& P, cudaStream_t stream) {{
  if (P.B * P.Cout <= 0 || P.OS <= 0) return 0;
  if (P.KD != {kd} || P.KH != {kh} || P.KW != {kw}) return -5;  // built for a {kd}x{kh}x{kw} kernel
  if (P.OH > 2147483647LL - {th} || P.OW > 2147483647LL - {tx}) return -4;
  P.tiles_n = (P.OW + {tx - 1}) / {tx};
  P.tiles_m = (P.OH + {th - 1}) / {th};
  // Row tiles per block (dgx): as many as leave four rounds of resident blocks; dgy groups of them.
  const int64_t strips = P.B * P.Cout * P.OD * P.tiles_n;
  int64_t per = strips * P.tiles_m / {4 * resident_blocks};
  per = per < 1 ? 1 : per > P.tiles_m ? P.tiles_m : per;
  P.dgx = per;
  P.dgy = (P.tiles_m + per - 1) / per;
  const int64_t blocks = strips * P.dgy;
  if (blocks > 2147483647LL) return -4;
  {p}_stencil<<<(unsigned)blocks, {threads}, 0, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""
