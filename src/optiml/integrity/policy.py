"""How strictly candidate processes must be confined: the ``OPTIML_ISOLATION`` policy (standard library only)."""

from __future__ import annotations

import os

#: "best_effort": candidates run in their sandbox where the host allows it, unconfined (and said) where not;
#: "required": a candidate that cannot run in its sandbox fails instead
ISOLATIONS = ("best_effort", "required")


def isolation_policy() -> str:
    """``OPTIML_ISOLATION`` as given (empty or unset: ``best_effort``); not validated here (see ``ISOLATIONS``)."""
    return os.environ.get("OPTIML_ISOLATION", "").strip() or "best_effort"
