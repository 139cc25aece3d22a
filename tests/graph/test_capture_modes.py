"""Capture under the reference's mode: BatchNorm on batch statistics in training mode (KernelBench's),
on running statistics in eval mode, and random ops refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.graph.capture import UnsupportedOpError, capture_all
from optiml.graph.ir import Graph
from optiml.task import load_task

TASK = """
import torch
import torch.nn as nn
import torch.nn.functional as F

N, C, H, W = 4, 3, 5, 6
OPTIML = {{"shape_sets": [{{"N": 2, "C": 3, "H": 9, "W": 2}}]{extra}}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(C)

    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return []
"""


def captured(folder: Path, name: str, body: str, mode: str | None = None) -> list[Graph]:
    extra = f', "mode": "{mode}"' if mode else ""
    path = folder / f"{name}.py"
    path.write_text(TASK.format(body=body, extra=extra), encoding="utf-8")
    return capture_all(load_task(path))


def unused_inputs(graph: Graph) -> list[str]:
    used = {i for node in graph.nodes for i in node.inputs}
    return [name for name, vid in zip(graph.input_names, graph.inputs, strict=True) if vid not in used]


def test_training_mode_batch_norm_reduces_over_batch_and_space(tmp_path: Path) -> None:
    for graph in captured(tmp_path, "bn_train", "        return self.bn(x)"):
        means = [n for n in graph.nodes if n.op == "mean"]
        assert [dict(n.attrs) for n in means] == [{"dims": (0, 2, 3), "keepdim": True}] * 2  # mean, then biased var
        assert unused_inputs(graph) == ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]


def test_eval_mode_batch_norm_reads_the_running_statistics(tmp_path: Path) -> None:
    for graph in captured(tmp_path, "bn_eval", "        return self.bn(x)", mode="eval"):
        assert not any(n.op == "mean" for n in graph.nodes)
        assert unused_inputs(graph) == ["bn.num_batches_tracked"]


def test_a_functional_dropout_in_training_mode_is_refused_in_one_line(tmp_path: Path) -> None:
    body = "        return F.dropout(x, 0.3, training=self.training) * 2"
    with pytest.raises(UnsupportedOpError) as info:
        captured(tmp_path, "fdrop", body)
    message = str(info.value)
    assert "\n" not in message and message.startswith("fdrop.py: ")
    assert "draws random numbers (aten.bernoulli" in message and "'mode': 'eval'" in message
    (graph, _) = captured(tmp_path, "fdrop_eval", body, mode="eval")  # eval mode: the identity
    assert [n.op for n in graph.nodes] == ["mul"]


def test_a_random_op_is_refused_without_the_dropout_hint(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOpError) as info:
        captured(tmp_path, "noise", "        return x + torch.rand_like(x)")
    message = str(info.value)
    assert "draws random numbers (aten.rand_like" in message and "mode" not in message
