"""Scan kernels: ``cumsum`` / ``cumprod`` along one dim, forward or reverse (``flip → scan → flip``)."""

from __future__ import annotations

from optiml.templates.group import ScanSpec
from optiml.templates.registry import Family
from optiml.templates.scan.scan import ScanTemplate

FAMILIES = (
    Family(
        name="scan",
        serves=("scan",),
        make=lambda sizes: ScanTemplate(),
        variants=("row_warp", "row_block", "row_split", "col"),
        kind="dedicated",
        op_classes=("scan", "flip"),
        spec=lambda d: ScanSpec(
            dim=int(d["dim"]), kind=str(d["kind"]), reverse=bool(d["reverse"]), exclusive=bool(d["exclusive"])
        ),
    ),
)
