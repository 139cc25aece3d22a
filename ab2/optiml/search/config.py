"""Search settings: :class:`SearchConfig` with its budgets and reward weights, all defaults documented.

A config is frozen, validated on construction (a bad value raises :class:`ConfigError` with a
one-line message naming the field) and round-trips through JSON so the run store can restore it
on resume.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from optiml.errors import ConfigError

STRATEGIES = ("mcts", "greedy", "best-of-n")
#: weights of the parent-relative reward that the value model replaced; runs stored with them resume
_RETIRED_REWARD_KEYS = frozenset({"parent", "root", "proxy", "clip", "regression"})
SELECTIONS = ("puct", "uct")


@dataclass(frozen=True)
class Budgets:
    """Limits of one run; whichever is reached first ends it cleanly. ``None`` means unlimited.

    ``max_evaluations`` counts every call to the evaluator, the root's included. ``max_seconds``
    is the run's active wall time (summed over resumes); in-flight evaluations finish after it
    and the final re-timing runs after it. ``max_cost_usd`` bounds the proposers' LLM spend
    (what each :class:`~optiml.search.protocols.PaidProposer` reports as ``spent().usd``): once
    reached no new proposals are requested, and the candidates
    already paid for are still evaluated while the other budgets allow. ``max_llm_calls`` and
    ``max_llm_tokens`` do the same for the run's LLM API calls and their input + output tokens
    (every session of the run, generation of the root included; cache hits are free): budgets
    that bind whether or not the model's price is known.
    """

    max_evaluations: int | None = 100
    max_seconds: float | None = 3600.0
    max_cost_usd: float | None = None
    max_llm_calls: int | None = None
    max_llm_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_evaluations", "max_llm_calls", "max_llm_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        for name in ("max_seconds", "max_cost_usd"):
            value = getattr(self, name)
            if value is not None and (not math.isfinite(value) or value < 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {value}")


@dataclass(frozen=True)
class RewardWeights:
    """The value model's constants; :mod:`optiml.search.reward` documents the formula."""

    scale: float = math.log(2.0)  # log speedup over the root at which a value reaches tanh(1) = 0.76
    build_failure: float = -1.0  # rejected, compile or load error
    run_failure: float = -1.0  # runtime error, crash, timeout, out of memory
    wrong_answer: float = -1.0  # verification failure
    integrity: float = -1.5  # caught cheating (inputs modified, work off-stream, suspect time)

    def __post_init__(self) -> None:
        for f in fields(self):
            if not math.isfinite(getattr(self, f.name)):
                raise ConfigError(f"reward weight {f.name} must be finite")
        if self.scale <= 0:
            raise ConfigError(f"reward scale must be > 0, got {self.scale}")
        for name in ("build_failure", "run_failure", "wrong_answer", "integrity"):
            if getattr(self, name) > -1.0:
                value = getattr(self, name)
                raise ConfigError(f"reward {name} must be <= -1 (below every verified kernel), got {value}")


@dataclass(frozen=True)
class SearchConfig:
    """How a search runs. Defaults suit an offline heuristic run of about a hundred candidates."""

    # "greedy" | "mcts" | "best-of-n"; greedy won or tied every ablation so far (docs/search.md, issue 12)
    strategy: str = "greedy"
    selection: str = "puct"  # child selection in MCTS: "puct" (uses proposer rank priors) | "uct"
    c_puct: float = 0.25  # exploration constant of PUCT / UCT (values lie in [-1.5, 1))
    widen_k: float = 2.0  # progressive widening: a node may have ceil(k * visits**alpha) children ...
    widen_alpha: float = 0.5  # ... growing with its visits (virtual ones included) ...
    deepen_first: bool = True  # MCTS: follow a child whose subtree improved before widening its parent
    max_children: int = 12  # ... up to this many (greedy uses this cap alone; best-of-n ignores it)
    prune_after_failures: int = 4  # a node whose last N children failed is closed (not best-of-n)
    max_dry_requests: int = 2  # a node stops asking after N requests that brought nothing new
    parallel_evaluations: int = 2  # evaluations in flight at once (virtual loss keeps them apart)
    parallel_proposals: int = 2  # proposer requests in flight at once (proposers must be thread-safe)
    proposals_per_request: int = 4  # `n` passed to Proposer.propose
    q_max_weight: float = 0.5  # node value = w * best reward in its subtree + (1 - w) * mean reward
    virtual_loss: float = 1.0  # reward assumed for an in-flight evaluation while selecting
    budgets: Budgets = field(default_factory=Budgets)
    reward: RewardWeights = field(default_factory=RewardWeights)
    noise_threshold: float = 0.02  # a speedup counts only beyond the timing band AND by >= 2 %
    profile_margin: float = 0.10  # profile OK candidates within 10 % of the best time so far
    profile_batch: int = 3  # candidates near the best wait to share one ncu launch, up to this many
    retime_top_k: int = 4  # candidates re-timed at the end, interleaved with the root
    retime_rounds: int = 10  # rounds of interleaved re-timing
    history_limit: int = 16  # most history entries (besides the path's own edits) shown to proposers
    max_proposer_errors: int = 3  # consecutive proposer exceptions that end the run
    reproducible: bool = False  # handle results in submission order: same seeds, same run, any parallelism

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.selection not in SELECTIONS:
            raise ConfigError(f"selection must be one of {', '.join(SELECTIONS)}, got {self.selection!r}")
        positive_ints = (
            "max_children",
            "prune_after_failures",
            "max_dry_requests",
            "parallel_evaluations",
            "parallel_proposals",
            "proposals_per_request",
            "retime_rounds",
            "max_proposer_errors",
            "profile_batch",
        )
        for name in positive_ints:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("retime_top_k", "history_limit"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        non_negative = ("c_puct", "widen_k", "virtual_loss", "noise_threshold", "profile_margin")
        for name in non_negative:
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value}")
        if self.widen_k == 0:
            raise ConfigError("widen_k must be > 0")
        for name in ("widen_alpha", "q_max_weight"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")

    def with_budgets(self, budgets: Budgets) -> SearchConfig:
        return replace(self, budgets=budgets)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SearchConfig:
        """Rebuild a stored config; unknown keys (from another version) raise ConfigError."""
        try:
            data: dict[str, Any] = json.loads(text)
            data["budgets"] = Budgets(**data.get("budgets", {}))
            reward = {k: v for k, v in data.get("reward", {}).items() if k not in _RETIRED_REWARD_KEYS}
            data["reward"] = RewardWeights(**reward)
            return cls(**data)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"stored search config is unreadable: {exc}") from exc
