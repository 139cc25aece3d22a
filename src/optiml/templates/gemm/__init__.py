"""GEMM kernels: ``matmul`` (bmm, mv, linear, addmm) with a fused element-wise epilogue.

:mod:`.problem` (the matmul node, layouts, traced sizes), :mod:`.dispatch` (:class:`GemmTemplate`: the
space, the rule, the seeds, render), :mod:`.common` (tile loads, the problem struct, block order,
split-K), the kernels: :mod:`.simt` (fp32 SIMT and the scalar ``mma`` build), :mod:`.gemv`, :mod:`.mma`,
:mod:`.tf32`, :mod:`.tf32_wgmma`, :mod:`.tf32_tma`, :mod:`.wgmma`, :mod:`.wgmma_tma`. The epilogue and the
``mma.sync`` wrappers are shared with conv (:mod:`optiml.templates.product`).
"""

from __future__ import annotations

from optiml.templates.gemm.dispatch import GemmTemplate
from optiml.templates.group import ProductSpec
from optiml.templates.registry import Family

FAMILIES = (
    Family(
        name="gemm",
        serves=("gemm",),
        make=GemmTemplate,
        variants=("gemv", "simt", "tf32x3", "tf32x3_wgmma", "tf32x3_tma", "mma", "wgmma", "wgmma_tma"),
        kind="product",
        spec=lambda d: ProductSpec(recomputable=tuple(d["recomputable"]), aliases=tuple(d["aliases"])),
    ),
)
