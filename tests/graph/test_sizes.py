"""SizeResolver: run-time sizes as C expressions over the ABI tensors, valid at every shape set."""

from __future__ import annotations

import pytest

from optiml.graph.ir import Graph, TensorType, Value
from optiml.graph.sizes import SizeResolver
from optiml.templates.base import TemplateError


def graphs(*shape_sets: list[tuple[int, ...]], n_inputs: int | None = None) -> list[Graph]:
    """One graph per shape set: its tensors' shapes, the first ``n_inputs`` are inputs, the rest outputs."""
    out = []
    for shapes in shape_sets:
        k = len(shapes) - 1 if n_inputs is None else n_inputs
        values = tuple(Value(i, TensorType(tuple(s), "float32")) for i, s in enumerate(shapes))
        out.append(Graph(values, tuple(range(k)), (), tuple(range(k, len(shapes)))))
    return out


def test_an_abi_dim_that_matches_at_every_shape_set() -> None:
    sizes = SizeResolver(graphs([(4, 6), (4,)], [(5, 7), (5,)]))
    assert sizes.size((6, 7)) == "inputs[0].shape[1]"
    assert sizes.size((4, 5)) == "inputs[0].shape[0]"
    assert sizes.dim(0, 1) == "inputs[0].shape[1]"  # an ABI tensor's own dim, directly
    assert sizes.dim(1, 0) == "outputs[0].shape[0]"


def test_a_size_equal_at_one_set_only_does_not_match() -> None:
    sizes = SizeResolver(graphs([(6, 6), (6,)], [(5, 7), (5,)]))
    assert sizes.size((6, 7)) == "inputs[0].shape[1]"  # not shape[0], which is 6 then 5


def test_a_flattened_run_of_dims() -> None:
    sizes = SizeResolver(graphs([(2, 3, 4), (2,)], [(5, 6, 7), (5,)]))
    assert sizes.size((12, 42)) == "(inputs[0].shape[1] * inputs[0].shape[2])"
    assert sizes.size((6, 30)) == "(inputs[0].shape[0] * inputs[0].shape[1])"
    assert sizes.size((24, 210)) == "(inputs[0].shape[0] * inputs[0].shape[1] * inputs[0].shape[2])"


def test_a_run_over_a_constant_groupnorm() -> None:
    groups = 4
    x = [(2, 8, 3, 5), (3, 16, 2, 7)]
    sizes = SizeResolver(graphs([x[0], x[0]], [x[1], x[1]]))
    per_group = tuple(c * h * w // groups for _, c, h, w in x)  # C*H*W/G: 30, 56
    expected = "((inputs[0].shape[1] * inputs[0].shape[2] * inputs[0].shape[3]) / 4)"
    assert sizes.size(per_group) == expected


def test_the_same_dim_index_of_the_same_rank_is_preferred() -> None:
    # one shape set, every dim 8: any would do; the hint picks the producer's layout
    sizes = SizeResolver(graphs([(8,), (8, 8), (8, 8)]))
    assert sizes.size((8,), hint_dim=0, hint_ndim=2) == "inputs[1].shape[0]"
    assert sizes.size((8,), hint_dim=1, hint_ndim=2) == "inputs[1].shape[1]"
    assert sizes.size((8,), hint_dim=0, hint_ndim=1) == "inputs[0].shape[0]"
    assert sizes.size((8,)) == "inputs[0].shape[0]"  # no hint: the first match


def test_constants_and_ones() -> None:
    sizes = SizeResolver(graphs([(4, 6), (4,)], [(5, 7), (5,)]))
    assert sizes.size((1, 1)) == "((int64_t)1)"
    assert sizes.size((3, 3)) == "((int64_t)3)"  # the same in every set, no dim matches: a constant


def test_a_size_nothing_matches_raises() -> None:
    sizes = SizeResolver(graphs([(4, 6), (4,)], [(5, 7), (5,)]))
    with pytest.raises(TemplateError, match="matches no input or output dim"):
        sizes.size((11, 13))
