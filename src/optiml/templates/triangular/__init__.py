"""``tril`` / ``triu`` outside a product's epilogue: a masked copy (:mod:`.triangular`)."""

from __future__ import annotations

from optiml.templates.registry import Family
from optiml.templates.triangular.triangular import TriangularTemplate

FAMILIES = (
    Family(
        name="triangular",
        serves=("triangular",),
        make=lambda sizes: TriangularTemplate(),
        variants=("masked_copy",),
        kind="dedicated",
        op_classes=("triangular",),
    ),
)
