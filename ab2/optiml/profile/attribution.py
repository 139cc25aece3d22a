"""Attribute the kernels of one ncu run to the candidates that launched them.

The profile target launches a marker kernel (ATen's ``spin_kernel`` from ``torch.cuda._sleep``, or
the light target's ``optiml_profile_marker``) right before each entry's call inside the profiled
range, and reports which entries it ran, in order. ncu lists profiled kernels in launch order, so
the k-th marker opens the kernels of the k-th profiled entry. This does not depend on how a given
ncu version prints NVTX ranges.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from optiml.profile.ncu_csv import NcuRow

#: ATen's spin_kernel (the torch target) or the light target's own marker
MARKER_KERNEL = re.compile(r"\b(spin_kernel|optiml_profile_marker)\b")


@dataclass(frozen=True)
class Attribution:
    kernels: dict[str, list[NcuRow]]  # entry label → its kernel rows, in launch order
    problems: list[str] = field(default_factory=list)  # rows that could not be placed, count mismatches


def split_by_markers(rows: Sequence[NcuRow], labels: Sequence[str]) -> Attribution:
    """Group ``rows`` (ncu launch order) by marker into the entries ``labels`` (profiling order)."""
    ordered = sorted(rows, key=lambda r: r.launch_id)
    groups: list[list[NcuRow]] = []
    stray: list[NcuRow] = []
    for row in ordered:
        if MARKER_KERNEL.search(row.kernel_name):
            groups.append([])
        elif groups:
            groups[-1].append(row)
        else:
            stray.append(row)
    problems = []
    if stray:
        problems.append(f"{len(stray)} kernel(s) profiled before the first marker were ignored")
    if len(groups) > len(labels):
        problems.append(f"ncu saw {len(groups)} markers for {len(labels)} profiled entries: kernels not attributed")
        return Attribution(kernels={label: [] for label in labels}, problems=problems)
    kernels = {label: (groups[i] if i < len(groups) else []) for i, label in enumerate(labels)}
    return Attribution(kernels=kernels, problems=problems)
