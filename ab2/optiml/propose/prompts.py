"""Prompts for the LLM proposer, rendered from versioned Jinja2 templates.

A prompt version ``V`` is three files in ``templates/``: ``V.system.j2`` (role, ABI, rules, answer
format), ``V.user.j2`` (task, reference, current kernel, its results, diagnosis, history) and
``V.retry.j2`` (the parse or apply error of an unusable answer). The version is recorded in every
edit the LLM proposer makes (``Edit.proposer == "llm:<model>@<version>"``), so a run's results can
be traced to the exact prompt that produced them. Change a prompt by adding a new version; a
version may only gain sections that render for context it never had (``ProposalContext.target``:
the "Target GPU" section), so every prompt it rendered before renders byte for byte the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from optiml.errors import ConfigError
from optiml.kernel.compiler import abi_header
from optiml.llm.types import ChatMessage
from optiml.propose.base import CATEGORIES, ProposalContext

PROMPT_VERSION = "propose_v1"
TEMPLATE_DIR = Path(__file__).parent / "templates"
MAX_HISTORY = 12  # most recent entries shown; older ones matter less and cost tokens

_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
    autoescape=False,
)


def available_versions() -> list[str]:
    return sorted(p.name.removesuffix(".system.j2") for p in TEMPLATE_DIR.glob("*.system.j2"))


@dataclass(frozen=True)
class PromptSet:
    """The templates of one prompt version."""

    version: str

    def messages(self, context: ProposalContext) -> list[ChatMessage]:
        """System and user messages asking for one edit of ``context.kernel``."""
        system = _ENV.get_template(f"{self.version}.system.j2").render(
            abi_header=abi_header().strip(), categories=CATEGORIES
        )
        user = _ENV.get_template(f"{self.version}.user.j2").render(
            task=context.task,
            kernel_code=context.kernel.code,
            flags=list(context.kernel.flags),
            target=context.target.describe() if context.target is not None else "",
            feedback=context.result.feedback() if context.result is not None else "",
            evidence=_evidence(context),
            diagnosis=context.diagnosis_text,
            history=[entry.render() for entry in context.history[-MAX_HISTORY:]],
        )
        return [ChatMessage("system", system), ChatMessage("user", user)]

    def retry(self, conversation: Sequence[ChatMessage], answer: str, error: str) -> list[ChatMessage]:
        """The conversation extended by the unusable answer and a request to fix ``error``."""
        follow_up = _ENV.get_template(f"{self.version}.retry.j2").render(error=error)
        return [*conversation, ChatMessage("assistant", answer), ChatMessage("user", follow_up)]


def load_prompts(version: str = PROMPT_VERSION) -> PromptSet:
    """The prompt set ``version``; :class:`ConfigError` naming the available ones if it does not exist."""
    if version not in available_versions():
        raise ConfigError(f"unknown prompt version {version!r}; available: {', '.join(available_versions())}")
    return PromptSet(version)


def _evidence(context: ProposalContext) -> list[str]:
    """Facts about the current kernel's evaluation beyond ``EvalResult.feedback()``."""
    result = context.result
    if result is None:
        return []
    lines = []
    compiled = result.compile
    if compiled is not None:
        for res in compiled.resources:
            spills = f", {res.spill_stores} B spill stores / {res.spill_loads} B spill loads" if res.spills else ""
            lines.append(
                f"ptxas, {res.name}: {res.registers} registers, {res.shared_bytes} B static shared memory{spills}"
            )
    compiled_ref = result.speedup("compile")
    if compiled_ref is not None:
        lines.append(f"{compiled_ref.value:.2f}x vs torch.compile")
    if result.floor_ms is not None and result.time_ms is not None:
        share = result.floor_ms / result.time_ms
        lines.append(f"physical lower bound {result.floor_ms:.4f} ms: the kernel runs at {share:.0%} of that limit")
    if result.verify is not None and not result.verify.passed:
        verify = result.verify
        lines.append(f"verification: max abs error {verify.max_abs_err:.3g}, max rel error {verify.max_rel_err:.3g}")
    lines.extend(result.warnings)
    return lines
