"""Data movement: ``permute`` (:mod:`.permute`: tiled transposes, a gather for the rest) and
``cat`` / ``slice`` copies (:mod:`.cat`)."""

from __future__ import annotations

from optiml.templates.group import PermuteSpec
from optiml.templates.permute.cat import CatTemplate
from optiml.templates.permute.permute import PermuteTemplate
from optiml.templates.registry import Family

FAMILIES = (
    Family(
        name="permute",
        serves=("permute",),
        make=lambda sizes: PermuteTemplate(),
        variants=("tiled", "naive_gather"),
        kind="dedicated",
        op_classes=("permute",),
        spec=lambda d: PermuteSpec(tuple(d["perm"])) if "perm" in d else None,
    ),
    Family(
        name="cat",
        serves=("cat", "slice"),
        make=CatTemplate,
        variants=("copy",),
        kind="dedicated",
        op_classes=("cat", "slice"),
    ),
)
