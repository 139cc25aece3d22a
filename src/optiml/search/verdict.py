"""The trustworthy best: re-time the top candidates interleaved with the root, accept only clear wins.

Search-time timings are single measurements taken minutes apart, under whatever the machine was
doing then; the fastest of many such numbers is biased towards a lucky one. So before a run
ends, the ``retime_top_k`` fastest verified candidates and the root are timed again, interleaved
(root A B C root A B C …, ``retime_rounds`` rounds) by the cost function's
``retime_with_references``, which also times the PyTorch references in the same rounds where it can
(the real evaluator), so the run's speedups over eager and torch.compile are read in one state of
the GPU. A candidate is accepted only when it is faster than the root *in that re-timing* beyond
the noise (:func:`optiml.search.reward.compare`). If none is, the root stays the best and the outcome
says so. If re-timing fails, the search-time figures are used and the result is unconfirmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optiml.evaluate.cost import CostFunction
from optiml.search.config import SearchConfig
from optiml.search.reward import Change, compare
from optiml.search.tree import Node, Tree
from optiml.values import Speedup, TimingStats


@dataclass(frozen=True)
class Retimed:
    """One contender of the final re-timing, against the root's timing in the same rounds."""

    digest: str
    timing: TimingStats
    speedup: Speedup
    significant: bool


@dataclass(frozen=True)
class Verdict:
    best: Node
    root_timing: TimingStats
    best_timing: TimingStats
    confirmed: bool  # best is not the root, and beats it beyond the noise in an interleaved re-timing
    retimed: tuple[Retimed, ...] = ()
    note: str = ""  # why the result is unconfirmed, when it is
    references: dict[str, TimingStats] = field(default_factory=dict)  # re-timed in the same rounds; {}: none


def confirm_best(tree: Tree, evaluator: CostFunction, config: SearchConfig) -> Verdict:
    root = tree.root
    if root.timing is None:
        raise ValueError("the root has no timing; confirm_best needs a verified root")
    contenders = [n for n in tree.ranked() if n is not root][: config.retime_top_k]
    if not contenders:
        note = "re-timing is disabled" if config.retime_top_k == 0 else "no verified candidate besides the root"
        return _from_search_timings(root, tree.ranked(), config, note)
    kernels = [root.kernel] + [n.kernel for n in contenders]
    try:
        timings, references = evaluator.retime_with_references(kernels, config.retime_rounds)
    except Exception as exc:  # a failed re-timing must not lose the run: fall back, unconfirmed
        return _from_search_timings(root, contenders, config, f"re-timing failed ({type(exc).__name__}: {exc})")
    if len(timings) != len(kernels):
        note = f"re-timing returned {len(timings)} timings for {len(kernels)} kernels"
        return _from_search_timings(root, contenders, config, note)
    root_timing = timings[0]
    entries = tuple(
        Retimed(
            digest=node.digest,
            timing=timing,
            speedup=Speedup.between(root_timing, timing),
            significant=compare(root_timing, timing, config.noise_threshold) is Change.FASTER,
        )
        for node, timing in zip(contenders, timings[1:], strict=True)
    )
    winners = sorted((entry.timing.median_ms, index) for index, entry in enumerate(entries) if entry.significant)
    if not winners:
        return Verdict(
            best=root,
            root_timing=root_timing,
            best_timing=root_timing,
            confirmed=False,
            retimed=entries,
            note="no candidate beat the root beyond the noise when re-timed",
            references=references,
        )
    index = winners[0][1]
    return Verdict(
        best=contenders[index],
        root_timing=root_timing,
        best_timing=entries[index].timing,
        confirmed=True,
        retimed=entries,
        references=references,
    )


def _from_search_timings(root: Node, ranked: list[Node], config: SearchConfig, note: str) -> Verdict:
    """The best by search-time timings, still only if it beats the root beyond the noise; unconfirmed."""
    assert root.timing is not None
    for node in ranked:
        if node is root or node.timing is None:
            continue
        if compare(root.timing, node.timing, config.noise_threshold) is Change.FASTER:
            return Verdict(best=node, root_timing=root.timing, best_timing=node.timing, confirmed=False, note=note)
        break
    return Verdict(best=root, root_timing=root.timing, best_timing=root.timing, confirmed=False, note=note)
