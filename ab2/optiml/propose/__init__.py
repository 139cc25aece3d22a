"""Proposers: turn a kernel and its evidence into candidate edits.

- :mod:`base` — the contract (:class:`Edit`, :class:`Proposal`, :class:`ProposalContext`, :class:`Proposer`)
- :mod:`edits` — the SEARCH/REPLACE format and :func:`apply_edit` for every edit kind; :mod:`errors`
- :mod:`knobs`, :mod:`transforms`, :mod:`flags` — what the heuristic proposer can change
  (:mod:`syntax` is the small CUDA scanner they share)
- :mod:`heuristic` — :class:`HeuristicProposer`, the offline default
- :mod:`answer`, :mod:`prompts`, :mod:`llm` — :class:`LLMProposer` and how it talks to a model
- :mod:`output` — :func:`write_proposals` for ``optiml propose``
- :mod:`factory` — :func:`make_proposer` by name
"""

from __future__ import annotations

from optiml.propose.base import CATEGORIES, HistoryEntry, Proposal, ProposalContext, Proposer
from optiml.propose.edits import apply_edit
from optiml.propose.errors import EditApplyError, EditError, EditParseError
from optiml.propose.factory import PROPOSER_KINDS, make_proposer
from optiml.propose.heuristic import HeuristicProposer
from optiml.propose.llm import LLMProposer
from optiml.propose.output import write_proposals
from optiml.values import Edit

__all__ = [
    "CATEGORIES",
    "PROPOSER_KINDS",
    "Edit",
    "EditApplyError",
    "EditError",
    "EditParseError",
    "HeuristicProposer",
    "HistoryEntry",
    "LLMProposer",
    "Proposal",
    "ProposalContext",
    "Proposer",
    "apply_edit",
    "make_proposer",
    "write_proposals",
]
