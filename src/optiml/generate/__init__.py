"""OptiML-G: generation of root kernels and tasks.

- :func:`generate_root` — the Mixture-of-Thoughts: several strategies write candidates in
  parallel, every candidate is compiled, verified and repaired, an aggregation step combines the
  verified ones, and the fastest verified kernel becomes the search's root.
- :func:`adapt_kernel` — an existing CUDA kernel with its own host code, wrapped into the ABI.
- :func:`generate_task_from_request` and :func:`validate_task_file` — natural language → a checked
  KernelBench task, which the CLI shows to the user (``optiml.cli.views.confirm``) before anything
  is optimized against it.
- :func:`require_llm` — generation needs an LLM; this says how to configure one.

Modules: thoughts (strategies as data), config (``[generate]``), prompts + templates/, answers
(code out of answers), pipeline (ask → evaluate → repair → verdict), mixture, adapt, task_gen,
task_check, store (its tables in the run store), offline (the root from templates), root (the
search's root: offline or the LLM's), unverified (no GPU: refuse, or compile only), candidate_files
(every LLM-written kernel kept as a file).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use (below): `optiml check-task` needs task_check alone, not torch
    from optiml.generate.adapt import adapt_kernel
    from optiml.generate.config import GenerationConfig, load_generation_config, require_llm
    from optiml.generate.errors import GenerationError
    from optiml.generate.mixture import generate_root
    from optiml.generate.outcome import Attempt, GenerationEvent, GenerationOutcome, ThoughtRecord
    from optiml.generate.store import GenerationStore
    from optiml.generate.task_check import TaskCheck, validate_task_file
    from optiml.generate.task_gen import generate_task_from_request
    from optiml.generate.thoughts import BUILTIN_THOUGHTS, Thought

_MODULES = {
    "adapt_kernel": "adapt",
    "GenerationConfig": "config",
    "load_generation_config": "config",
    "require_llm": "config",
    "GenerationError": "errors",
    "generate_root": "mixture",
    "Attempt": "outcome",
    "GenerationEvent": "outcome",
    "GenerationOutcome": "outcome",
    "ThoughtRecord": "outcome",
    "GenerationStore": "store",
    "TaskCheck": "task_check",
    "validate_task_file": "task_check",
    "generate_task_from_request": "task_gen",
    "BUILTIN_THOUGHTS": "thoughts",
    "Thought": "thoughts",
}


def __getattr__(name: str) -> Any:
    """The package's names, each imported from its module on first use (PEP 562)."""
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "BUILTIN_THOUGHTS",
    "Attempt",
    "GenerationConfig",
    "GenerationError",
    "GenerationEvent",
    "GenerationOutcome",
    "GenerationStore",
    "TaskCheck",
    "Thought",
    "ThoughtRecord",
    "adapt_kernel",
    "generate_root",
    "generate_task_from_request",
    "load_generation_config",
    "require_llm",
    "validate_task_file",
]
