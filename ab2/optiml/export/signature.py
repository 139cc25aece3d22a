"""What an exported kernel is called with and returns, read from the task at export time.

Every shape set of the task is run on the meta device (no memory, no compute): the forward
arguments (tensors with their dtype and rank, or Python scalars), the ``state_dict`` tensors in
ABI order, and the outputs. Exports check calls against it (dtype, rank) and the custom op derives
its schema and its output shapes from it: each output dimension is either a dimension of one input
(the same one in every shape set) or a constant; an output with no such rule is looked up by the
input shapes of the shape sets seen here (:attr:`Signature.shape_table`).
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from optiml.errors import OptimlError
from optiml.task import Task


class ExportError(OptimlError):
    """A kernel or task cannot be exported in the asked form."""


@dataclass(frozen=True)
class ArgSpec:
    """One input of the kernel: a forward argument or a ``state_dict`` entry."""

    name: str  # forward parameter name, or the state_dict key for a parameter/buffer
    kind: str  # "tensor", "int", "float" or "bool"
    dtype: str = ""  # tensors: torch dtype name ("float32", "int64", ...)
    ndim: int = 0
    is_state: bool = False  # a parameter or buffer of Model (not a forward argument)
    holder: str = ""  # state entries: "_parameters" or "_buffers", the dict of its module that holds it

    @property
    def identifier(self) -> str:
        """A Python/schema identifier for the name (``ln.weight`` → ``ln_weight``)."""
        ident = re.sub(r"\W", "_", self.name)
        if not ident or ident[0].isdigit() or keyword.iskeyword(ident):
            ident = f"p_{ident}"
        return ident


@dataclass(frozen=True)
class OutputSpec:
    dtype: str
    ndim: int
    # one entry per dimension: (input index, dim) of an input in ABI order, or an int constant; None: no
    # rule holds for every shape set, the shape comes from Signature.shape_table
    dims: tuple[tuple[int, int] | int, ...] | None


@dataclass(frozen=True)
class Signature:
    inputs: tuple[ArgSpec, ...]  # forward arguments, then state_dict entries (the ABI order)
    outputs: tuple[OutputSpec, ...]
    # per shape set: (shapes of the tensor inputs in ABI order, shapes of the outputs)
    shape_table: tuple[tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]], ...]

    @property
    def args(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.inputs if not a.is_state)

    @property
    def state(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.inputs if a.is_state)

    def unique_identifiers(self) -> list[str]:
        """Identifiers of the inputs, made unique (``x``, ``weight``, ``weight_1``)."""
        seen: set[str] = set()
        names = []
        for spec in self.inputs:
            ident, n = spec.identifier, 1
            while ident in seen:
                ident, n = f"{spec.identifier}_{n}", n + 1
            seen.add(ident)
            names.append(ident)
        return names

    def state_accessors(self) -> list[str]:
        """Python expressions reading each state entry from ``model`` by dict look-ups (``ln.weight`` →
        ``model._modules['ln']._parameters['weight']``), cheaper per call than attribute access."""
        accessors = []
        for spec in self.state:
            *path, leaf = spec.name.split(".")
            steps = "".join(f"._modules[{step!r}]" for step in path)
            accessors.append(f"model{steps}.{spec.holder}[{leaf!r}]")
        return accessors

    def specs_record(self) -> list[dict[str, Any]]:
        """The inputs as plain dicts, for the exported file."""
        return [
            {"name": a.name, "kind": a.kind, "dtype": a.dtype, "ndim": a.ndim, "state": a.is_state} for a in self.inputs
        ]


def read_signature(task: Task) -> Signature:
    """Run every shape set of ``task`` on the meta device and read its calling convention."""
    from optiml.evaluate.runtime import TaskRuntime

    runs: list[tuple[list[Any], list[tuple[str, Any]], list[Any]]] = []
    first_model: Any = None
    for shape_set in range(task.num_shape_sets):
        runtime = TaskRuntime(task, "meta")
        try:
            args = runtime.make_args(0, shape_set)
            model = runtime.build_model(0, shape_set)
            outputs = runtime.run_reference(model, args)
        except OptimlError as exc:
            raise ExportError(
                f"{task.shown}: the export reads shapes on the meta device and shape set {shape_set} does "
                f"not run there ({exc})"
            ) from exc
        runs.append((args, list(model.state_dict().items()), outputs))
        if shape_set == 0:
            first_model = model
    first_args, first_state, first_outputs = runs[0]
    names = forward_parameter_names(type(first_model), len(first_args))
    inputs = [_arg_spec(name, value) for name, value in zip(names, first_args, strict=True)]
    parameters = {name for name, _ in first_model.named_parameters()}
    inputs += [
        _arg_spec(key, tensor, True, "_parameters" if key in parameters else "_buffers") for key, tensor in first_state
    ]
    for shape_set, (args, state, outputs) in enumerate(runs[1:], start=1):
        later = [_arg_spec(n, v) for n, v in zip(names, args, strict=False)]
        later += [_arg_spec(k, t, True) for k, t in state]
        if (
            len(later) != len(inputs)
            or len(outputs) != len(first_outputs)
            or any((a.kind, a.dtype, a.ndim) != (b.kind, b.dtype, b.ndim) for a, b in zip(later, inputs, strict=True))
        ):
            raise ExportError(
                f"{task.shown}: shape set {shape_set} changes the number, kind, dtype or rank of the inputs or "
                "outputs; an export needs one calling convention"
            )
    table = tuple(
        (
            tuple(tuple(v.shape) for v in [*args, *(t for _, t in state)] if _is_tensor(v)),
            tuple(tuple(o.shape) for o in outputs),
        )
        for args, state, outputs in runs
    )
    tensor_inputs = [i for i, spec in enumerate(inputs) if spec.kind == "tensor"]
    output_specs = tuple(
        OutputSpec(
            dtype=_dtype_name(out),
            ndim=out.dim(),
            dims=_dimension_rules(index, out.dim(), table, tensor_inputs),
        )
        for index, out in enumerate(first_outputs)
    )
    return Signature(inputs=tuple(inputs), outputs=output_specs, shape_table=table)


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _dtype_name(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _arg_spec(name: str, value: Any, is_state: bool = False, holder: str = "") -> ArgSpec:
    if _is_tensor(value):
        return ArgSpec(name, "tensor", _dtype_name(value), value.dim(), is_state, holder)
    kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"
    return ArgSpec(name, kind, is_state=is_state)


def _dimension_rules(
    output: int,
    ndim: int,
    table: Sequence[tuple[Sequence[tuple[int, ...]], Sequence[tuple[int, ...]]]],
    tensor_inputs: Sequence[int],
) -> tuple[tuple[int, int] | int, ...] | None:
    """Per output dimension, the first (input, dim) equal to it in every shape set (forward arguments before
    parameters, the same dim index first), else a constant; None when some dimension follows neither."""
    rules: list[tuple[int, int] | int] = []
    for dim in range(ndim):
        sizes = [outs[output][dim] for _, outs in table]
        candidates = [
            (abi_index, d)
            for slot, abi_index in enumerate(tensor_inputs)
            for d in sorted(range(len(table[0][0][slot])), key=lambda d: d != dim)
            if all(ins[slot][d] == size for (ins, _), size in zip(table, sizes, strict=True))
        ]
        if candidates:
            rules.append(candidates[0])
        elif len(set(sizes)) == 1:
            rules.append(sizes[0])
        else:
            return None
    return tuple(rules)


def forward_parameter_names(model_class: Any, count: int) -> list[str]:
    """The names of ``Model.forward``'s first ``count`` parameters after ``self``; ``argN`` for the rest."""
    try:
        parameters = list(inspect.signature(model_class.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        parameters = []
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [named[i] if i < len(named) else f"arg{i}" for i in range(count)]
