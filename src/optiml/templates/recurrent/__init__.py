"""Recurrent layers: ``nn.LSTM`` / ``nn.GRU`` (every layer, one or two directions) as one planned kernel."""

from __future__ import annotations

from optiml.templates.recurrent.recurrent import RecurrentTemplate
from optiml.templates.registry import Family

FAMILIES = (
    Family(
        name="recurrent",
        serves=("recurrent",),
        make=lambda sizes: RecurrentTemplate(),
        variants=("warp_rows",),
        kind="dedicated",
        op_classes=("recurrent",),
    ),
)
