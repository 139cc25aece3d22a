"""The heuristic proposer: knob retuning, safe rewrites and compile flags, ranked by evidence.

It needs no LLM, so it is the offline default and a member of every mixture. For a kernel it
collects every *move* it knows (see :mod:`knobs`, :mod:`transforms`, :mod:`flags`), drops moves
whose kernel was already evaluated (``ProposalContext.tried_digests``) or that break a hardware
limit, and ranks the rest:

- a fixed prior per move (cheap, safe rewrites first);
- a bonus when the move addresses a bottleneck named in the profiler diagnosis or implied by the
  evaluation (memory-bound → qualifiers, vectorisation, launch configuration and L1 caching first;
  occupancy/register pressure → launch bounds and block size; compute/latency → unrolling);
- what happened on this search path: moves like an edit that sped the kernel up rank higher,
  like one that failed or slowed it down lower;
- a small seeded jitter, so that equal-looking moves are tried in a reproducible but varied order.

Selection is greedy with a penalty for a second move of the same family (e.g. two values of one
knob), so ``n`` proposals cover different ideas. Same seed and context → same proposals.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from optiml.kernel.source import KernelSource
from optiml.propose.base import DiagnosisFacts, HistoryEntry, Proposal, ProposalContext
from optiml.propose.edits import diff_blocks, render_blocks
from optiml.propose.flags import flag_changes
from optiml.propose.knobs import candidate_values, check_limits, find_knobs, set_knob
from optiml.propose.transforms import source_rewrites
from optiml.values import Edit, EvalResult, EvalStatus

NAME = "heuristic"
SIGNALS = ("memory", "occupancy", "compute", "latency")

_SIGNAL_WORDS = {
    "memory": (
        "memory-bound",
        "memory bound",
        "dram",
        "bandwidth",
        "coalesc",
        "sectors per request",
        "memory throughput",
        "uncoalesced",
        "l2 miss",
    ),
    "occupancy": ("occupancy", "register", "spill", "registers per thread", "blocks per sm", "waves"),
    "compute": (
        "compute-bound",
        "compute bound",
        "fma",
        "sm throughput",
        "pipe",
        "issue slot",
        "instruction-bound",
        "alu",
    ),
    "latency": ("latency", "stall", "scoreboard", "dependency", "too few threads", "parallelism"),
}

_KNOB_PRIOR = {
    "block_size": 1.0,
    "block_dim": 0.9,
    "tile": 0.9,
    "vector_width": 0.9,
    "items_per_thread": 0.9,
    "unroll": 0.8,
    "warps": 0.8,
}
_KNOB_SIGNALS = {
    "block_size": {"occupancy", "latency"},
    "block_dim": {"memory", "occupancy"},
    "tile": {"memory", "compute"},
    "vector_width": {"memory"},
    "items_per_thread": {"memory", "latency"},
    "unroll": {"compute", "latency"},
    "warps": {"occupancy"},
}
_REWRITE_PRIOR = {
    "restrict": 1.3,
    "const": 1.1,
    "launch_bounds": 1.0,
    "launch_bounds_min": 0.6,
    "unroll": 0.9,
    "unroll_runtime": 0.7,
    "launch": 0.9,
}
_FLAG_PRIOR = 0.6
_SIGNAL_BONUS = 1.5
_FAMILY_PENALTY = 1.0
_JITTER = 0.3


@dataclass(frozen=True)
class Move:
    """One candidate change with everything needed to rank it and to report it."""

    edit: Edit
    kernel: KernelSource
    family: str  # moves of one family are alternatives (e.g. values of one knob)
    prior: float
    signals: frozenset[str]


class HeuristicProposer:
    """Deterministic, offline proposer (see the module docstring)."""

    def __init__(self, seed: int = 0, *, knob_steps: int = 2) -> None:
        self.name = NAME
        self.seed = seed
        self.knob_steps = knob_steps  # values offered per knob: the nearest untried ones on its ladder

    def moves(self, context: ProposalContext) -> list[Move]:
        """Every applicable move not yet evaluated anywhere, unranked, in a stable order."""
        kernel = context.kernel
        compile_result = context.result.compile if context.result is not None else None
        seen = set(context.tried_digests) | {kernel.digest}
        found = self._knob_moves(kernel, seen) + self._rewrite_moves(kernel)
        found += [
            Move(
                edit=self._edit("flags", " ".join(change.flags), "compiler_flags", change.rationale),
                kernel=kernel.with_flags(change.flags),
                family=change.key,
                prior=_FLAG_PRIOR,
                signals=change.signals,
            )
            for change in flag_changes(kernel, context.task, compile_result)
        ]
        unique: dict[str, Move] = {}
        for move in found:
            digest = move.kernel.digest
            if digest not in seen and digest not in unique:
                unique[digest] = move
        return list(unique.values())

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        """Up to ``n`` proposals, the moves best fitting the evidence first. Where the current kernel is known not
        to compile (or was rejected by screening), each proposal carries that as its error: a knob or a flag
        changed in a kernel that does not build yields one that does not build either."""
        if n <= 0:
            return []
        broken = _not_buildable(context.result)
        detected = bottleneck_signals(context.diagnosis_text, context.result, context.diagnosis)
        rng = random.Random(f"{self.seed}:{context.kernel.digest}")
        scored = []
        for move in self.moves(context):
            score = move.prior + _SIGNAL_BONUS * len(move.signals & detected)
            score += _history_adjustment(move, context.history) + _JITTER * rng.random()
            scored.append((score, move))
        chosen: list[Proposal] = []
        used: dict[str, int] = {}
        while scored and len(chosen) < n:
            best = max(
                range(len(scored)), key=lambda i: scored[i][0] - _FAMILY_PENALTY * used.get(scored[i][1].family, 0)
            )
            _score, move = scored.pop(best)
            used[move.family] = used.get(move.family, 0) + 1
            chosen.append(Proposal(edit=self._with_evidence(move, detected), kernel=move.kernel, error=broken))
        return chosen

    def _knob_moves(self, kernel: KernelSource, seen: set[str]) -> list[Move]:
        """The ``knob_steps`` nearest untried values of each knob that fit the hardware limits."""
        moves = []
        for knob in find_knobs(kernel.code):
            tried = 0
            for value in candidate_values(knob):
                if tried == self.knob_steps:
                    break
                code = set_knob(kernel.code, knob.name, value)
                if check_limits(code) is not None or kernel.with_code(code).digest in seen:
                    continue
                tried += 1
                direction = "Raise" if value > knob.value else "Lower"
                rationale = f"{direction} {knob.name} from {knob.value} to {value}: it sets {knob.purpose}."
                moves.append(
                    Move(
                        edit=self._edit("knob", f"{knob.name}={value}", _knob_category(knob.role), rationale),
                        kernel=kernel.with_code(code),
                        family=f"knob:{knob.name}",
                        prior=_KNOB_PRIOR[knob.role],
                        signals=frozenset(_KNOB_SIGNALS[knob.role]),
                    )
                )
        return moves

    def _rewrite_moves(self, kernel: KernelSource) -> list[Move]:
        moves = []
        for rewrite in source_rewrites(kernel.code):
            blocks = render_blocks(diff_blocks(kernel.code, rewrite.code))
            kind = rewrite.key.split(":", 1)[0]
            moves.append(
                Move(
                    edit=self._edit("search_replace", blocks, rewrite.category, rewrite.rationale),
                    kernel=kernel.with_code(rewrite.code),
                    family=rewrite.key.split("=", 1)[0],
                    prior=_REWRITE_PRIOR[kind],
                    signals=rewrite.signals,
                )
            )
        return moves

    def _edit(self, kind: str, payload: str, category: str, rationale: str) -> Edit:
        return Edit(kind=kind, payload=payload, category=category, rationale=rationale, proposer=self.name)

    @staticmethod
    def _with_evidence(move: Move, detected: frozenset[str]) -> Edit:
        matched = sorted(move.signals & detected)
        if not matched:
            return move.edit
        note = f" Ranked up because the evidence points to {' and '.join(matched)} limits."
        return Edit(
            move.edit.kind, move.edit.payload, move.edit.category, move.edit.rationale + note, move.edit.proposer
        )


def _knob_category(role: str) -> str:
    return {
        "block_size": "launch_config",
        "block_dim": "launch_config",
        "tile": "tiling",
        "vector_width": "vectorization",
        "items_per_thread": "launch_config",
        "unroll": "unrolling",
        "warps": "occupancy",
    }[role]


#: The profiler's stable bottleneck names (optiml.profile.findings) → the signals moves address.
_BOTTLENECK_SIGNALS = {
    "dram_bandwidth": "memory",
    "uncoalesced_loads": "memory",
    "uncoalesced_stores": "memory",
    "local_memory": "memory",
    "bank_conflicts": "memory",
    "low_occupancy": "occupancy",
    "register_limited_occupancy": "occupancy",
    "small_grid": "latency",
    "launch_overhead": "latency",
    "far_from_roofline": "latency",
    "compute_throughput": "compute",
    "no_tensor_cores": "compute",
    "no_operand_reuse": "compute",
}


def bottleneck_signals(
    diagnosis_text: str, result: EvalResult | None, facts: DiagnosisFacts | None = None
) -> frozenset[str]:
    """Bottleneck kinds (memory, occupancy, compute, latency) named by a diagnosis or implied by a result.

    The diagnosis as data (``facts``: its bound and named bottlenecks) is used when the node was
    profiled in this run; the rendered text only when that is all there is (e.g. a resumed run).
    """
    if facts is not None and (facts.bottlenecks or facts.bound != "unknown"):
        found = {_BOTTLENECK_SIGNALS[name] for name in facts.names() if name in _BOTTLENECK_SIGNALS}
        if facts.bound in SIGNALS:
            found.add(facts.bound)
    else:
        text = diagnosis_text.lower()
        found = {signal for signal, words in _SIGNAL_WORDS.items() if any(word in text for word in words)}
    if result is not None and result.compile is not None and any(r.spills for r in result.compile.resources):
        found.add("occupancy")
    return frozenset(found)


def _history_adjustment(move: Move, history: Iterable[HistoryEntry]) -> float:
    """Credit for moves like those that helped on this path, blame for those that failed or regressed."""
    total = 0.0
    for entry in history:
        if not _same_idea(move.edit, entry.edit):
            continue
        if entry.status != EvalStatus.OK.value:
            total -= 1.0
        elif entry.time_ms is not None and entry.parent_time_ms:
            total += 0.5 if entry.parent_time_ms / entry.time_ms > 1.02 else -0.5
    return total


def _same_idea(a: Edit, b: Edit) -> bool:
    """Same knob for knob edits; otherwise the same optimisation category."""
    if a.kind == "knob" or b.kind == "knob":
        return a.kind == b.kind and a.payload.split("=", 1)[0] == b.payload.split("=", 1)[0]
    return a.category == b.category


def _not_buildable(result: EvalResult | None) -> str | None:
    """Why an edit of the kernel evaluated as ``result`` cannot be used (None: nothing known against it)."""
    if result is None or result.status not in (EvalStatus.COMPILE_ERROR, EvalStatus.REJECTED):
        return None
    if result.status is EvalStatus.REJECTED:  # its message: "rejected by screening: <rule>"
        return f"the kernel it edits was {(result.message or 'rejected by screening').splitlines()[0][:200]}"
    first = result.compile.error_summary(limit=1) if result.compile is not None else result.message
    return f"the kernel it edits does not compile ({(first or 'no message').splitlines()[0][:200]})"
