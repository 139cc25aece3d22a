"""The orchestrator ↔ judge protocol: one JSON object per line each way, and its replies decoded once.

A request is ``{"op": ..., ...}``. A reply is ``{"ok": true, "result": {...}}`` or
``{"ok": false, "error": "one line", "status": ..., "kind": ...}``; either may carry
``"fatal": true``, which means the judge's own CUDA context is unusable and the worker exits
right after the reply (the client then reaps it, and the next request starts a fresh worker).
``kind`` says which of the orchestrator's errors a failure is: :data:`KIND_TASK` (the task file
is broken), :data:`KIND_NO_GPU` (the worker sees no CUDA device) or :data:`KIND_GPU_MEMORY` (the judge
itself could not get GPU memory: the card is shared, or the candidate's process holds it); a candidate's
fault carries its :class:`~optiml.values.EvalStatus` value in ``status`` instead.

Standard library only: the GPU worker imports it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KIND_TASK = "task"
KIND_NO_GPU = "no_gpu"
KIND_GPU_MEMORY = "gpu_memory"


def success(result: dict[str, Any], *, fatal: bool = False) -> dict[str, Any]:
    """A reply carrying ``result``; ``fatal``: the worker exits after sending it."""
    return {"ok": True, "result": result, **({"fatal": True} if fatal else {})}


def failure(error: str, *, status: str | None = None, kind: str | None = None, fatal: bool = False) -> dict[str, Any]:
    """A reply saying why a request failed (one line)."""
    reply: dict[str, Any] = {"ok": False, "error": error}
    if status is not None:
        reply["status"] = status
    if kind is not None:
        reply["kind"] = kind
    if fatal:
        reply["fatal"] = True
    return reply


def encode(reply: dict[str, Any]) -> str:
    return json.dumps(reply) + "\n"


@dataclass(frozen=True)
class Reply:
    """One decoded reply (see the module docstring)."""

    ok: bool
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    status: str | None = None
    kind: str | None = None
    fatal: bool = False

    @classmethod
    def decode(cls, line: str) -> Reply:
        """Raises ValueError for anything that is not a reply object."""
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
            raise ValueError("not a reply object")
        result = data.get("result") or {}
        if not isinstance(result, dict):
            raise ValueError("the reply's result is not an object")
        return cls(
            ok=data["ok"],
            result=result,
            error=str(data.get("error") or ("" if data["ok"] else "worker error")),
            status=data.get("status"),
            kind=data.get("kind"),
            fatal=bool(data.get("fatal")),
        )
