"""Tensor-core pieces the GEMM and conv templates share: the scalar kernels' slice multiply (``mma.sync``
m16n8k16 through ``optiml_ptx.h``), and whether TF32 MMAs exist."""

from __future__ import annotations

from optiml.templates.base import DeviceFacts
from optiml.templates.ptx import mma_function


def mma_slice(dtype: str, bk: int, mi: int, ni: int, wtm: int, wtn: int) -> str:
    """The scalar mma kernels' multiply of one ``bk``-deep slice: 32-bit fragment loads from shared
    ``As[buf][m][k]`` / ``Bs[buf][n][k]`` and ``mi x ni`` mma tiles per warp (shared with conv)."""
    return f"""\
#pragma unroll
    for (int ks = 0; ks < {bk}; ks += 16) {{
      unsigned fa[{mi}][4], fb[{ni}][2];
#pragma unroll
      for (int i = 0; i < {mi}; ++i) {{
        const int row = wy * {wtm} + i * 16 + g;
        fa[i][0] = *(const unsigned*)&As[buf][row][ks + 2 * t4];
        fa[i][1] = *(const unsigned*)&As[buf][row + 8][ks + 2 * t4];
        fa[i][2] = *(const unsigned*)&As[buf][row][ks + 8 + 2 * t4];
        fa[i][3] = *(const unsigned*)&As[buf][row + 8][ks + 8 + 2 * t4];
      }}
#pragma unroll
      for (int j = 0; j < {ni}; ++j) {{
        const int col = wx * {wtn} + j * 8 + g;
        fb[j][0] = *(const unsigned*)&Bs[buf][col][ks + 2 * t4];
        fb[j][1] = *(const unsigned*)&Bs[buf][col][ks + 8 + 2 * t4];
      }}
#pragma unroll
      for (int i = 0; i < {mi}; ++i)
#pragma unroll
        for (int j = 0; j < {ni}; ++j) {mma_function(dtype)}(acc[i][j], fa[i], fb[j]);
    }}
"""


def tensor_cores_take_tf32(facts: DeviceFacts) -> bool:
    """TF32 ``mma.sync`` needs sm_80 or newer."""
    digits = "".join(ch for ch in facts.arch if ch.isdigit())
    return bool(digits) and int(digits) >= 80
