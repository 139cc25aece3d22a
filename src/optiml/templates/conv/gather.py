"""The ``gather`` variant of a transposed convolution: output-stationary, a chunk of output channels a thread.

A strided transposed convolution with few input channels writes far more than it computes: KernelBench's
level1/81 (32 input channels, a 3x3 kernel at stride 5, dilation 2) writes 831 MB and does 11 products an
output; cuDNN ran it at 1.87 ms against a 0.29 ms DRAM floor and the output phases' GEMMs (``implicit``,
``tf32``: one GEMM per phase, most phases a tap or none) at 7.0 ms (H100, 2026-12-07). The ``direct`` kernel
(a thread an output element) walks every tap of every input channel and tests each for divisibility.

Here a thread owns one output position and ``co`` output channels of one group. It finds, once per axis, the
taps that reach its position — the first from the stride's residue, then every ``stride / gcd(stride,
dilation)``-th, stopping where the input index leaves the input — so a lane iterates only its own taps (a
warp runs as many as its busiest lane has, not the kernel's), and for each tap reads each input channel once
and multiplies it into all ``co`` accumulators. The block's weights (``[tap][input channel][co]``, zero past the
group's last channel; rounded to TF32 there where the task rounds) sit in shared memory, read as 16-byte
broadcasts. Consecutive threads own consecutive positions, so every store of a channel is coalesced. The grid's
``y`` walks (image, group, channel chunk) planes, restaging the weights per plane; its ``x`` the positions.

``wide=1``: a thread owns a stride's worth of consecutive outputs along the last axis, one of each output phase.
Its first column is a multiple of the stride, so each column's residue — and its first tap and step along that
axis — is a constant of the kernel: every lane walks the same taps there (at stride 2 with a 3-tap kernel, odd
positions have two and even ones one: a warp of single positions runs at 75 %, at 50 % where the dilation is 2).
"""

from __future__ import annotations

import math
from typing import Any

from optiml.templates.base import DeviceFacts, GroupConfig, c_type, to_compute
from optiml.templates.conv.stencil import Geometry

GATHER_KNOBS: dict[str, tuple[Any, ...]] = {"threads": (128, 256), "co": (4, 8, 16), "wide": (0, 1)}
IMPLIED = {"wide": 0}  # a configuration that leaves it out: a thread an output position
MAX_ACCUMULATORS = 32  # co x columns a thread holds
STATIC_SMEM = 48 * 1024
ROUNDS = 4  # the grid: positions split so the planes' blocks fill the GPU this many times over


def _weight_bytes(weights: int, co: int) -> int:
    """Shared memory a block's weights take: ``[taps][cin_g][co]`` floats (``weights``: taps x cin_g)."""
    return weights * co * 4


def check(geo: Geometry, weights: int, config: GroupConfig, facts: DeviceFacts) -> str | None:
    """Why ``config`` cannot run this convolution, or None; ``weights``: the most kernel taps x input channels per
    group at any shape set."""
    co = int(config.get("co"))
    cols = geo.stride[2]
    if int(config.get("wide", 0)) and (cols == 1 or cols * co > MAX_ACCUMULATORS):
        return (
            f"{config.label()}: wide needs a stride over 1 along the last axis and at most {MAX_ACCUMULATORS} "
            f"accumulators ({cols} columns x {co} channels)"
        )
    most = _weight_bytes(weights, co)
    if most > facts.smem_per_block_optin:
        return f"{config.label()}: {most} B of weights in shared memory (at most {facts.smem_per_block_optin})"
    return None


def rule(geo: Geometry, weights: int, cout_g: int, facts: DeviceFacts) -> GroupConfig | None:
    """The widest channel chunk (no wider than the group's channels rounded up to 4) whose weights fit 48 KiB,
    else the narrowest that fits at all (None where none does); at stride 2 along the last axis a thread owns both
    phases of a pair of outputs (``wide``: no lane idles while its neighbour walks its taps)."""
    widest = max(4, 1 << max(0, (cout_g - 1).bit_length()))
    fitting = [
        co
        for co in sorted(GATHER_KNOBS["co"], reverse=True)
        if co <= widest and _weight_bytes(weights, co) <= STATIC_SMEM
    ]
    if fitting:
        co = fitting[0]
    elif _weight_bytes(weights, 4) <= facts.smem_per_block_optin:
        co = 4
    else:
        return None
    return GroupConfig.of("gather", threads=256, co=co, **({"wide": 1} if geo.stride[2] == 2 else {}))


def alternatives(geo: Geometry, config: GroupConfig) -> list[GroupConfig]:
    """Seeds beside the rule's ``config``: the other ``wide`` (where valid: at most 16 channels at stride 2, 8 at
    3 or 4, 4 up to 8; a narrower chunk where the rule's is too wide for the columns), then the next narrower
    channel chunk (fewer registers, more reads of the input)."""
    co, wide, cols = int(config.get("co")), int(config.get("wide", 0)), geo.stride[2]
    found = []
    if wide:
        found.append(GroupConfig.of("gather", threads=256, co=co))
    elif 1 < cols <= MAX_ACCUMULATORS // 4:
        fits = min(co, max(c for c in GATHER_KNOBS["co"] if c * cols <= MAX_ACCUMULATORS))
        found.append(GroupConfig.of("gather", threads=256, co=fits, wide=1))
    if co // 2 in GATHER_KNOBS["co"]:
        found.append(config.with_params(co=co // 2))
    return found


def _axis(k: str, o: str, i: str, extent: str, size: str, stride: int, pad: int, dil: int) -> tuple[str, str]:
    """The loop over the taps of one axis that reach output ``o`` (input ``i = (o + pad - k * dil) / stride``
    where that divides and lies in the input), and its first statement."""
    step = stride // math.gcd(stride, dil)
    reach = f"{o} + {pad} - {k} * {dil}"
    if stride == 1:
        first = f"int {k} = 0;"
    elif dil == 1:
        first = f"int {k} = ({o} + {pad}) % {stride};"
    else:  # the first tap whose offset the stride divides; none in the first `step`: none at all
        first = (
            f"int {k} = 0; while ({k} < {step} && ({reach}) % {stride} != 0) ++{k}; if ({k} == {step}) {k} = 1 << 30;"
        )
    header = f"{first} for (; {k} < (int)P.{extent} && {reach} >= 0; {k} += {step})"
    body = f"const int {i} = ({reach}) / {stride}; if ({i} >= (int){size}) continue;"
    return header, body


def tap_loops(geo: Geometry) -> list[tuple[str, str]]:
    """The loops over a transposed convolution's taps that reach output ``(od, oh, ow)``, outermost first, each
    ``(header, first statement)``: the taps ``kz, ky, kx`` and the input position ``id, ih, iw`` each reads. A
    lane walks its own taps only: the first from the stride's residue, then every ``stride / gcd(stride,
    dilation)``-th, until the input index leaves the input."""
    names = (("kz", "od", "id", "KD", "P.D"), ("ky", "oh", "ih", "KH", "P.H"), ("kx", "ow", "iw", "KW", "P.W"))
    return [
        _axis(k, o, i, extent, size, stride, pad, dil)
        for (k, o, i, extent, size), stride, pad, dil in zip(names, geo.stride, geo.padding, geo.dilation, strict=True)
    ]


def nest(loops: list[tuple[str, str]], body: str, indent: str) -> str:
    """``body`` inside ``loops`` (each ``(header, first statement)``, outermost first), indented from ``indent``."""
    lines, pad = [], indent
    for header, first in loops:
        lines += [f"{pad}{header} {{", f"{pad}  {first}"]
        pad += "  "
    lines += [pad + line for line in body.splitlines()]
    for _ in loops:
        pad = pad[:-2]
        lines.append(f"{pad}}}")
    return "\n".join(lines)


def _column(j: int, cols: int, pad: int, dil: int) -> tuple[str, str] | None:
    """The loop over the last axis's taps reaching column ``j`` of a thread's ``cols`` (``cols``: the stride; the
    thread's first column ``ow0`` a multiple of it, so the column's residue and first tap are constants), or None
    where no tap reaches it."""
    step = cols // math.gcd(cols, dil)
    first = next((k for k in range(step) if (k * dil - j - pad) % cols == 0), None)
    if first is None:
        return None
    reach = f"ow0 + {j + pad} - kx * {dil}"
    header = f"if (ow0 + {j} < OW) for (int kx = {first}; kx < (int)P.KW && {reach} >= 0; kx += {step})"
    return header, f"const int iw = ({reach}) / {cols}; if (iw >= (int)P.W) continue;"


def code(p: str, config: GroupConfig, geo: Geometry, bias: str, facts: DeviceFacts, tf32: bool) -> str:
    """Device code and launch of the ``gather`` kernel; ``bias``: statement adding the bias of output channel
    ``gz * cout_g + c0 + c`` to ``v`` (empty without one)."""
    threads, co = int(config.get("threads")), int(config.get("co"))
    cols = geo.stride[2] if int(config.get("wide", 0)) else 1  # consecutive outputs along the last axis a thread
    ctype = c_type(geo.dtype)

    def load(expr: str) -> str:
        value = to_compute(expr, geo.dtype)
        return f"optiml_round_tf32({value})" if tf32 else value

    def products(j: int) -> str:
        """Column ``j``'s products for the tap ``(kz, ky, kx)`` at input ``(id, ih, iw)``."""
        fmas = "\n".join(
            f"  {{ const float4 w4 = *reinterpret_cast<const float4*>(wt + {c}); "
            + " ".join(f"acc[{j}][{c + i}] = fmaf(xv, w4.{lane}, acc[{j}][{c + i}]);" for i, lane in enumerate("xyzw"))
            + " }"
            for c in range(0, co, 4)
        )
        return f"""\
const {ctype}* __restrict__ xp = xg + ((int64_t)id * P.H + ih) * P.W + iw;
const float* __restrict__ wt = ws + ((kz * (int)P.KH + ky) * (int)P.KW + kx) * cin_g * {co};
for (int ci = 0; ci < cin_g; ++ci, wt += {co}) {{
  const float xv = {load("xp[(int64_t)ci * P.DHW]")};
{fmas}
}}"""

    loops = tap_loops(geo)
    if cols == 1:  # the lane's own taps along every axis
        walk = "      const int ow = ow0;\n" + nest(loops, products(0), "      ")
    else:  # a column's taps along the last axis are constants of the kernel: every lane walks the same ones
        found = [(j, column) for j in range(cols) if (column := _column(j, cols, geo.padding[2], geo.dilation[2]))]
        walk = nest(loops[:2], "\n".join(nest([column], products(j), "") for j, column in found), "      ")
    stores = "\n".join(
        f"""\
        if (ow0 + {j} < OW) {{
          float v = acc[{j}][c];
          {bias}
          {p}_epi1(P, at + {j}, 0, v);
        }}"""
        for j in range(cols)
    )
    resident = max(1, facts.max_threads_per_sm // threads)
    # blocks an SM must hold: ptxas's own choice for 256 threads kept 64 registers and spilled (40 bytes at co = 8
    # on a 3-D kernel); these bounds leave it 80 (co * columns <= 8) or 120 (16 and more), unspilled on
    # KernelBench's shapes
    min_blocks = (2 if co * cols >= 16 else 3) * 256 // threads
    return f"""\
// gather: a thread {"an output position" if cols == 1 else f"{cols} consecutive outputs (one of each phase)"}, {co}
// output channels of one group; the block's weights in shared memory.
__global__ void __launch_bounds__({threads}, {min_blocks}) {p}_gather(const {p}_prob P) {{
  extern __shared__ __align__(16) unsigned char {p}_smem[];
  float* __restrict__ ws = reinterpret_cast<float*>({p}_smem);
  const int cin_g = (int)P.Cin_g, cout_g = (int)P.Cout_g, chunks = (cout_g + {co - 1}) / {co};
  const int weights = (int)P.KS * cin_g * {co};
  const int planes = (int)P.B * (int)P.G * chunks, groups = (int)P.G;
  const int OW = (int)P.OW, OWg = (OW + {cols - 1}) / {cols}, OHWg = (int)P.OH * OWg, OSg = (int)P.OD * OHWg;
  for (int plane = (int)blockIdx.y; plane < planes; plane += (int)gridDim.y) {{
    const int chunk = plane % chunks, gz = plane / chunks % groups;
    const int64_t b = plane / chunks / groups;
    const int c0 = chunk * {co};
    __syncthreads();  // every thread is done with the previous plane's weights
    for (int e = (int)threadIdx.x; e < weights; e += {threads}) {{
      const int c = e % {co}, r = e / {co}, ci = r % cin_g, tap = r / cin_g;
      ws[e] = c0 + c < cout_g ? {load("P.w[((int64_t)(gz * cin_g + ci) * cout_g + c0 + c) * P.KS + tap]")} : 0.f;
    }}
    __syncthreads();
    const {ctype}* __restrict__ xg = P.x + (b * P.Cin + (int64_t)gz * cin_g) * P.DHW;
    for (int o = (int)(blockIdx.x * {threads} + threadIdx.x); o < OSg; o += (int)gridDim.x * {threads}) {{
      const int od = o / OHWg, oh = (o - od * OHWg) / OWg, ow0 = (o - od * OHWg - oh * OWg) * {cols};
      float acc[{cols}][{co}];
#pragma unroll
      for (int j = 0; j < {cols}; ++j)
#pragma unroll
        for (int c = 0; c < {co}; ++c) acc[j][c] = 0.f;
{walk}
      const int64_t first = (b * P.Cout + (int64_t)gz * cout_g + c0) * P.OS + ((int64_t)od * P.OH + oh) * OW + ow0;
#pragma unroll
      for (int c = 0; c < {co}; ++c) {{
        if (c0 + c >= cout_g) continue;
        const int64_t at = first + c * P.OS;
{stores}
      }}
    }}
  }}
}}
static int {p}_launch({p}_prob& P, cudaStream_t stream) {{
  if (P.B * P.Cout <= 0 || P.OS <= 0) return 0;
  const int64_t planes = P.B * P.G * ((P.Cout_g + {co - 1}) / {co});
  if (P.OS > 2147483647LL - {threads * cols} || planes > 2147483647LL || P.KS * P.Cin_g * {co} > 2147483647LL) {{
    return -4;  // 32-bit positions, planes and weights
  }}
  const int64_t smem = P.KS * P.Cin_g * {co} * (int64_t)sizeof(float);
  if (smem > {facts.smem_per_block_optin}) return -4;  // the chunk's weights do not fit shared memory
  if (smem > {STATIC_SMEM}) {{
    const cudaError_t e = cudaFuncSetAttribute({p}_gather, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return (int)e;
  }}
  int64_t resident = {facts.smem_per_sm} / (smem + 1024);
  resident = resident < 1 ? 1 : resident > {resident} ? {resident} : resident;
  const int64_t want = {facts.sm_count * ROUNDS} * resident;
  const int64_t gy = planes < 65535 ? planes : 65535;
  int64_t gx = (P.OD * P.OH * ((P.OW + {cols - 1}) / {cols}) + {threads - 1}) / {threads};
  if (gx * gy > want) gx = (want + gy - 1) / gy;
  if (gx < 1) gx = 1;
  {p}_gather<<<dim3((unsigned)gx, (unsigned)gy), {threads}, (size_t)smem, stream>>>(P);
  {{ const cudaError_t e = cudaGetLastError(); if (e != cudaSuccess) return (int)e; }}
  return 0;
}}
"""
