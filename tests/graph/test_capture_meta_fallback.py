"""A model whose constructor the meta device cannot run is built on the CPU and moved to meta.

Swin's stochastic-depth schedule (``[x.item() for x in torch.linspace(0, rate, n)]``) stopped
KernelBench level3/29 and 30 at "building Model failed" before any op was seen; once captured, the
export's signature (read on meta too) still failed there, so 29_SwinMLP was verified with no user's
clock and no KernelBench verdict (H100, 2026-12-07). The task's own faults still stop both with the
constructor's error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.errors import TaskError
from optiml.export.signature import ExportError, read_signature
from optiml.graph.capture import capture_all
from optiml.task import load_task

TASK = """import torch
import torch.nn as nn

N, D = 8, 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}
        self.fc = nn.Linear(D, D)

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.rates[-1]


def get_inputs():
    return [torch.randn(N, D)]


def get_init_inputs():
    return []
"""


def _task(tmp_path: Path, init: str) -> Path:
    path = tmp_path / "model.py"
    path.write_text(TASK.format(init=init))
    return path


def test_a_constructor_reading_tensor_values_is_built_on_the_cpu(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path, "self.rates = [x.item() for x in torch.linspace(0, 0.5, 4)]"))
    (graph,) = capture_all(task)
    ops = [n.op for n in graph.nodes]
    assert "matmul" in ops and ops[-2:] == ["relu", "mul"]
    assert 0.5 in [v.const for v in graph.values if v.is_const]  # the last rate, read on the CPU


def test_the_constructors_own_fault_still_stops_capture(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path, "self.rates = [1.0] + undefined_name"))
    with pytest.raises(TaskError, match="building Model failed: NameError"):
        capture_all(task)


def test_the_exports_signature_reads_such_a_model_too(tmp_path: Path) -> None:
    signature = read_signature(load_task(_task(tmp_path, "self.rates = [x.item() for x in torch.linspace(0, 0.5, 4)]")))
    assert [a.name for a in signature.inputs] == ["x", "fc.weight", "fc.bias"]
    assert signature.shape_table[0][1] == ((8, 16),)


def test_the_constructors_own_fault_still_stops_the_export(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="building Model failed: NameError"):
        read_signature(load_task(_task(tmp_path, "self.rates = [1.0] + undefined_name")))
