"""Render a verified kernel as a Python file registering a ``torch.library`` custom op.

``torch.ops.<namespace>.<name>(*forward_args, *state_dict_tensors)`` runs the kernel: the schema is the
task's calling convention (:mod:`optiml.export.signature`), the CUDA implementation calls the kernel
through the same C ABI and argument-block cache as the ``ModelNew`` export, a CPU implementation says
the kernel needs CUDA tensors, and the fake implementation computes output shapes from the signature's
dimension rules so ``torch.compile`` traces through the op without running it.
"""

from __future__ import annotations

import re

from optiml.export.rendering import common_context, render
from optiml.export.signature import ExportError, Signature, read_signature
from optiml.export.verification import Verification
from optiml.kernel.source import KernelSource
from optiml.task import Task

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED_NAMESPACES = {"aten", "prim", "prims", "torch", "_"}
_SCHEMA_TYPES = {"tensor": "Tensor", "int": "int", "float": "float", "bool": "bool"}


def default_op_name(task: Task) -> str:
    """The task's name as an op identifier (``40_LayerNorm`` → ``op_40_layernorm``)."""
    name = re.sub(r"\W+", "_", task.name).strip("_").lower() or "kernel"
    return f"op_{name}" if name[0].isdigit() else name


def check_identifier(value: str, option: str) -> str:
    if not _IDENTIFIER.fullmatch(value):
        raise ExportError(f"{option} {value!r}: expected an identifier (letters, digits, _; not starting with a digit)")
    return value


def render_op(
    task: Task,
    kernel: KernelSource,
    verification: Verification | None = None,
    store: str = "",
    namespace: str = "optiml",
    name: str | None = None,
    module_hint: str = "",
    signature: Signature | None = None,
) -> str:
    """The custom-op file (``module_hint``: the module name users import, for its docstring)."""
    check_identifier(namespace, "--namespace")
    if namespace in _RESERVED_NAMESPACES:
        raise ExportError(f"--namespace {namespace!r} belongs to PyTorch; choose another")
    name = check_identifier(name or default_op_name(task), "--name")
    signature = signature or read_signature(task)
    identifiers = signature.unique_identifiers()
    arguments = ", ".join(f"{_SCHEMA_TYPES[s.kind]} {i}" for s, i in zip(signature.inputs, identifiers, strict=True))
    returns = ["Tensor"] * len(signature.outputs)
    schema = f"({arguments}) -> " + (returns[0] if len(returns) == 1 else f"({', '.join(returns)})")
    parameters = ", ".join(identifiers)
    state = [f"{i} = {s.name}" for s, i in zip(signature.inputs, identifiers, strict=True) if s.is_state]
    context = common_context(task, kernel, signature, verification, store)
    return render(
        "op.py.j2",
        what=f"op {namespace}::{name}",
        namespace=namespace,
        name=name,
        schema=schema,
        parameters=parameters,
        module_hint=module_hint or f"{task.name}_op",
        call_example=f"out = torch.ops.{namespace}.{name}({parameters})",
        state_names=", ".join(state) if state else "this task has none",
        shape_doc=_shape_doc(signature, identifiers),
        reference_source=repr(task.source),
        outputs=repr(
            [
                {
                    "dtype": o.dtype,
                    "dims": [list(d) if isinstance(d, tuple) else d for d in o.dims] if o.dims is not None else None,
                }
                for o in signature.outputs
            ]
        ),
        shape_table=repr([[list(ins), list(outs)] for ins, outs in signature.shape_table]),
        **context,
    )


def _shape_doc(signature: Signature, identifiers: list[str]) -> str:
    parts = []
    for index, out in enumerate(signature.outputs):
        if out.dims is None:
            parts.append(f"output {index} for the task's shape sets only (SHAPE_TABLE)")
            continue
        dims = [f"{identifiers[d[0]]}.shape[{d[1]}]" if isinstance(d, tuple) else str(d) for d in out.dims]
        parts.append(f"output {index} is [{', '.join(dims)}] {out.dtype}")
    return "; ".join(parts)
