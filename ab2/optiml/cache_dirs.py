"""Where OptiML keeps files it can rebuild: compiled kernels, measured roofline peaks."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir(kind: str) -> Path:
    """``$XDG_CACHE_HOME/optiml/<kind>``, or ``~/.cache/optiml/<kind>`` when the variable is unset or empty."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "optiml" / kind
