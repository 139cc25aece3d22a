"""Refusals around tracing in one line naming the cause: a recurrent layer, a write into a tensor attribute."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from optiml.graph.capture import UnsupportedOpError, capture_all
from optiml.task import load_task

RECURRENT_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.{layer}(6, 5, num_layers=3, batch_first=True))
        self.head = nn.Linear(5, 2)

    def forward(self, x):
        out = self.encoder(x)[0]
        return self.head(out[:, -1, :])


def get_inputs():
    return [torch.rand(3, 400, 6)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
def test_a_recurrent_layer_is_refused_before_tracing(layer: str, tmp_path: Path) -> None:
    path = tmp_path / f"recurrent_{layer.lower()}.py"
    path.write_text(RECURRENT_TASK.format(layer=layer), encoding="utf-8")
    task = load_task(path)
    start = time.perf_counter()
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(task)
    message = str(info.value)
    assert "\n" not in message
    assert f"aten.{layer.lower()}" in message and f"encoder.0 = nn.{layer}" in message
    assert time.perf_counter() - start < 5.0  # not the 1200 unrolled steps


STATEFUL_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.zeros(3, 4)
        self.step = nn.Linear(8, 4)

    def forward(self, x, previous):
        self.state.copy_(previous)
        self.state = torch.tanh(self.step(torch.cat((x, self.state), dim=1)))
        return self.state


def get_inputs():
    return [torch.rand(3, 4), torch.rand(3, 4)]


def get_init_inputs():
    return []
"""


def test_forward_writing_into_a_plain_tensor_attribute_is_named(tmp_path: Path) -> None:
    path = tmp_path / "stateful_cell.py"
    path.write_text(STATEFUL_TASK, encoding="utf-8")
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(load_task(path))
    message = str(info.value)
    assert "\n" not in message and "INTERNAL ASSERT" not in message
    assert "writes in place into self.state" in message
