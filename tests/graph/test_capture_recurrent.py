"""Recurrent layers traced as one node (a plain ``nn.RNN`` refused), and tensors a model holds and writes."""

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


@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_an_lstm_or_gru_traces_to_one_node_not_its_unrolled_steps(layer: str, tmp_path: Path) -> None:
    path = tmp_path / f"recurrent_{layer.lower()}.py"
    path.write_text(RECURRENT_TASK.format(layer=layer), encoding="utf-8")
    start = time.perf_counter()
    graph = capture_all(load_task(path))[0]
    assert time.perf_counter() - start < 5.0  # not the 1200 unrolled steps
    (node,) = [n for n in graph.nodes if n.op == layer.lower()]
    assert dict(node.attrs) == {
        "cell": layer.lower(),
        "layers": 3,
        "bidirectional": False,
        "batch_first": True,
        "bias": True,
    }
    states = 2 if layer == "LSTM" else 1
    assert len(node.inputs) == 1 + states + 3 * 4  # x, the initial states, 4 weights a layer
    assert len(node.outputs) == 1 + states


def test_a_plain_rnn_is_refused_before_tracing_naming_the_layer(tmp_path: Path) -> None:
    path = tmp_path / "recurrent_rnn.py"
    path.write_text(RECURRENT_TASK.format(layer="RNN"), encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(load_task(path))
    message = str(info.value)
    assert "\n" not in message
    assert "aten.rnn" in message and "encoder.0 = nn.RNN" in message
    assert time.perf_counter() - start < 5.0


HELD_STATE_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = torch.zeros(3, 4)
        self.step = nn.Linear(8, 4)

    def forward(self, x, previous):
        {write}
        self.state = torch.tanh(self.step(torch.cat((x, self.state), dim=1)))
        return self.state


def get_inputs():
    return [torch.rand(3, 4), torch.rand(3, 4)]


def get_init_inputs():
    return []
"""


def held_state_task(tmp_path: Path, write: str) -> Path:
    path = tmp_path / "stateful_cell.py"
    path.write_text(HELD_STATE_TASK.format(write=write), encoding="utf-8")
    return path


@pytest.mark.parametrize("write", ["self.state.copy_(previous)", "self.state.copy_(previous[:1])"])
def test_a_held_tensor_overwritten_whole_before_it_is_read_is_the_input_it_copies(tmp_path: Path, write: str) -> None:
    """KernelBench's VanillaRNN: ``self.hidden.copy_(h0)`` then a read: each call's answer follows from its
    inputs, so the held tensor is no state (a broadcast copy included)."""
    graph = capture_all(load_task(held_state_task(tmp_path, write)))[0]
    assert len(graph.inputs) == 2 + 2  # x, previous, then the Linear's weight and bias: no held tensor
    assert "copy" not in {node.op for node in graph.nodes}


@pytest.mark.parametrize("write", ["self.state.add_(previous)", "self.state.mul_(previous)"])
def test_a_held_tensor_a_call_reads_before_overwriting_is_refused_in_one_line(tmp_path: Path, write: str) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(load_task(held_state_task(tmp_path, write)))
    message = str(info.value)
    assert "\n" not in message and "INTERNAL ASSERT" not in message
    assert "writes in place and reads self.state" in message and "what earlier calls left there" in message
