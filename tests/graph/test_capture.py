"""Graph capture: every suite task traces to one graph per shape set, or a one-line refusal."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from optiml.graph.capture import UnsupportedOpError, capture_all
from optiml.graph.ir import Graph
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]
UNSUPPORTED = {"sort_rows": ("        return torch.sort(x, dim=1).values", "aten.sort")}  # body, op named
SUPPORTED = sorted([*ROOT.glob("tasks/*.py"), *ROOT.glob("tasks/memory/*.py"), *ROOT.glob("tasks/compute/*.py")])

TINY_TASK = """
import torch
import torch.nn as nn

M = 4
N = 8
OPTIML = {{"dtype": "float32", "shape_sets": [{{"M": 200, "N": 8}}]}}


class Model(nn.Module):
    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
"""


@cache
def graphs_of(path: Path) -> list[Graph]:
    return capture_all(load_task(path))


def tiny_task(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(TINY_TASK.format(body=body), encoding="utf-8")
    return path


@pytest.mark.parametrize("path", SUPPORTED, ids=lambda p: p.stem)
def test_every_supported_task_captures_one_graph_per_shape_set(path: Path) -> None:
    task = load_task(path)
    graphs = graphs_of(path)
    assert len(graphs) == task.num_shape_sets
    assert all(g.nodes for g in graphs), "every suite task computes something"
    assert len({g.signature() for g in graphs}) == 1
    first = graphs[0]
    assert first.outputs and first.inputs
    assert len(first.input_names) == len(first.inputs)
    for node in first.nodes:  # nodes are topologically ordered and index their values
        assert all(first.value(o).producer == node.index for o in node.outputs)
        assert all(first.value(i).producer is None or first.value(i).producer < node.index for i in node.inputs)


@pytest.mark.parametrize("stem", sorted(UNSUPPORTED))
def test_an_op_without_a_template_is_refused_in_one_line(stem: str, tmp_path: Path) -> None:
    body, op = UNSUPPORTED[stem]
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(load_task(tiny_task(tmp_path, stem, body)))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{stem}.py: ")
    assert op in message
    assert "configure an LLM" in message


def test_size_dependent_control_flow_is_refused(tmp_path: Path) -> None:
    body = "        if x.shape[0] > 100:\n            return torch.exp(x)\n        return torch.relu(x)"
    task = load_task(tiny_task(tmp_path, "branchy", body))
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(task)
    message = str(info.value)
    assert "\n" not in message
    assert "shape set 1" in message
    assert "different op graph" in message


def test_in_place_ops_are_functionalised(tmp_path: Path) -> None:
    body = "        y = x.clone()\n        y.mul_(2.0)\n        y.add_(1.0)\n        return torch.relu_(y)"
    graphs = capture_all(load_task(tiny_task(tmp_path, "inplace", body)))
    ops = [node.op for node in graphs[0].nodes]
    assert ops == ["mul", "add", "relu"]
    assert not any(node.op.endswith("_") for g in graphs for node in g.nodes)
    g = graphs[0]
    # a chain: each op reads the previous op's result (the mutation is seen by later uses)
    for before, after in zip(g.nodes, g.nodes[1:], strict=False):
        assert before.outputs[0] in after.inputs
    assert g.outputs == g.nodes[-1].outputs


def test_a_size_derived_constant_differs_between_shape_sets() -> None:
    path = ROOT / "tasks" / "memory" / "kl_div_loss.py"
    task = load_task(path)
    graphs = graphs_of(path)
    divs = [[n for n in g.nodes if n.op == "div"] for g in graphs]
    assert all(len(d) == 1 for d in divs)
    divisors = []
    for g, (div,) in zip(graphs, divs, strict=True):
        consts = [g.value(i).const for i in div.inputs if g.value(i).is_const]
        assert len(consts) == 1
        divisors.append(consts[0])
    rows = [task.namespace_globals(s)["M"] for s in range(task.num_shape_sets)]
    assert divisors == rows  # batchmean divides by the batch size of each shape set
    assert len(set(divisors)) > 1
    assert len({g.signature() for g in graphs}) == 1  # constants' values are not structure


def test_numbers_scaling_a_products_operands_move_onto_the_product(tmp_path: Path) -> None:
    """``(x * 2) @ (x.t() / 4)`` reads x twice in place (the transpose as the product's layout) and scales the
    product by 0.5 once; an operand scaled by a tensor is left as written."""
    from optiml.templates.plan import cse

    scaled = capture_all(load_task(tiny_task(tmp_path, "scaled", "        return (x * 2.0) @ (x.t() / 4.0)")))[0]
    g = cse(scaled)
    assert [node.op for node in g.nodes] == ["matmul", "mul"]
    (matmul, mul) = g.nodes
    assert matmul.inputs == (g.inputs[0], g.inputs[0]) and matmul.attr("trans_b")
    assert g.values[mul.inputs[1]].const == 0.5
    by_tensor = cse(capture_all(load_task(tiny_task(tmp_path, "tensor", "        return (x * x) @ x.t()")))[0])
    assert [node.op for node in by_tensor.nodes] == ["mul", "matmul"]


def test_element_wise_ops_of_constants_and_units_leave_no_node(tmp_path: Path) -> None:
    """``x * (c / c)`` (what a dropout's mask becomes once replaced by its mean), ``x + 0`` and ``1 * x`` are ``x``;
    ``c * 2`` is a constant; an operand the constant widens is computed."""
    body = (
        "        keep = torch.full_like(x, 0.8)\n"
        "        y = torch.relu(x) * (keep / 0.8) + x.new_zeros(1)\n"
        "        return 1.0 * y - 0.0, x * (torch.ones_like(x) * 3.0), torch.relu(x[:, :1]) * x.new_ones(1, 8)"
    )
    for graph in capture_all(load_task(tiny_task(tmp_path, "units", body))):
        ops = [n.op for n in graph.nodes]
        assert ops.count("relu") == 2 and ops.count("mul") == 2, ops  # x * 3.0 and the widening product kept
        assert graph.producer(graph.outputs[0]).op == "relu"
        three = graph.producer(graph.outputs[1]).inputs[1]
        assert graph.value(three).const == 3.0 and graph.type(three).shape == graph.type(graph.inputs[0]).shape
