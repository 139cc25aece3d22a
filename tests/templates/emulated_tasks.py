"""Small tasks written for a test, planned into template units and checked against torch on the CPU emulator."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from test_gemm_template import EMULATED, emulated_library, from_bits, run_emulated

from optiml.graph.capture import capture_all
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task
from optiml.templates.base import GroupConfig
from optiml.templates.kernels import TemplateKernels
from optiml.templates.plan import make_plan


def write_task(folder: Path, name: str, text: str) -> Task:
    path = folder / f"{name}.py"
    path.write_text(text)
    return load_task(path)


def task_text(shape_sets: list[dict[str, int]], forward: str, inputs: str, init: str = "", imports: str = "") -> str:
    """A float32 task file: the first shape set's sizes as module constants, ``init`` and ``forward`` as the
    bodies of ``Model.__init__`` and ``Model.forward`` (its parameters on forward's first line, as ``(x, y)``),
    ``inputs`` the list ``get_inputs`` returns."""
    params, body = forward.split("\n", 1)
    constants = "\n".join(f"{name} = {value}" for name, value in shape_sets[0].items())
    init_code = (
        "    def __init__(self):\n        super().__init__()\n" + textwrap.indent(init, " " * 8) + "\n\n"
        if init
        else ""
    )
    return f"""import torch
import torch.nn as nn
{imports}
OPTIML = {{"dtype": "float32", "shape_sets": {shape_sets!r}}}
{constants}


class Model(nn.Module):
{init_code}    def forward(self, {params}):
{textwrap.indent(body, " " * 8)}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""


def planned(task: Task) -> TemplateKernels:
    """The task's plan with the emulator's device facts (few SMs)."""
    return TemplateKernels(task, make_plan(list(capture_all(task))), EMULATED)


def with_variant(kernels: TemplateKernels, config: GroupConfig) -> KernelSource:
    """``kernels`` rendered with ``config`` for every kernel whose space offers its variant, the default for the
    rest (at least one must offer it)."""
    spaces = kernels.spaces
    assert any(config.variant in space.variants for space in spaces), f"{config.variant}: {kernels.describe()}"
    default = kernels.default()
    chosen = [config if config.variant in space.variants else c for c, space in zip(default, spaces, strict=True)]
    return kernels.render(chosen)


def variant_units(tasks: Sequence[Task], configs: Sequence[GroupConfig]) -> list[tuple[Task, str, str]]:
    """``(task, label, source)`` for each task planned for the emulator and rendered with each configuration
    (:func:`with_variant`), to run through :func:`emulator_mismatches`."""
    units = []
    for task in tasks:
        kernels = planned(task)
        units += [(kernels.task, config.label(), with_variant(kernels, config).code) for config in configs]
    return units


def emulator_mismatches(folder: Path, units: Sequence[tuple[Task, str, str]], seed: int, tol: float) -> list[str]:
    """Run each ``(task, label, source)`` at every shape set of its task on seeded inputs; one line per
    output that differs from torch beyond ``tol`` (absolute and relative), naming unwritten elements."""
    from optiml.evaluate.runtime import TaskRuntime

    library = emulated_library(folder, [code for _, _, code in units])
    failures = []
    for k, (task, label, _) in enumerate(units):
        runtime = TaskRuntime(task, "cpu")
        for shape_set in range(task.num_shape_sets):
            case = runtime.case(seed + shape_set, shape_set)
            got = run_emulated(library, k, case.abi_inputs, case.expected)
            for bits, want in zip(got, case.expected, strict=True):
                g = from_bits(bits, want.dtype)
                ref = want.double().numpy().reshape(-1)
                if not np.allclose(g, ref, rtol=tol, atol=tol):
                    unwritten = int(np.isnan(g).sum())
                    failures.append(
                        f"{task.name} {label} shape set {shape_set}: max error {np.nanmax(np.abs(g - ref))}, "
                        f"{unwritten} unwritten"
                    )
    return failures
