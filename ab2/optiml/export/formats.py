"""The three export forms behind ``optiml export --as``: what files each writes and how to use them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optiml.export.kernelbench import render_model_new
from optiml.export.op import default_op_name, render_op
from optiml.export.signature import ExportError, read_signature
from optiml.export.standalone import render_standalone
from optiml.export.verification import Verification
from optiml.kernel.source import KernelSource
from optiml.task import Task

FORMATS = ("modelnew", "op", "cu")


@dataclass(frozen=True)
class ExportRequest:
    form: str
    out: Path
    namespace: str | None = None  # op only
    name: str | None = None  # op only
    shape_set: int | None = None  # cu only: the recorded case's shape set (default: the smallest)


def default_output(task: Task, form: str) -> Path:
    return Path(
        {"modelnew": f"{task.name}_model_new.py", "op": f"{task.name}_op.py", "cu": f"{task.name}_standalone.cu"}[form]
    )


def data_path(cu_path: Path) -> Path:
    """Where the ``.cu`` export's recorded case goes: beside it, ``<stem>.bin``."""
    return cu_path.with_name(cu_path.stem + ".bin")


def check_request(request: ExportRequest) -> None:
    """Options that belong to another form are an error, not silently ignored."""
    if request.form not in FORMATS:
        raise ExportError(f"--as {request.form!r}: choose one of {', '.join(FORMATS)}")
    if request.form != "op" and (request.namespace is not None or request.name is not None):
        raise ExportError("--namespace and --name apply to --as op only")
    if request.form != "cu" and request.shape_set is not None:
        raise ExportError("--shape-set applies to --as cu only")


def render_export(
    request: ExportRequest, task: Task, kernel: KernelSource, verification: Verification | None, store: str
) -> tuple[list[tuple[Path, str | bytes]], str]:
    """The files to write (path, contents) and a one-line hint on using them."""
    check_request(request)
    out = request.out
    if request.form == "modelnew":
        text = render_model_new(task, kernel, verification, store, read_signature(task))
        return [(out, text)], f"`from {out.stem} import ModelNew` (same arguments as the task's Model)"
    if request.form == "op":
        namespace, name = request.namespace or "optiml", request.name or default_op_name(task)
        text = render_op(task, kernel, verification, store, namespace, name, module_hint=out.stem)
        return [(out, text)], f"`import {out.stem}` registers torch.ops.{namespace}.{name}"
    text, data = render_standalone(task, kernel, verification, store, request.shape_set, file_name=out.name)
    build = next(line for line in text.splitlines() if line.startswith("// Build: ")).removeprefix("// Build: ")
    return [(out, text), (data_path(out), data)], f"build with `{build}` and run it beside {data_path(out).name}"
