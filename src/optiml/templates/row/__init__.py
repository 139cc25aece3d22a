"""Row kernels: element-wise ops and reductions fused by domain (pointwise and reduce groups).

:mod:`.rowprog` turns a row group into a program over one domain (loads, element-wise code, reductions
in scopes); :mod:`.reduce` renders it (warp / block / split rows, column variants) and the pointwise case.
"""

from __future__ import annotations

from optiml.graph.sizes import SizeResolver
from optiml.templates.group import RowSpec
from optiml.templates.registry import Family
from optiml.templates.row.reduce import RowTemplate


def _make(sizes: SizeResolver) -> RowTemplate:
    return RowTemplate(sizes, list(sizes.graphs))


FAMILIES = (
    Family(
        name="row",
        serves=("reduce", "pointwise"),
        make=_make,
        variants=("warp_row", "block_row", "split_row", "cluster_row", "col", "col_split", "col_chunks", "col_cached"),
        kind="row",
        spec=lambda d: RowSpec(
            shape=tuple(d["shape"]),
            dims=tuple(d["dims"]),
            recomputable=tuple(d["recomputable"]),
            aliases=tuple(d["aliases"]),
            strided=tuple(d["strided"]),
        ),
    ),
)
