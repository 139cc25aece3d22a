"""The Jinja environment of the export templates and the context every export shares."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import jinja2

from optiml import __version__
from optiml.cache_dirs import user_cache_dir
from optiml.export.signature import Signature
from optiml.export.verification import Verification, statement
from optiml.kernel.compiler import abi_header, included_helper_headers
from optiml.kernel.source import KernelSource
from optiml.task import Task

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("optiml.export", "templates"),
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,
)


def render(template: str, **context: Any) -> str:
    return _ENVIRONMENT.get_template(template).render(**context)


def multiline_literal(text: str) -> str:
    """A triple-quoted Python literal that evaluates to exactly ``text`` and keeps its lines as lines, so a
    reader of the exported file, or a line-based checker such as KernelBench's static checker, sees the
    kernel's code (a one-line ``repr`` hides it behind its first ``//`` comment)."""
    escaped = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped = escaped[:-1] + '\\"'
    # control characters other than newline and tab, escaped: a carriage return would be read as a newline
    escaped = _CONTROL.sub(lambda match: f"\\x{ord(match[0]):02x}", escaped)
    return f'"""{escaped}"""'


def abi_version(header: str) -> int:
    """``OPTIML_ABI_VERSION`` of the shipped header (ABI 2 added the ``memory`` field)."""
    match = re.search(r"#define\s+OPTIML_ABI_VERSION\s+(\d+)", header)
    return int(match[1]) if match else 1


def library_key(task: Task, kernel: KernelSource, arch: str) -> str:
    """The folder name under which an export of ``kernel`` caches its build for ``arch``
    (``~/.cache/optiml/export/KEY/kernel.so``): the digest ``build_library`` in ``_runtime.py.j2`` computes."""
    parts = [
        kernel.code,
        abi_header(),
        *included_helper_headers(kernel.code).values(),
        " ".join(kernel.flags),
        " ".join(f"-l{name}" for name in task.meta.libraries),
        arch,
    ]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:20]


def export_cache_root() -> Path:
    """Where exports cache their builds: OptiML's cache folder ``export`` (``_cache_root`` in the runtime)."""
    return user_cache_dir("export")


def common_context(
    task: Task, kernel: KernelSource, signature: Signature, verification: Verification | None, store: str
) -> dict[str, Any]:
    """Task, kernel, toolchain and verification facts every template uses (Python literals where code)."""
    header = abi_header()
    return {
        "task_name": task.name,
        "version": __version__,
        "task_source": task.source.rstrip() + "\n",
        "kernel_source": multiline_literal(kernel.code),
        "header_source": repr(header),
        # the helper headers the kernel includes (optiml_tma.h), written beside optiml.h when it is built
        "helper_headers": repr(included_helper_headers(kernel.code)),
        "abi_version": abi_version(header),
        "flags": repr(list(kernel.flags)),
        "libraries": repr([f"-l{name}" for name in task.meta.libraries]),
        "input_specs": repr(signature.specs_record()),
        "state_accessors": signature.state_accessors(),
        "launcher_source": repr(render("_launcher.cpp.j2")),
        **statement(task, kernel, verification, store),
    }
