"""Capture of reference patterns the KernelBench coverage sweep found crashing or blocked.

* a tensor the forward builds itself (``torch.min(x, torch.tensor(0.5))``) became a ``get_attr``
  node the converter skipped, and the next op died with ``KeyError: _tensor_constant0``; built on the
  input's device (``torch.tensor(0.5, device=x.device)``, KernelBench level 2 problems 83 and 93), it was a
  meta tensor whose value the trace had lost;
* inputs drawn from a ``torch.distributions`` distribution (``Pareto(...).sample``) failed on the
  meta device, whose tensors cannot answer the distribution's ``bool(tensor)`` parameter check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.graph.capture import UnsupportedOpError, capture_all
from optiml.task import load_task
from optiml.templates.kernels import template_kernels

HEADER = """
import torch
import torch.nn as nn
from torch.distributions import Exponential

M = 6
N = 40
"""


def _task(folder: Path, name: str, forward: str, inputs: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(
        HEADER
        + "\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        + forward
        + "\n\n\ndef get_inputs():\n"
        + inputs
        + "\n\n\ndef get_init_inputs():\n    return []\n",
        encoding="utf-8",
    )
    return path


def test_a_scalar_tensor_built_in_forward_is_a_constant(tmp_path: Path) -> None:
    path = _task(
        tmp_path,
        "clip_const",
        "        return torch.min(x, torch.tensor(0.25)) * 3.0",
        "    return [torch.randn(M, N)]",
    )
    (graph,) = capture_all(load_task(path))
    consts = [v.const for v in graph.values if v.const is not None]
    assert 0.25 in consts  # the value the forward built, not a placeholder
    kernels = template_kernels(load_task(path))
    assert kernels.seeds(1) and kernels.render(kernels.seeds(1)[0]).code


def test_a_number_made_a_tensor_on_the_inputs_device_keeps_its_value(tmp_path: Path) -> None:
    path = _task(
        tmp_path,
        "clip_on_device",
        "        return torch.min(x, torch.tensor(0.25, device=x.device)) * 3.0",
        "    return [torch.randn(M, N)]",
    )
    (graph,) = capture_all(load_task(path))
    assert 0.25 in [v.const for v in graph.values if v.const is not None]
    kernels = template_kernels(load_task(path))
    assert kernels.render(kernels.default()).code
    assert torch.tensor(1.0, device="meta").device.type == "meta"  # torch.tensor is itself again after the trace


def test_a_larger_tensor_built_in_forward_is_a_clean_refusal(tmp_path: Path) -> None:
    path = _task(
        tmp_path,
        "add_table",
        "        return x + torch.tensor([1.0, 2.0]).sum() * torch.ones(N)",
        "    return [torch.randn(M, N)]",
    )
    try:
        capture_all(load_task(path))
    except UnsupportedOpError as exc:  # refusing is fine; a KeyError/AttributeError is not
        assert "\n" not in str(exc)


def test_inputs_drawn_from_a_distribution_trace_on_meta(tmp_path: Path) -> None:
    inputs = "    return [Exponential(torch.tensor(1.5)).sample((M, N))]"
    path = _task(tmp_path, "mean_sq", "        return torch.mean(x * x)", inputs)
    (graph,) = capture_all(load_task(path))
    assert graph.values[graph.inputs[0]].type.shape == (6, 40)


def test_distribution_checks_are_restored_after_the_meta_run(tmp_path: Path) -> None:
    from torch.distributions import Distribution

    before = Distribution._validate_args
    inputs = "    return [Exponential(torch.tensor(1.5)).sample((M, N))]"
    capture_all(load_task(_task(tmp_path, "mean_abs", "        return torch.mean(torch.abs(x))", inputs)))
    assert Distribution._validate_args == before


@pytest.mark.parametrize("name", ["clip_const"])
def test_the_plan_reads_the_constant_value(tmp_path: Path, name: str) -> None:
    path = _task(tmp_path, name, "        return torch.min(x, torch.tensor(0.25))", "    return [torch.randn(M, N)]")
    source = template_kernels(load_task(path)).render(template_kernels(load_task(path)).seeds(1)[0]).code
    assert "0.25" in source
