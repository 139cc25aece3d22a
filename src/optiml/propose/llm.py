"""The LLM proposer: prompt a model with the kernel and its evidence, turn answers into proposals.

One :meth:`LLMProposer.propose` call renders the prompt once, asks for up to ``n`` answers (as
``samples_per_request`` samples per request, requests sent in parallel), and settles each answer:

1. parse it (:func:`optiml.propose.answer.parse_answer`) and apply the edit to the current kernel;
2. reject an edit that changes nothing or yields a kernel already evaluated (``tried_digests``);
3. if no answer of a request is usable, ask once more in the same conversation, quoting the first
   unusable answer's error — at most ``retries_per_call`` such retries per ``propose`` call
   (default 1: each retry is a paid call carrying the whole prompt; answers beside a usable one
   are not retried, and a model that keeps failing is better asked again next time);
4. an answer that stays unusable becomes a :class:`Proposal` with ``error`` set: never a crash.

Spend per verified candidate: the proposer remembers, per kernel, how many of its last answers
were new and usable. When most were not (duplicates, edits that do not apply, prose), the next
request for that kernel asks for half as many samples (down to 1); a fully useful batch doubles it
back (up to ``n``). So a node the model has run dry on costs ever less until the search stops
asking it.

LLM errors: a request that fails (service unavailable, request refused, malformed response) yields
failed proposals for its samples, unless every request of the call failed: then the error is
raised (one line for the CLI; the search counts it as a failing proposer). Run-level conditions
are always raised: :class:`LLMConfigError`, :class:`LLMReplayMiss`, :class:`LLMCancelled`, and
:class:`LLMBudgetExceeded` when a budget stopped every request (so nothing was proposed), which
tells the search to stop asking. Ctrl-C while waiting cancels the client, so the call returns at
once instead of waiting for a silent server. Every edit's ``proposer`` is
``llm:<model>@<prompt version>``; ``last_sources`` tells, per proposal of the latest call, whether
its answer came from the network or from the cache / a recording.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from optiml.llm.client import LLMClient
from optiml.llm.errors import LLMBudgetExceeded, LLMCancelled, LLMConfigError, LLMError, LLMReplayMiss
from optiml.llm.types import ChatMessage, LLMResponse
from optiml.propose.answer import ParsedAnswer, parse_answer, unparsed_answer
from optiml.propose.base import Proposal, ProposalContext, Spend
from optiml.propose.edits import apply_edit
from optiml.propose.errors import EditError
from optiml.propose.prompts import PromptSet, load_prompts
from optiml.redact import redact_value, register_secret
from optiml.values import Edit

#: samples per request on providers that return ``n`` samples from one call (the prompt is paid once)
DEFAULT_SAMPLES_PER_REQUEST = 4
#: retries of unusable answers per ``propose`` call (each one is a paid call with the whole prompt)
DEFAULT_RETRIES_PER_CALL = 1
_RUN_LEVEL = (LLMConfigError, LLMReplayMiss, LLMCancelled)  # conditions of the whole run, raised to the caller
_REMEMBERED_KERNELS = 1024  # kernels whose last batch the proposer remembers (for fewer samples)

NETWORK = "network"
CACHED = "cached"  # from the response cache or a recording: no new call was paid for


@dataclass
class _Batch:
    proposals: list[Proposal] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    budget: LLMBudgetExceeded | None = None
    failure: LLMError | None = None  # the request itself failed


class _Allowance:
    """Retries left for one propose call, shared by its parallel requests."""

    def __init__(self, count: int) -> None:
        self._left = count
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True


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
        retries_per_call: int = DEFAULT_RETRIES_PER_CALL,
        adaptive: bool = True,
    ) -> None:
        self.client = client
        register_secret(client.config.api_key)  # from now on redacted wherever a candidate's text goes
        self.prompts = prompts or load_prompts()
        self.name = f"llm:{client.config.model}"
        # Anthropic returns one sample per call: send parallel requests of one sample instead.
        default = 1 if client.config.provider == "anthropic" else DEFAULT_SAMPLES_PER_REQUEST
        self.samples_per_request = max(1, samples_per_request or default)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.retries_per_call = max(0, retries_per_call)
        self.adaptive = adaptive
        self.last_sources: list[str] = []  # per proposal of the latest call: NETWORK or CACHED
        self._spent = 0.0
        self._next_samples: OrderedDict[str, int] = OrderedDict()  # kernel digest → samples to ask next
        self._sources: OrderedDict[int, tuple[Proposal, str]] = OrderedDict()  # id → (proposal, source)
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

    def spent(self) -> Spend:
        """What it has spent (:class:`optiml.search.protocols.PaidProposer`): its own dollars, and the
        API calls and tokens of its client as the client's call and token budgets count them."""
        calls, tokens = self.client.spent
        return Spend(usd=self.spent_usd, calls=calls, tokens=tokens)

    def spent_by_run(self, run_id: str) -> Spend:
        """Calls and tokens stored for ``run_id`` so far (none without a call store)."""
        if self.client.store is None:
            return Spend()
        calls, tokens = self.client.store.spent(run_id)
        return Spend(calls=calls, tokens=tokens)

    def cap(self, *, calls: int | None, tokens: int | None) -> None:
        """Stop the client at these totals of its calls and tokens (``LLMClient.cap``)."""
        self.client.cap(calls=calls, tokens=tokens)

    def from_cache(self, proposal: Proposal) -> bool:
        return self.source_of(proposal) == CACHED

    def source_of(self, proposal: Proposal) -> str | None:
        """NETWORK or CACHED for one of the recent proposals of this proposer (any thread), else None."""
        with self._lock:
            entry = self._sources.get(id(proposal))
        return entry[1] if entry is not None and entry[0] is proposal else None

    def samples_for(self, digest: str, n: int) -> int:
        """How many samples the next call for kernel ``digest`` asks for when ``n`` are wanted."""
        with self._lock:
            remembered = self._next_samples.get(digest)
        return n if remembered is None else max(1, min(n, remembered))

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        if n <= 0:
            return []
        digest = context.kernel.digest
        total = self.samples_for(digest, n) if self.adaptive else n
        conversation = self.prompts.messages(context)
        sizes = [self.samples_per_request] * (total // self.samples_per_request)
        if total % self.samples_per_request:
            sizes.append(total % self.samples_per_request)
        retries = _Allowance(self.retries_per_call)
        workers = min(len(sizes), self.client.config.concurrency)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="optiml-propose")
        try:
            futures = [pool.submit(self._batch, conversation, size, context, retries) for size in sizes]
            batches = [future.result() for future in futures]
        except BaseException as interrupt:
            if not isinstance(interrupt, Exception):  # Ctrl-C: stop waiting for the server now
                self.client.cancel()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        proposals = _mark_duplicates([p for batch in batches for p in batch.proposals])
        self.last_sources = [s for batch in batches for s in batch.sources]
        with self._lock:
            for proposal, source in zip(proposals, self.last_sources, strict=True):
                self._sources[id(proposal)] = (proposal, source)
            while len(self._sources) > _REMEMBERED_KERNELS:
                self._sources.popitem(last=False)
        if self.adaptive:
            self._learn(digest, total, n, proposals)
        if not any(p.usable for p in proposals):
            budget = next((b.budget for b in batches if b.budget is not None), None)
            if budget is not None:
                raise budget
            if all(b.failure is not None for b in batches):
                failure = batches[0].failure
                assert failure is not None
                raise failure
        return proposals

    def _learn(self, digest: str, asked: int, wanted: int, proposals: Sequence[Proposal]) -> None:
        """Halve the next request's samples for this kernel after a mostly wasted batch; double them
        back after a fully useful one."""
        new = sum(1 for p in proposals if p.usable)
        if 2 * new < asked:
            following = max(1, asked // 2)
        elif new >= asked:
            following = min(wanted, 2 * asked)
        else:
            following = asked
        with self._lock:
            self._next_samples[digest] = following
            self._next_samples.move_to_end(digest)
            while len(self._next_samples) > _REMEMBERED_KERNELS:
                self._next_samples.popitem(last=False)

    def _batch(
        self, conversation: list[ChatMessage], size: int, context: ProposalContext, retries: _Allowance
    ) -> _Batch:
        try:
            response = self._complete(conversation, size, "propose")
        except _RUN_LEVEL:
            raise
        except LLMBudgetExceeded as exc:
            failed = self._failed(unparsed_answer(""), f"LLM budget spent: {exc}")
            return _Batch([failed] * size, [NETWORK] * size, budget=exc)
        except LLMError as exc:
            failed = self._failed(unparsed_answer(""), f"LLM request failed: {exc}")
            return _Batch([failed] * size, [NETWORK] * size, failure=exc)
        outcomes = [self._try(t, r, context) for t, r in zip(response.texts, _reasons(response), strict=True)]
        may_retry = not any(isinstance(o, Proposal) for o in outcomes)  # retry only when nothing here is usable
        batch = _Batch()
        for text, outcome in zip(response.texts, outcomes, strict=True):
            if isinstance(outcome, Proposal):
                proposal, cached = outcome, response.cached
            elif may_retry and retries.take():
                proposal, cached = self._retry(conversation, text, outcome, context)
            else:
                proposal, cached = self._failed(unparsed_answer(text), outcome), response.cached
            batch.proposals.append(proposal)
            batch.sources.append(CACHED if cached else NETWORK)
        return batch

    def _retry(
        self, conversation: list[ChatMessage], text: str, first: str, context: ProposalContext
    ) -> tuple[Proposal, bool]:
        """Ask once more in the same conversation, quoting why ``text`` could not be used."""
        try:
            response = self._complete(self.prompts.retry(conversation, text, first), 1, "propose.retry")
        except _RUN_LEVEL:
            raise
        except LLMError as exc:
            return self._failed(unparsed_answer(text), f"{first}; the retry request failed: {exc}"), False
        second = self._try(response.text, _reasons(response)[0], context)
        if isinstance(second, Proposal):
            return second, response.cached
        failed = self._failed(unparsed_answer(response.text), f"{second} (after one retry; the first answer: {first})")
        return failed, response.cached

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
        # A prompt carries what candidates shaped (compiler output, crash messages): no secret leaves in it,
        # the provider's own key least of all (registered above: it may come from optiml.toml).
        response = self.client.complete(
            redact_value(list(messages)), n=n, purpose=purpose, temperature=self.temperature, max_tokens=self.max_tokens
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
