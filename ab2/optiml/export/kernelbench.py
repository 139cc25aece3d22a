"""Render a verified kernel as a self-contained KernelBench ``ModelNew`` Python file.

The file embeds the task's reference source (``ModelNew`` subclasses its ``Model``, so parameters and
``state_dict`` keys are the reference's), the kernel source, the ABI header and the nvcc flags. At run
time it builds the kernel with nvcc once (cached) and calls it through ctypes — the same C ABI the
harness verified, and seconds instead of a minute of ``load_inline``. Output shapes and the kernel's
argument block are computed once per input signature and kept outside the module tree (issue 19).
"""

from __future__ import annotations

from optiml.export.rendering import common_context, render
from optiml.export.signature import Signature, read_signature
from optiml.export.verification import Verification
from optiml.kernel.source import KernelSource
from optiml.task import Task


def render_model_new(
    task: Task,
    kernel: KernelSource,
    verification: Verification | None = None,
    store: str = "",
    signature: Signature | None = None,
) -> str:
    """The ``ModelNew`` file; with ``verification`` None it is labelled UNVERIFIED (``store``: where no
    record was found, for the label). ``signature`` defaults to reading it from the task."""
    context = common_context(task, kernel, signature or read_signature(task), verification, store)
    return render("model_new.py.j2", what=f"ModelNew ({task.name})", **context)
