"""An ``nn.LSTM`` / ``nn.GRU`` (every layer, one or two directions) as two kernels and a host loop.

Per layer and direction: the **input projection** of every step at once — one tiled GEMM,
``gx[t, b, :] = x_t[b] · W_ihᵀ + b_ih`` (``+ b_hh`` for an LSTM, whose hidden bias adds in the same
place) — then one **step** kernel per time step, in order (reversed for the backward direction):
the recurrent product ``h_{t-1} · W_hhᵀ`` fused with the cell's gates and state update. A warp owns one
hidden unit for ``rows`` batch rows: its lanes split the reduction over the previous hidden state, so
each row of ``W_hh`` is read once per warp, and lane 0 applies the gates. The cell state is updated in
place (only its owner reads it); hidden states go straight into the layer's output sequence, which is
the next step's input, the next layer's input, or the group's output.

PyTorch's gate order and formulas: LSTM ``i, f, g, o`` (``c' = σ(f)·c + σ(i)·tanh(g)``,
``h' = σ(o)·tanh(c')``); GRU ``r, z, n`` (``n = tanh(gx_n + σ(r)·(W_hn h + b_hn))``,
``h' = (1 − σ(z))·n + σ(z)·h``). Both directions of a layer step in one launch (``blockIdx.y``), so the
launch count is about ``layers × (steps + 2 × directions)``. float32 only.
"""

from __future__ import annotations

from dataclasses import dataclass

from optiml.graph.ir import Node
from optiml.templates.base import DeviceFacts, GroupConfig, KernelCode, RenderContext, Space, TemplateError
from optiml.templates.group import Group
from optiml.templates.kernel_io import launch_check

GATES = {"lstm": 4, "gru": 3}
ROWS = (1, 2, 4, 8)
THREADS = (128, 256)
_TILE, _DEPTH = 64, 16  # the projection GEMM's output tile (64 × 64, 4 × 4 a thread) and K step


@dataclass(frozen=True)
class _Layer:
    """The recurrent node of a group, as the render needs it."""

    node: Node
    cell: str
    layers: int
    directions: int
    batch_first: bool
    bias: bool

    @classmethod
    def of(cls, group: Group) -> _Layer:
        nodes = [group.graph.nodes[i] for i in group.nodes if group.graph.nodes[i].op in GATES]
        if len(nodes) != 1:
            raise TemplateError("recurrent: a group holds exactly one recurrent layer")
        node = nodes[0]
        return cls(
            node,
            node.op,
            int(node.attr("layers")),
            2 if node.attr("bidirectional") else 1,
            bool(node.attr("batch_first")),
            bool(node.attr("bias")),
        )

    @property
    def states(self) -> int:
        return 2 if self.cell == "lstm" else 1

    def weights(self, layer: int, direction: int) -> list[int]:
        """Value ids of ``weight_ih, weight_hh[, bias_ih, bias_hh]`` of one layer and direction."""
        per = 4 if self.bias else 2
        first = 1 + self.states + (layer * self.directions + direction) * per
        return list(self.node.inputs[first : first + per])


class RecurrentTemplate:
    name = "recurrent"

    def space(self, group: Group, facts: DeviceFacts) -> Space:
        _Layer.of(group)
        return Space({"warp_rows": {"rows": ROWS, "threads": THREADS}})

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        """Two batch rows a warp: each ``W_hh`` row read once for two rows, still a warp per unit and pair."""
        return GroupConfig.of("warp_rows", rows=2, threads=128)

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        return [self.default(group, facts), GroupConfig.of("warp_rows", rows=8, threads=256)]

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode:
        reason = self.space(group, ctx.facts).reason_invalid(config)
        if reason is not None:
            raise TemplateError(f"recurrent: {reason}")
        return _Renderer(group, _Layer.of(group), config, ctx).render()


class _Renderer:
    def __init__(self, group: Group, layer: _Layer, config: GroupConfig, ctx: RenderContext) -> None:
        self.group, self.layer, self.ctx, self.p = group, layer, ctx, ctx.prefix
        self.rows, self.threads = int(config.get("rows")), int(config.get("threads"))
        if ctx.compute_type != "float" or any(group.graph.type(v).dtype != "float32" for v in layer.node.inputs):
            raise TemplateError("recurrent: float32 only")

    # -- operands --------------------------------------------------------------------------------------

    def _input(self, vid: int) -> str | None:
        """The typed pointer of a value the group reads; None for a constant (zeros: a default state)."""
        value = self.group.graph.value(vid)
        if value.is_const:
            if value.const != 0:
                raise TemplateError("recurrent: an initial state that is a nonzero constant")
            return None
        return self.ctx.inp(list(self.group.inputs).index(vid)).ptr

    def _output(self, index: int) -> str | None:
        """The typed pointer of the node's output ``index`` where the group writes it, else None."""
        vid = self.layer.node.outputs[index]
        return self.ctx.out(list(self.group.outputs).index(vid)).ptr if vid in self.group.outputs else None

    # -- device code -----------------------------------------------------------------------------------

    def projection_kernel(self) -> str:
        p = self.p
        return f"""\
// gx[m, n] = sum_k in(m, k) * w[n, k] + b1[n] + b2[n], m = t * B + b; in(m, k) = in[t * s_t + b * s_b + k]
__global__ void __launch_bounds__(256) {p}_project(const float* __restrict__ in, int64_t s_t, int64_t s_b,
    int64_t B, int64_t M, int64_t K, const float* __restrict__ w, const float* __restrict__ b1,
    const float* __restrict__ b2, int64_t N, float* __restrict__ gx) {{
  __shared__ float a_tile[{_DEPTH}][{_TILE} + 1];
  __shared__ float w_tile[{_DEPTH}][{_TILE} + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = (int64_t)blockIdx.y * {_TILE}, n0 = (int64_t)blockIdx.x * {_TILE};
  float acc[4][4] = {{}};
  for (int64_t k0 = 0; k0 < K; k0 += {_DEPTH}) {{
    for (int e = threadIdx.x; e < {_TILE * _DEPTH}; e += 256) {{
      const int r = e / {_DEPTH}, k = e % {_DEPTH};
      const int64_t m = m0 + r, n = n0 + r, kk = k0 + k;
      a_tile[k][r] = (m < M && kk < K) ? in[(m / B) * s_t + (m % B) * s_b + kk] : 0.0f;
      w_tile[k][r] = (n < N && kk < K) ? w[n * K + kk] : 0.0f;
    }}
    __syncthreads();
#pragma unroll
    for (int k = 0; k < {_DEPTH}; ++k) {{
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {{ a[i] = a_tile[k][ty + 16 * i]; b[i] = w_tile[k][tx + 16 * i]; }}
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }}
    __syncthreads();
  }}
#pragma unroll
  for (int i = 0; i < 4; ++i) {{
    const int64_t m = m0 + ty + 16 * i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {{
      const int64_t n = n0 + tx + 16 * j;
      if (n >= N) continue;
      float v = acc[i][j];
      if (b1 != NULL) v += b1[n];
      if (b2 != NULL) v += b2[n];
      gx[m * N + n] = v;
    }}
  }}
}}
"""

    def step_kernel(self) -> str:
        p, rows, gates = self.p, self.rows, GATES[self.layer.cell]
        if self.layer.cell == "lstm":
            apply = f"""\
        const float ig = {p}_sigmoid(g[0]), fg = {p}_sigmoid(g[1]);
        const float cg = tanhf(g[2]), og = {p}_sigmoid(g[3]);
        const float cn = fg * c[b * H + u] + ig * cg;
        c[b * H + u] = cn;
        h_out[b * s_out + u] = og * tanhf(cn);"""
        else:
            apply = f"""\
        const float rg = {p}_sigmoid(g[0] + (b_hh != NULL ? b_hh[u] : 0.0f));
        const float zg = {p}_sigmoid(g[1] + (b_hh != NULL ? b_hh[H + u] : 0.0f));
        const float hn = acc[r][2] + (b_hh != NULL ? b_hh[2 * H + u] : 0.0f);
        const float ng = tanhf(gx[b * G * H + 2 * H + u] + rg * hn);
        h_out[b * s_out + u] = (1.0f - zg) * ng + zg * (h_prev != NULL ? h_prev[b * s_prev + u] : 0.0f);"""
        return f"""\
// one step of every direction (blockIdx.y): a warp owns hidden unit u for {rows} batch row(s); lanes split the
// sum over the previous hidden state, read from the layer's output sequence (h0 at the first step)
struct {p}_direction {{
  const float* gx;    // this direction's input projections, [T][B][G * H]
  const float* w_hh;  // [G * H][H]
  const float* b_hh;  // GRU: the hidden bias, added inside the reset gate's product (LSTM: in gx)
  const float* h0;    // [B][H], or NULL: zeros
  float* c;           // LSTM: the cell state [B][H], updated in place
}};
__global__ void {p}_step({p}_direction forward, {p}_direction backward, int64_t s, int64_t T, float* seq,
    int64_t s_t, int64_t s_out, int64_t B, int64_t H) {{
  const int64_t G = {gates};
  const int d = blockIdx.y;
  const {p}_direction dir = d == 0 ? forward : backward;
  const int64_t t = d == 0 ? s : T - 1 - s;
  const float* h_prev = s == 0 ? dir.h0 : seq + (d == 0 ? t - 1 : t + 1) * s_t + d * H;
  const int64_t s_prev = s == 0 ? H : s_out;
  const float* __restrict__ gx = dir.gx + t * B * G * H;
  const float* __restrict__ w_hh = dir.w_hh;
  const float* __restrict__ b_hh = dir.b_hh;
  float* c = dir.c;
  float* h_out = seq + t * s_t + d * H;
  const int lane = threadIdx.x % 32;
  const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int64_t u = warp % H, b0 = (warp / H) * {rows};
  if (b0 >= B) return;
  float acc[{rows}][{gates}];
#pragma unroll
  for (int r = 0; r < {rows}; ++r)
#pragma unroll
    for (int q = 0; q < {gates}; ++q) acc[r][q] = 0.0f;
  if (h_prev != NULL) {{
    for (int64_t k = lane; k < H; k += 32) {{
      float wk[{gates}];
#pragma unroll
      for (int q = 0; q < {gates}; ++q) wk[q] = w_hh[(q * H + u) * H + k];
#pragma unroll
      for (int r = 0; r < {rows}; ++r) {{
        if (b0 + r >= B) break;
        const float hk = h_prev[(b0 + r) * s_prev + k];
#pragma unroll
        for (int q = 0; q < {gates}; ++q) acc[r][q] = fmaf(wk[q], hk, acc[r][q]);
      }}
    }}
  }}
#pragma unroll
  for (int r = 0; r < {rows}; ++r)
#pragma unroll
    for (int q = 0; q < {gates}; ++q)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[r][q] += __shfl_xor_sync(0xffffffffu, acc[r][q], off);
  if (lane == 0) {{
#pragma unroll
    for (int r = 0; r < {rows}; ++r) {{
      const int64_t b = b0 + r;
      if (b < B) {{
        float g[{gates}];
#pragma unroll
        for (int q = 0; q < {gates}; ++q) g[q] = gx[b * G * H + q * H + u] + acc[r][q];
{apply}
      }}
    }}
  }}
}}
"""

    def copy_kernel(self) -> str:
        return f"""\
// dst[b * H + u] = src ? src[b * s_src + u] : 0 (an initial state in, a final hidden state out)
__global__ void {self.p}_rows(const float* src, int64_t s_src, float* dst, int64_t B, int64_t H) {{
  const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < B * H) dst[e] = src != NULL ? src[(e / H) * s_src + e % H] : 0.0f;
}}
"""

    # -- host code -------------------------------------------------------------------------------------

    def host(self) -> tuple[str, str]:
        p, layer, ctx = self.p, self.layer, self.ctx
        x = layer.node.inputs[0]
        steps, batch = (ctx.dim(x, 1), ctx.dim(x, 0)) if layer.batch_first else (ctx.dim(x, 0), ctx.dim(x, 1))
        hidden = ctx.dim(layer.weights(0, 0)[1], 1)  # weight_hh_l0: (G·H, H)
        gates, directions = GATES[layer.cell], layer.directions
        h0 = self._input(layer.node.inputs[1])
        c0 = self._input(layer.node.inputs[2]) if layer.cell == "lstm" else None
        none = "(const float*)nullptr"  # a zero initial state; no bias
        h0_slot = f"{h0} + slot" if h0 else none
        c0_slot = f"{c0} + slot" if c0 else none
        out, h_n = self._output(0), self._output(1)
        c_n = self._output(2) if layer.cell == "lstm" else None
        sizes = (
            f"const int64_t {p}_T = {steps}, {p}_B = {batch}, {p}_I = {ctx.dim(x, 2)}, {p}_H = {hidden};\n"
            f"    const int64_t {p}_GH = {gates} * {p}_H, {p}_DH = {directions} * {p}_H;\n"
        )
        workspace = (
            f"((size_t)({steps}) * ({batch}) * {directions} * ({gates} * {hidden} + 2 * {hidden})"
            f" + (size_t){directions} * ({batch}) * ({hidden})) * sizeof(float)"
        )
        weights = []
        for index in range(layer.layers * directions):
            ids = layer.weights(index // directions, index % directions)
            ptrs = [self._input(v) for v in ids] + ["nullptr", "nullptr"]
            weights.append(f"{{{ptrs[0]}, {ptrs[1]}, {ptrs[2]}, {ptrs[3]}}}")
        x_ptr = self._input(x)
        # strides (a step, a batch row) of the input sequence and of the output's layout
        x_t, x_b = (f"{p}_I", f"{p}_T * {p}_I") if layer.batch_first else (f"{p}_B * {p}_I", f"{p}_I")
        out_t, out_b = (f"{p}_DH", f"{p}_T * {p}_DH") if layer.batch_first else (f"{p}_B * {p}_DH", f"{p}_DH")
        # the last layer writes the group's output where it has one, else its sequence buffer as the others do
        into_output = ""
        if out is not None:
            into_output = f"      if (l == {p}_L - 1) {{ dst = {out}; dst_t = {out_t}; dst_b = {out_b}; }}\n"
        lstm_bias = "w[3]" if layer.cell == "lstm" else none
        cell = (
            "(float*)nullptr" if layer.cell != "lstm" else (f"{c_n} + slot" if c_n else f"{p}_cell + d * {p}_B * {p}_H")
        )
        h_n_copy = (
            f"""\
      for (int d = 0; d < {p}_D; ++d)  // h_n: the last step of each direction
        {p}_rows<<<{p}_row_blocks, 256, 0, stream>>>(dst + (d == 0 ? {p}_T - 1 : 0) * dst_t + d * {p}_H, dst_b,
                                                     {h_n} + (int64_t)(l * {p}_D + d) * {p}_B * {p}_H, {p}_B, {p}_H);
"""
            if h_n
            else ""
        )
        gru_bias = "w[3]" if layer.cell == "gru" else none
        warps = f"{p}_H * optiml_cdiv({p}_B, {self.rows})"
        text = f"""\
  {{
    {sizes}    const int {p}_L = {layer.layers}, {p}_D = {directions};
    if (workspace == NULL) return -5;
    float* {p}_gx = (float*)({ctx.workspace});
    float* {p}_seq[2] = {{{p}_gx + {p}_D * {p}_T * {p}_B * {p}_GH, {p}_gx + {p}_T * {p}_B * ({p}_D * {p}_GH + {p}_DH)}};
    float* {p}_cell = {p}_seq[1] + {p}_T * {p}_B * {p}_DH;
    const float* {p}_weights[{layer.layers * directions}][4] = {{{", ".join(weights)}}};
    const unsigned {p}_row_blocks = (unsigned)optiml_cdiv({p}_B * {p}_H, 256);
    for (int l = 0; l < {p}_L; ++l) {{
      const float* in = l == 0 ? {x_ptr} : {p}_seq[(l - 1) % 2];
      const int64_t in_t = l == 0 ? {x_t} : {p}_B * {p}_DH;
      const int64_t in_b = l == 0 ? {x_b} : {p}_DH;
      const int64_t in_k = l == 0 ? {p}_I : {p}_DH;
      float* dst = {p}_seq[l % 2];
      int64_t dst_t = {p}_B * {p}_DH, dst_b = {p}_DH;
{into_output}      {p}_direction dirs[2];
      for (int d = 0; d < {p}_D; ++d) {{
        const float* const* w = {p}_weights[l * {p}_D + d];
        float* gx = {p}_gx + d * {p}_T * {p}_B * {p}_GH;
        const dim3 tiles((unsigned)optiml_cdiv({p}_GH, {_TILE}), (unsigned)optiml_cdiv({p}_T * {p}_B, {_TILE}));
        {p}_project<<<tiles, 256, 0, stream>>>(in, in_t, in_b, {p}_B, {p}_T * {p}_B, in_k, w[0], w[2],
                                               {lstm_bias}, {p}_GH, gx);
        const int64_t slot = (int64_t)(l * {p}_D + d) * {p}_B * {p}_H;
        float* cell = {cell};
        if (cell != nullptr)
          {p}_rows<<<{p}_row_blocks, 256, 0, stream>>>({c0_slot}, {p}_H, cell, {p}_B, {p}_H);
        dirs[d] = {{gx, w[1], {gru_bias}, {h0_slot}, cell}};
      }}
      const dim3 {p}_grid((unsigned)optiml_cdiv({warps} * 32, {self.threads}), (unsigned){p}_D);
      for (int64_t s = 0; s < {p}_T; ++s)
        {p}_step<<<{p}_grid, {self.threads}, 0, stream>>>(dirs[0], dirs[{p}_D - 1], s, {p}_T, dst, dst_t, dst_b,
                                                           {p}_B, {p}_H);
{h_n_copy}    }}
    {launch_check()}
  }}
"""
        return text, workspace

    def render(self) -> KernelCode:
        sigmoid = f"static __device__ __forceinline__ float {self.p}_sigmoid(float v) "
        helpers = sigmoid + "{ return 1.0f / (1.0f + expf(-v)); }\n"
        device = "\n".join(
            [
                f"// ---- {self.p}: {self.layer.cell} x{self.layer.layers} "
                f"{'bidirectional' if self.layer.directions == 2 else 'unidirectional'} ----",
                helpers,
                self.projection_kernel(),
                self.step_kernel(),
                self.copy_kernel(),
            ]
        )
        host, workspace = self.host()
        return KernelCode(device=device, host=host, workspace_bytes=workspace)
