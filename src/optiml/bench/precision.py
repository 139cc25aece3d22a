"""``optiml bench --precision tf32``: a suite's float32 tasks at the precision the user chooses for the run.

A task chooses its arithmetic in its own ``OPTIML`` dict (``"precision"``: ``"exact"``, the default, or ``"tf32"``,
PyTorch's default settings: see :mod:`optiml.task`); KernelBench's files carry no ``OPTIML``. For a bench run at
another precision, each float32 task that calls a convolution — the one op PyTorch's defaults compute in TF32, so
the only one whose reference differs, while ``"tf32"`` also loosens a task's tolerance to 1e-2 — is run from a copy
of its file whose ``OPTIML`` says so (the file's own dict with ``"precision"`` set, or a dict of that one key
added), written under the bench's folder, so the reference, the verification, the export and KernelBench's verdict
all read one file, and the same command resumes (the copies are written again, identically). Files beside the task
that belong to it (``<stem>.naive.cu``) are copied too. Other tasks, tasks already at that precision, and files
that do not load (their row will say why) run as they are. A convolution is seen in the source (``nn.Conv2d``,
``F.conv_transpose3d``, ``torch.conv1d``, ...), not traced.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from optiml.conv_arithmetic import CONVOLUTION
from optiml.errors import OptimlError
from optiml.task import PRECISIONS, load_task


def copies_folder(out_dir: Path, precision: str) -> Path:
    """Where a bench in ``out_dir`` keeps its copies of the tasks at ``precision``."""
    return out_dir / f"tasks-{precision}"


def at_precision(paths: list[Path], precision: str, folder: Path) -> list[Path]:
    """``paths`` with every float32 task not at ``precision`` replaced by its copy in ``folder`` (see the module)."""
    if precision not in PRECISIONS:
        raise OptimlError(f"--precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    return [_copy_at(path, precision, folder) for path in paths]


def _copy_at(path: Path, precision: str, folder: Path) -> Path:
    try:
        meta = load_task(path).meta
    except OptimlError:
        return path  # the run records why it does not load
    source = path.read_text(encoding="utf-8")
    if meta.dtype != "float32" or meta.precision == precision or not CONVOLUTION.search(source):
        return path
    target = folder / path.parent.name / path.name  # the file's name (the task's) kept; its folder apart
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(with_precision(source, precision), encoding="utf-8")
    for sibling in path.parent.glob(f"{path.stem}.*"):
        if sibling != path and sibling.is_file():
            shutil.copyfile(sibling, target.parent / sibling.name)
    return target


def with_precision(source: str, precision: str) -> str:
    """``source`` (a task file that loads) with its module-level ``OPTIML`` dict's ``"precision"`` set to
    ``precision``, or, without one, that dict appended."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["OPTIML"]:
            meta = ast.literal_eval(node.value)  # load_task read it as a literal
            meta["precision"] = precision
            lines = source.splitlines(keepends=True)
            assert node.end_lineno is not None
            replaced = f"OPTIML = {meta!r}  # precision set by optiml bench --precision {precision}\n"
            return "".join([*lines[: node.lineno - 1], replaced, *lines[node.end_lineno :]])
    ending = "" if source.endswith("\n") else "\n"
    return f"{source}{ending}\nOPTIML = {{'precision': {precision!r}}}  # added by optiml bench --precision\n"
