"""Random numbers drawn in ``Model.forward``: a creation draw, or a dropout's mask, whose output does not move is
planned with its distribution's mean and verified against the model as written (on the CPU emulator here); one
that moves the output, any other random op and a task too large to check are refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml import task_runtime
from optiml.graph.capture import UnsupportedOpError, capture_all

SETS = [{"N": 6, "M": 40}, {"N": 3, "M": 17}]


def _task(tmp_path: Path, name: str, body: str):  # type: ignore[no-untyped-def]
    return write_task(tmp_path, name, task_text(SETS, f"x\nreturn {body}", "[torch.randn(N, M)]"))


@needs_gxx
def test_a_draw_the_output_does_not_depend_on_is_planned_with_its_mean_and_verified(tmp_path: Path) -> None:
    task = _task(
        tmp_path,
        "faint_noise",
        "torch.relu(x) * 2 + 1e-9 * torch.randn_like(x) + 0 * torch.rand(x.shape[0], 1, device=x.device)",
    )
    for graph in capture_all(task):
        assert not any("rand" in node.op for node in graph.nodes), [n.op for n in graph.nodes]
    kernels = planned(task)
    source = kernels.render(kernels.default())
    failures = emulator_mismatches(tmp_path, [(task, "faint noise", source.code)], seed=3, tol=1e-5)
    assert not failures, failures  # the reference draws afresh on every case; the kernel computes with the means


def test_a_draw_the_output_depends_on_is_refused_in_one_line(tmp_path: Path) -> None:
    task = _task(tmp_path, "noisy", "x + torch.randn_like(x)")
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(task)
    message = str(info.value)
    assert "\n" not in message and message.startswith("noisy.py: ")
    assert "draws random numbers (aten.randn_like" in message and "depends on them" in message


def test_other_random_ops_and_tasks_too_large_to_check_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picked = _task(tmp_path, "picked", "x * torch.randint(0, 2, x.shape, device=x.device)")
    with pytest.raises(UnsupportedOpError, match=r"draws random numbers \(aten\.randint.*differs on every call"):
        capture_all(picked)
    monkeypatch.setattr(task_runtime, "CHECK_BYTES", 100)
    faint = _task(tmp_path, "faint_but_large", "x + 1e-9 * torch.randn_like(x)")
    with pytest.raises(UnsupportedOpError, match=r"checked by running it twice on the CPU.*over the"):
        capture_all(faint)


def test_the_cpu_check_runs_once_per_task_file_and_shape_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = _task(tmp_path, "faint_once", "x + 1e-9 * torch.randn_like(x)")
    calls: list[int] = []
    original = task_runtime._moved_share

    def counted(task_: object, shape_set: int) -> float:
        calls.append(shape_set)
        return original(task_, shape_set)  # type: ignore[arg-type]

    monkeypatch.setattr(task_runtime, "_moved_share", counted)
    capture_all(task)
    capture_all(task)
    assert sorted(calls) == list(range(task.num_shape_sets))  # each shape set checked once


def test_the_cpu_check_leaves_the_caller_s_generator_as_it_was(tmp_path: Path) -> None:
    import torch

    task = _task(tmp_path, "faint_rng", "x + 1e-9 * torch.randn_like(x)")
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert task_runtime.moved_by_draws(task, 0) < task_runtime.SHARE_OF_TOLERANCE
    assert torch.equal(torch.rand(3), expected)


@needs_gxx
@pytest.mark.parametrize(
    "body",
    [
        "torch.softmax(torch.nn.functional.dropout(x, 0.2, training=True).mean(dim=1, keepdim=True), dim=1)",
        "torch.nn.functional.dropout(torch.clamp(torch.min(x, x * 0), 0, 0), 0.3, training=True) + x",
    ],
)
def test_a_dropout_whose_mask_does_not_reach_the_outputs_is_planned_as_the_identity(tmp_path: Path, body: str) -> None:
    task = _task(tmp_path, "unreached_dropout", body)
    for graph in capture_all(task):
        assert not any(node.op in ("bernoulli", "rand") for node in graph.nodes), [n.op for n in graph.nodes]
    kernels = planned(task)
    source = kernels.render(kernels.default())
    failures = emulator_mismatches(tmp_path, [(task, "dropout", source.code)], seed=4, tol=1e-5)
    assert not failures, failures


def test_a_dropout_that_reaches_the_outputs_is_refused_in_one_line(tmp_path: Path) -> None:
    task = _task(tmp_path, "dropout", "torch.relu(torch.nn.functional.dropout(x, 0.2, training=True))")
    with pytest.raises(UnsupportedOpError) as info:
        capture_all(task)
    message = str(info.value)
    assert "\n" not in message and "aten.bernoulli" in message and "depends on them" in message
