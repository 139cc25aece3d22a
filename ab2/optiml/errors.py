"""The exceptions OptiML raises, rooted at :class:`OptimlError`.

::

    OptimlError                 anything OptiML reports as a one-line message
    ├── TaskError               a task file is missing, malformed, or its reference misbehaves
    │   └── UnsupportedOpError  (optiml.graph.capture) the reference uses an op no template covers
    ├── KernelSourceError       a kernel file cannot be read or is not a candidate at all
    ├── ToolchainError          nvcc / ptxas / ncu missing or unusable
    ├── NoGPUError              the operation needs a CUDA device and none is visible
    ├── WorkerError             the isolated GPU worker could not be started or spoke garbage
    ├── ConfigError             bad configuration (optiml.toml, flags, environment)
    ├── StoreError              the run store is missing a run or is unreadable
    ├── TemplateError           a configuration a template cannot render (also optiml.templates.base's)
    ├── EditError               (optiml.propose.errors) an edit cannot be parsed or applied
    ├── GenerationError         (optiml.generate.errors) generation cannot produce what was asked
    ├── SearchError             (optiml.search.runner) a search cannot start or continue
    ├── ExportError             (optiml.export.signature) a kernel or task cannot be exported as asked
    ├── BudgetSpent             a spending budget bound (the search stops asking for proposals)
    └── LLMError                (optiml.llm.errors) provider, budget and replay failures

A candidate that fails to compile, crashes, hangs or computes the wrong answer is *not*
an exception: it is a normal :class:`optiml.values.EvalResult` with its status
and message, so search code never branches on exceptions.
"""

from __future__ import annotations


class OptimlError(Exception):
    """Base class: the CLI prints ``str(err)`` on one red line and exits non-zero."""


class TaskError(OptimlError):
    pass


class KernelSourceError(OptimlError):
    pass


class ToolchainError(OptimlError):
    pass


class NoGPUError(OptimlError):
    pass


class WorkerError(OptimlError):
    pass


class ConfigError(OptimlError):
    pass


class StoreError(OptimlError):
    pass


class TemplateError(OptimlError):
    """A configuration that a template cannot render (the search treats it as "prune").

    Raised by the templates and by the op graph's workspace sizes (:mod:`optiml.graph.sizes`);
    :mod:`optiml.templates.base` re-exports it."""


class BudgetSpent(OptimlError):
    """A budget on what proposals cost is spent (``LLMBudgetExceeded`` is one): ask for no more.
    ``reason`` is a short phrase for the run's stop reason."""

    reason: str = ""
