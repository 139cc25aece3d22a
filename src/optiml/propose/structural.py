"""The structural proposer: typed edits of a template kernel's plan (variant switches, knob moves).

A template kernel (see :mod:`optiml.templates`) records its configurations in its first line, so
any node of the search can be read back into (template, variant, knobs) per kernel. Every edit is
a :class:`~optiml.templates.kernels.Move` whose payload is the complete new configuration list
(JSON): :func:`replay` turns a payload back into the same source, deterministically.

Ranking uses the evidence as data, never re-parsed prose: a kernel far from its roofline (the
profiler's roofline fraction, else the bytes-at-bandwidth floor over the measured time, below
50 %) needs a structural change first — variant switches rank above knob moves; one near it is
refined by knob moves first (TVM Ansor's habit of rarer structural moves). A bottleneck the
profiler names (``ProposalContext.diagnosis``: low occupancy, a small grid, uncoalesced access,
…) lifts the moves that address it (:data:`_ADDRESSES`). Ties break by a seeded, digest-keyed
shuffle, so the same seed and kernel give the same proposals.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from optiml.errors import OptimlError
from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposal, ProposalContext, Proposer
from optiml.propose.errors import EditApplyError
from optiml.task import Task
from optiml.templates.assemble import read_marker
from optiml.templates.base import GroupConfig, configs_from_json, configs_to_json
from optiml.templates.kernels import Move, TemplateKernels, template_kernels
from optiml.values import Edit

NAME = "structural"
_CATEGORY = {
    "threads": "launch_config",
    "vec": "vectorization",
    "items": "shared_memory",
    "cluster": "shared_memory",
    "blocks_per_sm": "occupancy",
    "unroll": "unrolling",
    "tile": "tiling",
    "tile_x": "tiling",
    "tile_y": "tiling",
    "block_rows": "tiling",
    "outputs_per_thread": "unrolling",
}


#: Profiler bottleneck names (optiml.profile.findings) → the template knobs (or a variant switch) that address them.
_ADDRESSES = {
    "low_occupancy": ("threads", "blocks_per_sm", "items"),
    "register_limited_occupancy": ("items", "threads"),
    "small_grid": ("variant", "blocks_per_sm", "lanes", "threads"),
    "launch_overhead": ("variant",),
    "uncoalesced_loads": ("variant", "vec"),
    "uncoalesced_stores": ("variant", "vec"),
    "dram_bandwidth": ("vec", "items", "cluster"),
    "far_from_roofline": ("variant",),
    "local_memory": ("items",),
}


def _floor_fraction(context: ProposalContext) -> float | None:
    """How close the kernel is to its floor: the profiler's roofline fraction, else floor / measured time."""
    if context.diagnosis is not None and context.diagnosis.roofline_fraction is not None:
        return context.diagnosis.roofline_fraction
    result = context.result
    if result is not None and result.ok and result.floor_ms and result.time_ms:
        return result.floor_ms / result.time_ms
    return None


def replay(task: Task, payload: str, kernels: TemplateKernels | None = None) -> KernelSource:
    """The kernel a structural edit's payload describes (same payload → same source)."""
    kernels = kernels or template_kernels(task)
    return kernels.render(configs_from_json(payload))


def apply_template_edit(kernel: KernelSource, payload: str, task: Task | None) -> KernelSource:
    """The kernel a ``template`` edit of ``kernel`` yields: its payload's configurations rendered over
    ``task``'s plan. :class:`EditApplyError` (one line) where ``kernel`` is no template kernel of that
    plan, the payload is not a configuration list, or no task is given to plan."""
    if task is None:
        raise EditApplyError("a template edit renders the task's plan: it needs the task")
    present = read_marker(kernel.code)
    if present is None:
        raise EditApplyError("a template edit applies to a template kernel; this one has no optiml-template line")
    try:
        configs = configs_from_json(payload)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EditApplyError(f"a template edit's payload is a JSON list of configurations: {exc}") from None
    try:
        kernels = template_kernels(task)
    except OptimlError as exc:
        raise EditApplyError(f"the task has no template plan: {exc}") from None
    groups = len(kernels.plan.groups)
    if len(present) != groups or len(configs) != groups:
        raise EditApplyError(
            f"the task's plan has {groups} kernel(s); the kernel records {len(present)}, the edit {len(configs)}"
        )
    try:
        return kernels.render(configs)
    except OptimlError as exc:
        raise EditApplyError(f"the template edit does not render: {exc}") from None


class StructuralProposer:
    name = NAME

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._kernels: dict[str, TemplateKernels | None] = {}

    def kernels_for(self, task: Task) -> TemplateKernels | None:
        if task.digest not in self._kernels:
            try:
                self._kernels[task.digest] = template_kernels(task)
            except OptimlError:
                self._kernels[task.digest] = None
        return self._kernels[task.digest]

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        configs = read_marker(context.kernel.code)
        kernels = self.kernels_for(context.task) if configs is not None else None
        if configs is None or kernels is None or len(configs) != len(kernels.plan.groups):
            return []
        moves = self.rank(kernels.neighbours(configs), context)
        proposals: list[Proposal] = []
        for move in moves:
            if len(proposals) >= n:
                break
            new_configs = list(configs)
            new_configs[move.group] = move.config
            edit = self._edit(move, new_configs, context)
            try:
                kernel = kernels.render(new_configs)
            except OptimlError as exc:
                proposals.append(Proposal(edit, None, str(exc)))
                continue
            if kernel.digest in context.tried_digests:
                continue
            proposals.append(Proposal(edit, kernel))
        return proposals

    def rank(self, moves: list[Move], context: ProposalContext) -> list[Move]:
        far = True
        fraction = _floor_fraction(context)
        if fraction is not None:
            far = fraction < 0.5
        named = context.diagnosis.names() if context.diagnosis is not None else frozenset()
        wanted = {knob for name in named for knob in _ADDRESSES.get(name, ())}
        rng = random.Random(f"{self.seed}:{context.kernel.digest}")
        keyed = []
        for move in moves:
            structural_first = move.kind == "variant"
            priority = 0.0 if structural_first == far else 1.0
            if move.knob in wanted:
                priority -= 0.75  # the profiler named a bottleneck this move addresses
            keyed.append((priority, rng.random(), move))
        keyed.sort(key=lambda item: (item[0], item[1]))
        return [move for _, _, move in keyed]

    def _edit(self, move: Move, configs: list[GroupConfig], context: ProposalContext) -> Edit:
        category = "algorithm" if move.kind == "variant" else _CATEGORY.get(move.knob, "other")
        fraction = _floor_fraction(context)
        evidence = f" (now at {fraction:.0%} of the roofline)" if fraction is not None else ""
        if context.diagnosis is not None and context.diagnosis.bottlenecks:
            evidence += f"; profiler: {context.diagnosis.bottlenecks[0][0]}"
        return Edit(
            kind="template",
            payload=configs_to_json(configs),
            category=category,
            rationale=f"{move.note}{evidence}",
            proposer=NAME,
        )


class OfflineProposer:
    """The offline default: structural edits for template kernels, the knob heuristics for any other."""

    name = "offline"

    def __init__(self, structural: StructuralProposer, heuristic: Proposer) -> None:
        self.structural = structural
        self.heuristic = heuristic

    def propose(self, context: ProposalContext, n: int) -> Sequence[Proposal]:
        if read_marker(context.kernel.code) is not None:
            return self.structural.propose(context, n)
        return self.heuristic.propose(context, n)


def describe_payload(payload: str) -> str:
    return ", ".join(GroupConfig.from_dict(c).label() for c in json.loads(payload))
