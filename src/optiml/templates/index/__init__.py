"""``x[idx]``: whole rows of a tensor picked by an integer index tensor (:mod:`.index_rows`)."""

from __future__ import annotations

from optiml.templates.index.index_rows import IndexRowsTemplate
from optiml.templates.registry import Family

FAMILIES = (
    Family(
        name="index",
        serves=("index",),
        make=lambda sizes: IndexRowsTemplate(),
        variants=("row_copy",),
        kind="dedicated",
        op_classes=("index",),
    ),
)
