"""Render a verified kernel as a self-contained KernelBench ``ModelNew`` Python file.

The file embeds the task's reference source (``Model`` holds the parameters, and shape inference
runs it on the meta device), the kernel source, the ABI header and the nvcc flags. At run time it
builds the kernel with nvcc once (cached) and calls it through ctypes — the same C ABI the
harness verified, and seconds instead of a minute of ``load_inline``.
"""

from __future__ import annotations

from importlib import resources

import jinja2

from optiml import __version__
from optiml.kernel.compiler import abi_header
from optiml.kernel.source import KernelSource
from optiml.task import Task


def render_model_new(task: Task, kernel: KernelSource) -> str:
    template_text = (resources.files("optiml.export") / "templates" / "model_new.py.j2").read_text(encoding="utf-8")
    template = jinja2.Template(template_text, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return template.render(
        task_name=task.name,
        version=__version__,
        digest=kernel.digest,
        task_source=task.source.rstrip() + "\n",
        kernel_source=repr(kernel.code),
        header_source=repr(abi_header()),
        flags=repr(list(kernel.flags)),
    )
