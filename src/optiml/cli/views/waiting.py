"""A spinner that names what a command waits for and counts the seconds: every wait over a second shows one."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from optiml.llm import LLMClient


@contextlib.contextmanager
def waiting(console: Console, what: str, detail: Callable[[], str] | None = None) -> Iterator[None]:
    """Show ``what (N s)`` on ``console`` while the block runs, updated every second; ``detail()``, when given,
    adds a note (a retry count, say). On a console that is not a terminal rich shows nothing."""
    status = console.status(escape(what))
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(1.0):
            extra = detail() if detail is not None else ""
            text = f"{what} ({time.monotonic() - start:.0f} s{f'; {extra}' if extra else ''})"
            status.update(escape(text))

    ticker = threading.Thread(target=tick, name="optiml-waiting", daemon=True)
    with status:
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()


def llm_where(client: LLMClient) -> str:
    """``model at host``: which LLM a wait is for (the URL without credentials)."""
    from optiml.llm.config import redact_url

    return f"{client.config.model} at {redact_url(client.config.effective_base_url)}"


def retries_note(client: LLMClient) -> Callable[[], str]:
    """The note a wait on ``client`` shows: its retries so far (the deadline bounds how many are left)."""

    def note() -> str:
        retries = client.usage.retries
        if not retries:
            return ""
        deadline = client.config.deadline_s
        return f"{retries} retr{'y' if retries == 1 else 'ies'} so far, within the {deadline:g} s deadline per request"

    return note
