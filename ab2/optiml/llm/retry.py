"""How long to wait before retrying: exponential backoff with jitter, or the server's Retry-After."""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Backoff", "parse_retry_after"]


@dataclass(frozen=True)
class Backoff:
    """Delay before retry number `attempt` (1-based).

    Without a hint: "equal jitter" exponential backoff — half of ``min(max_s, base_s * 2**(attempt-1))``
    plus a uniform random share of the other half, so concurrent clients spread out.
    With a Retry-After hint: at least the hint, plus up to 10 % jitter, capped at `retry_after_cap_s`
    (a server asking for an hour should not stall a search for an hour; the retry will then fail
    again and the client gives up with `LLMUnavailable`).
    """

    base_s: float = 1.0
    max_s: float = 30.0
    retry_after_cap_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0) * (1.0 + 0.1 * rng.random()), self.retry_after_cap_s)
        ceiling = min(self.max_s, self.base_s * 2.0 ** max(attempt - 1, 0))
        return ceiling / 2.0 + rng.uniform(0.0, ceiling / 2.0)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait per ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), else None."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
            if math.isfinite(value):
                return max(value, 0.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return max(value, 0.0) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
