"""The configurations a structural landscape records: a task's template space, enumerated.

Each planned kernel's :class:`~optiml.templates.base.Space` declares its variants and the legal
values of their knobs; :func:`group_configs` lists every combination its check accepts (a few
hundred per kernel for the row template, six for a transpose). A plan of one kernel — or of
several whose product stays within ``limit`` — is recorded exhaustively; a larger product is
recorded as *sweeps*: the default configuration, then each kernel's configurations with the
others at their default (:mod:`optiml.search.replay.record` models combinations from those).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from optiml.search.replay.record import EXHAUSTIVE, SWEEPS
from optiml.templates.base import GroupConfig, Space
from optiml.templates.kernels import TemplateKernels

#: the most combinations a landscape records exhaustively
EXHAUSTIVE_LIMIT = 400


def group_configs(space: Space) -> list[GroupConfig]:
    """Every legal configuration of one kernel, variant by variant, knobs in declaration order."""
    found = []
    for variant, knobs in space.knobs.items():
        for values in itertools.product(*knobs.values()):
            config = space.normalized(GroupConfig.of(variant, **dict(zip(knobs, values, strict=True))))
            if space.reason_invalid(config) is None:
                found.append(config)
    return found


@dataclass(frozen=True)
class Enumeration:
    mode: str  # record.EXHAUSTIVE or record.SWEEPS
    default: tuple[GroupConfig, ...]
    configs: tuple[tuple[GroupConfig, ...], ...]  # what to measure, the default first


def enumerate_space(kernels: TemplateKernels, limit: int = EXHAUSTIVE_LIMIT) -> Enumeration:
    """What to measure for ``kernels`` (see the module docstring)."""
    default = tuple(kernels.default())
    per_group = [group_configs(space) for space in kernels.spaces]
    if math.prod(len(c) for c in per_group) <= limit:
        combos = [tuple(combo) for combo in itertools.product(*per_group)]
        mode = EXHAUSTIVE
    else:
        combos = [(*default[:g], c, *default[g + 1 :]) for g, configs in enumerate(per_group) for c in configs]
        mode = SWEEPS
    ordered = [default] + [c for c in dict.fromkeys(combos) if c != default]
    return Enumeration(mode=mode, default=default, configs=tuple(ordered))
