"""Choosing a proposer by name (``--proposer heuristic|llm``)."""

from __future__ import annotations

from optiml.errors import ConfigError
from optiml.llm.client import LLMClient
from optiml.propose.base import Proposer
from optiml.propose.heuristic import HeuristicProposer
from optiml.propose.llm import LLMProposer
from optiml.propose.prompts import PROMPT_VERSION, load_prompts
from optiml.propose.structural import OfflineProposer, StructuralProposer

PROPOSER_KINDS = ("heuristic", "structural", "offline", "llm")


def make_proposer(
    kind: str, *, seed: int = 0, client: LLMClient | None = None, prompt_version: str = PROMPT_VERSION
) -> Proposer:
    """The proposer ``kind``; :class:`ConfigError` for an unknown kind or ``llm`` without a client."""
    if kind == "heuristic":
        return HeuristicProposer(seed=seed)
    if kind == "structural":
        return StructuralProposer(seed=seed)
    if kind == "offline":  # structural edits for template kernels, knob heuristics for the rest
        return OfflineProposer(StructuralProposer(seed=seed), HeuristicProposer(seed=seed))
    if kind == "llm":
        if client is None:
            raise ConfigError(
                "the llm proposer needs a configured LLM (set OPTIML_LLM_MODEL and an API key), "
                "or use --proposer heuristic"
            )
        return LLMProposer(client, prompts=load_prompts(prompt_version))
    raise ConfigError(f"unknown proposer {kind!r}; choose one of: {', '.join(PROPOSER_KINDS)}")
