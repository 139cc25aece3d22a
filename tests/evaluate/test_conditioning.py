"""The conditioning probe of ``check-task``: the task's reference against a float64 run, in KernelBench's
tolerances, on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.bench import user_clock_child
from optiml.evaluate import conditioning
from optiml.evaluate.runtime import check_task
from optiml.task import load_task

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""


def notes_of(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "task.py"
    path.write_text(TASK.format(body=body), encoding="utf-8")
    return check_task(load_task(path))


def probe(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith("output") and "KernelBench's tolerance" in n]


def widened(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith("output") and "ill-conditioned, another correct rounding" in n]


def test_a_well_conditioned_reference_is_within_a_small_fraction_of_the_tolerance(tmp_path: Path) -> None:
    (note,) = probe(notes_of(tmp_path, "return torch.relu(x) * 0.5"))
    assert note.startswith("output 0: the float32 reference is 0 from float64 at most, 0× KernelBench's tolerance")
    assert "ill-conditioned" not in note


def test_cancellation_makes_the_reference_ill_conditioned(tmp_path: Path) -> None:
    """(x + 1e4) - 1e4 in fp32 keeps x to a spacing of 2**-10 (~1e-3): ten of KernelBench's 1e-4 tolerances."""
    notes = notes_of(tmp_path, "return (x + 1e4) - 1e4")
    (note,) = probe(notes)
    assert "ill-conditioned — a kernel as accurate as the reference can still fail KernelBench's check" in note
    distance = float(note.split(" is ")[1].split(" from")[0])
    assert 1e-4 < distance <= 2**-11 + 1e-9  # half the fp32 spacing at 1e4, at most
    # OptiML's own check accepts a kernel as accurate as the reference: atol = 1e-4 + twice that distance (here the
    # output is its input to within that, so the trivial-output check then tightens it again, also said)
    tolerance = widened(notes)[0]
    assert tolerance.startswith("output 0 (shape set 0, native inputs): the reference is ")
    raised = float(tolerance.split(" -> ")[1].split(" ")[0])
    assert raised == pytest.approx(1e-4 + 2 * distance, rel=1e-2)


def test_a_well_conditioned_reference_keeps_the_tasks_tolerance(tmp_path: Path) -> None:
    assert widened(notes_of(tmp_path, "return torch.relu(x) * 0.5")) == []


def test_a_reference_that_refuses_float64_is_said_in_one_line(tmp_path: Path) -> None:
    body = "if x.dtype != torch.float32:\n            raise TypeError('float32 only')\n        return x * 2"
    (note,) = [n for n in notes_of(tmp_path, body) if n.startswith("conditioning")]
    assert note.startswith("conditioning: not measured (the reference does not run in float64: ")
    assert "float32 only" in note and "\n" not in note


def test_large_cases_skip_the_float64_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conditioning, "MAX_PROBE_BYTES", 1000)
    notes = notes_of(tmp_path, "return x + 1")
    assert any(n.startswith("conditioning: not measured (inputs and outputs take") for n in notes), notes
    assert not probe(notes)


def test_the_tolerances_are_kernelbenchs_as_the_user_clock_applies_them() -> None:
    assert conditioning.KERNELBENCH_TOLERANCES == user_clock_child.TOLERANCES


def test_integer_outputs_are_not_probed(tmp_path: Path) -> None:
    assert not [n for n in notes_of(tmp_path, "return torch.argmax(x, dim=1)") if "conditioning" in n or "float64" in n]
