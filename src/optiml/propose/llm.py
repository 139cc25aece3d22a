"""The LLM proposer: prompt a model with the kernel and its evidence, turn answers into proposals.

One :meth:`LLMProposer.propose` call renders the prompt once, asks for ``n`` answers (as
``samples_per_request`` samples per request, requests sent in parallel), and settles each answer:

1. parse it (:func:`optiml.propose.answer.parse_answer`) and apply the edit to the current kernel;
2. reject an edit that changes nothing or yields a kernel already evaluated (``tried_digests``);
3. if any of that fails, ask once more in the same conversation, quoting the error;
4. if the second answer fails too, return a :class:`Proposal` with ``error`` set: never raise.

LLM errors: a request that fails (service unavailable, request refused, malformed response) yields
failed proposals for its samples. Run-level conditions are raised to the caller instead:
:class:`LLMConfigError` and :class:`LLMReplayMiss` always, and :class:`LLMBudgetExceeded` when the
budget stopped every request of the call (so nothing was proposed), which tells the search to stop
asking this proposer. Every edit's ``proposer`` is ``llm:<model>@<prompt version>``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from optiml.llm.client import LLMClient
from optiml.llm.errors import LLMBudgetExceeded, LLMConfigError, LLMError, LLMReplayMiss
from optiml.llm.types import ChatMessage, LLMResponse
from optiml.propose.answer import ParsedAnswer, parse_answer, unparsed_answer
from optiml.propose.base import Edit, Proposal, ProposalContext
from optiml.propose.edits import apply_edit
from optiml.propose.errors import EditError
from optiml.propose.prompts import PromptSet, load_prompts

#: samples per request on providers that return ``n`` samples from one call (the prompt is paid once)
DEFAULT_SAMPLES_PER_REQUEST = 4
_RUN_LEVEL = (LLMConfigError, LLMReplayMiss)  # conditions of the whole run, raised to the caller


@dataclass
class _Batch:
    proposals: list[Proposal] = field(default_factory=list)
    budget: LLMBudgetExceeded | None = None


class LLMProposer:
    """Proposes edits with an LLM (see the module docstring). ``name`` is ``llm:<model>``."""

    def __init__(
        self,
        client: LLMClient,
        *,
        prompts: PromptSet | None = None,
        samples_per_request: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.client = client
        self.prompts = prompts or load_prompts()
        self.name = f"llm:{client.config.model}"
        # Anthropic returns one sample per call: send parallel requests of one sample instead.
        default = 1 if client.config.provider == "anthropic" else DEFAULT_SAMPLES_PER_REQUEST
        self.samples_per_request = max(1, samples_per_request or default)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._spent = 0.0
        self._lock = threading.Lock()

    @property
    def edit_proposer(self) -> str:
        """What every edit of this proposer records as its ``proposer``: model and prompt version."""
        return f"{self.name}@{self.prompts.version}"

    @property
    def spent_usd(self) -> float:
        """USD spent by this proposer's requests so far (cache hits cost nothing)."""
        with self._lock:
            return self._spent

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        if n <= 0:
            return []
        conversation = self.prompts.messages(context)
        sizes = [self.samples_per_request] * (n // self.samples_per_request)
        if n % self.samples_per_request:
            sizes.append(n % self.samples_per_request)
        workers = min(len(sizes), self.client.config.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="optiml-propose") as pool:
            futures = [pool.submit(self._batch, conversation, size, context) for size in sizes]
            batches = [future.result() for future in futures]
        proposals = _mark_duplicates([p for batch in batches for p in batch.proposals])
        budget = next((b.budget for b in batches if b.budget is not None), None)
        if budget is not None and not any(p.usable for p in proposals):
            raise budget
        return proposals

    def _batch(self, conversation: list[ChatMessage], size: int, context: ProposalContext) -> _Batch:
        try:
            response = self._complete(conversation, size, "propose")
        except _RUN_LEVEL:
            raise
        except LLMBudgetExceeded as exc:
            return _Batch([self._failed(unparsed_answer(""), f"LLM budget spent: {exc}")] * size, budget=exc)
        except LLMError as exc:
            return _Batch([self._failed(unparsed_answer(""), f"LLM request failed: {exc}")] * size)
        return _Batch(
            [
                self._settle(conversation, text, reason, context)
                for text, reason in zip(response.texts, _reasons(response), strict=True)
            ]
        )

    def _settle(self, conversation: list[ChatMessage], text: str, reason: str, context: ProposalContext) -> Proposal:
        first = self._try(text, reason, context)
        if isinstance(first, Proposal):
            return first
        try:
            response = self._complete(self.prompts.retry(conversation, text, first), 1, "propose.retry")
        except _RUN_LEVEL:
            raise
        except LLMError as exc:
            return self._failed(unparsed_answer(text), f"{first}; the retry request failed: {exc}")
        second = self._try(response.text, _reasons(response)[0], context)
        if isinstance(second, Proposal):
            return second
        return self._failed(unparsed_answer(response.text), f"{second} (after one retry; the first answer: {first})")

    def _try(self, text: str, reason: str, context: ProposalContext) -> Proposal | str:
        """A usable proposal from one answer, or the error to send back to the model."""
        try:
            parsed = parse_answer(text)
            edit = self._edit(parsed)
            kernel = apply_edit(context.kernel, edit)
        except EditError as exc:
            cut = " (the answer hit the max_tokens limit: keep it shorter)" if reason == "length" else ""
            return f"{exc}{cut}"
        if kernel.digest == context.kernel.digest:
            return "the edit leaves the kernel unchanged (only comments or whitespace differ)"
        if kernel.digest in context.tried_digests:
            return "the edited kernel was already evaluated on this search; propose a different change"
        return Proposal(edit=edit, kernel=kernel)

    def _complete(self, messages: Sequence[ChatMessage], n: int, purpose: str) -> LLMResponse:
        response = self.client.complete(
            messages, n=n, purpose=purpose, temperature=self.temperature, max_tokens=self.max_tokens
        )
        with self._lock:
            self._spent += response.cost_usd
        return response

    def _edit(self, parsed: ParsedAnswer) -> Edit:
        return Edit(
            kind=parsed.kind,
            payload=parsed.payload,
            category=parsed.category,
            rationale=parsed.rationale,
            proposer=self.edit_proposer,
        )

    def _failed(self, parsed: ParsedAnswer, error: str) -> Proposal:
        return Proposal(edit=self._edit(parsed), kernel=None, error=error)


def _reasons(response: LLMResponse) -> list[str]:
    reasons = list(response.finish_reasons[: len(response.texts)])
    return reasons + ["stop"] * (len(response.texts) - len(reasons))


def _mark_duplicates(proposals: list[Proposal]) -> list[Proposal]:
    """Later proposals that yield the same kernel as an earlier one become failed proposals."""
    first_of: dict[str, int] = {}
    out = []
    for index, proposal in enumerate(proposals, 1):
        if proposal.kernel is not None and proposal.usable:
            digest = proposal.kernel.digest
            if digest in first_of:
                proposal = Proposal(proposal.edit, None, f"same kernel as proposal {first_of[digest]} of this batch")
            else:
                first_of[digest] = index
        out.append(proposal)
    return out
