"""Convolution kernels: ``aten.convolution`` (1-D/2-D/3-D, groups, transposed) with a fused epilogue.

:mod:`.conv` (:class:`ConvTemplate`: the problem, implicit-GEMM and direct kernels, space, rule, render),
:mod:`.stencil` (small fixed kernels over output tiles), :mod:`.gather` (output-stationary transposed
convolutions), :mod:`.wgmma` (Hopper warp-group implicit GEMM).
The tensor-core kernels build on the GEMM family's public pieces (:mod:`optiml.templates.gemm.mma`,
:mod:`~optiml.templates.gemm.tf32`, :mod:`~optiml.templates.gemm.wgmma`,
:mod:`~optiml.templates.gemm.tf32_wgmma`) and the shared :mod:`optiml.templates.product`.
"""

from __future__ import annotations

from optiml.templates.conv.conv import ConvTemplate
from optiml.templates.group import ProductSpec
from optiml.templates.registry import Family

FAMILIES = (
    Family(
        name="conv",
        serves=("conv",),
        make=ConvTemplate,
        variants=(
            "direct",
            "gather",
            "stencil",
            "implicit",
            "mma",
            "tf32x3",
            "tf32",
            "wgmma",
            "tf32x3_wgmma",
            "tf32_wgmma",
        ),
        kind="product",
        spec=lambda d: ProductSpec(recomputable=tuple(d["recomputable"]), aliases=tuple(d["aliases"])),
    ),
)
