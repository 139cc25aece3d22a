"""Pooling kernels: max / average pooling over 1-3 spatial dims (with indices, padding, ceil mode)."""

from __future__ import annotations

from optiml.templates.group import PoolSpec
from optiml.templates.pool.pool import PoolTemplate
from optiml.templates.registry import Family

FAMILIES = (
    Family(
        name="pool",
        serves=("pool",),
        make=lambda sizes: PoolTemplate(),
        variants=("direct", "smem_tile"),
        kind="dedicated",
        op_classes=("pool",),
        spec=PoolSpec.of,
    ),
)
