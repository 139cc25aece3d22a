"""A view of a value computed in the kernel (``exp(a).unsqueeze(1) * b``): laid out like the domain, on the emulator.

The view's input comes from outside the kernel (recomputed from an input), so its dims must follow
the view's output into the domain — not be right-aligned to it, which once read ``a`` along the
size-1 dim and wrote one row of the result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_gemm_template import EMULATED, emulated_library, needs_gxx, run_emulated

from optiml.graph.capture import capture_all
from optiml.task import load_task
from optiml.templates.kernels import TemplateKernels
from optiml.templates.plan import make_plan

TASK = """import torch
import torch.nn as nn

N, M, C = 40, 24, 6
OPTIML = {{"shape_sets": [{{"N": 7, "M": 33, "C": 3}}]}}


class Model(nn.Module):
    def forward(self, a, b):
        return {body}


def get_inputs():
    return [torch.randn({a_shape}), torch.randn({b_shape})]


def get_init_inputs():
    return []
"""

CASES = [
    ("torch.exp(a).unsqueeze(1) * b", "N", "N, M"),
    ("(a * a).view(-1, 1) + b", "N", "N, M"),
    ("torch.sigmoid(a).view(-1, 1) * b + a.view(-1, 1)", "N", "N, M"),
    ("b * torch.sigmoid(a).view(1, C, 1)", "C", "N, C, M"),  # squeeze-excitation style channel gate
]


@needs_gxx
def test_views_of_recomputed_values_match_torch_on_the_emulator(tmp_path: Path) -> None:
    from optiml.evaluate.runtime import TaskRuntime

    tasks = []
    for k, (body, a_shape, b_shape) in enumerate(CASES):
        path = tmp_path / f"view_{k}.py"
        path.write_text(TASK.format(body=body, a_shape=a_shape, b_shape=b_shape))
        tasks.append(load_task(path))
    units = []
    for task in tasks:
        kernels = TemplateKernels(task, make_plan(list(capture_all(task))), EMULATED)
        units.append(kernels.render(kernels.default()).code)
    library = emulated_library(tmp_path / "emu", units)
    failures = []
    for k, task in enumerate(tasks):
        runtime = TaskRuntime(task, "cpu")
        for shape_set in range(task.num_shape_sets):
            case = runtime.case(3 + shape_set, shape_set)
            (got,) = run_emulated(library, k, case.abi_inputs, case.expected)
            want = case.expected[0].double().numpy().reshape(-1)
            if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                failures.append(f"{CASES[k][0]} shape set {shape_set}: {int(np.isnan(got).sum())} unwritten")
    assert not failures, "\n".join(failures)
