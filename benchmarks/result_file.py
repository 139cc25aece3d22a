"""The JSON every benchmark writes under ``benchmarks/results/``: what ran, on which GPU, when, at
which commit, then the benchmark's own fields. Written whole each time, so a benchmark may call it
after every task and a run cut short keeps what it measured."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def write_result(out: Path, benchmark: str, commit: str, *, gpu: bool = True, **fields: Any) -> dict[str, Any]:
    """Write and return the document; ``gpu=False`` for CPU-only benchmarks (no torch import)."""
    document: dict[str, Any] = {"benchmark": benchmark}
    if gpu:
        import torch

        document["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    document["date"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    document["commit"] = commit
    document.update(fields)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    return document


def head_commit(given: str | None = None) -> str:
    """``given`` (a ``--commit`` flag), else the checkout's short HEAD, else "unknown" (no git there)."""
    if given:
        return given
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root)
    return run.stdout.strip() or "unknown"
