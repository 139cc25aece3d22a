"""Class 4 of issue 39 on the CPU: a scalar loss estimated from a sample, or not computed at all.

The real judge and candidate process run host libraries built by gcc (the protocol of
``tests/evaluate/test_judge.py``). On the task's own inputs both fakes pass its loss tolerance —
shown by the control, a runtime that was never settled — and the perturbed inputs that settling
adds for the low-information output reject them, while the honest loss is accepted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from tests.evaluate.host_kernels import build_host_libraries

from optiml.evaluate import sensitivity
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.harness import (
    PERTURBED_TRIALS,
    CaseSeeds,
    Peaks,
    evaluate_candidate,
    fresh_trial,
    verification_plan,
)
from optiml.evaluate.judge import Judge
from optiml.evaluate.runtime import TaskRuntime, check_task
from optiml.task import load_task
from optiml.values import EvalStatus

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

TASK = """
import torch
import torch.nn as nn

N = 1 << 22


class Model(nn.Module):
    def forward(self, a, b):
        return torch.mean((a - b) ** 2)


def get_inputs():
    return [torch.rand(N), torch.rand(N)]


def get_init_inputs():
    return []


OPTIML = {"dtype": "float32", "atol": 2e-3, "rtol": 2e-3, "distributions": ["native"]}
"""

PRELUDE = r"""
#include <stdint.h>
#include <stddef.h>
typedef struct {
  void* data; int64_t shape[8]; int64_t stride[8]; int32_t ndim, dtype, memory, reserved;
} optiml_tensor;
static double mean_loss(const optiml_tensor* in, int64_t stride) {
  const float* a = (const float*)in[0].data; const float* b = (const float*)in[1].data;
  int64_t n = in[0].shape[0]; double s = 0.0; int64_t count = 0;
  for (int64_t i = 0; i < n; i += stride) { float d = a[i] - b[i]; s += (double)(d * d); ++count; }
  return s / (double)count;
}
"""

KERNELS = {
    "honest": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb,"
    " void* s) { *(float*)out[0].data = (float)mean_loss(in, 1); return 0; }",
    # reads every 16th pair: a sixteenth of the work, within the loss's tolerance on uniform inputs
    "sampled": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb,"
    " void* s) { *(float*)out[0].data = (float)mean_loss(in, 16); return 0; }",
    # reads nothing: the expected loss of two uniform inputs, 1/6
    "input_blind": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws,"
    " size_t wb, void* s) { *(float*)out[0].data = 1.0f / 6.0f; return 0; }",
}

CONFIG = EvalConfig(min_trials=3, max_trials=3, timing_seconds=0.0, warmup_calls=0, stream_slack_ms=50.0, timeout_s=60)


@pytest.fixture(scope="module")
def task_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("task") / "mean_loss_small.py"
    path.write_text(TASK)
    return path


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_libraries(tmp_path_factory.mktemp("libs"), PRELUDE, KERNELS, "-O2")


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    judge = Judge(torch.device("cpu"), tmp_path_factory.mktemp("judge"))
    yield judge
    judge.close()


def _verdict(judge: Judge, task_path: Path, library: str, settled: bool) -> tuple[EvalStatus, str]:
    runtime = TaskRuntime(load_task(task_path), "cpu")
    if settled:
        runtime.settle(CONFIG.base_seed)  # what the worker's `prepare` does
    result = evaluate_candidate(judge, runtime, library, CONFIG, Peaks(), None, CaseSeeds()).result
    return result.status, result.message


@pytest.mark.parametrize("name", ["sampled", "input_blind"])
def test_an_estimated_loss_passes_the_tasks_own_inputs_and_fails_the_added_ones(
    name: str, judge: Judge, task_path: Path, libraries: dict[str, str]
) -> None:
    status, message = _verdict(judge, task_path, libraries[name], settled=False)
    assert status is EvalStatus.OK, message  # the control: native inputs cannot tell it from the answer
    status, message = _verdict(judge, task_path, libraries[name], settled=True)
    assert status is EvalStatus.WRONG_ANSWER, message
    assert any(kind in message for kind in sensitivity.PERTURBATIONS), message


def test_the_honest_loss_passes_the_added_inputs_too(judge: Judge, task_path: Path, libraries: dict[str, str]) -> None:
    status, message = _verdict(judge, task_path, libraries["honest"], settled=True)
    assert status is EvalStatus.OK, message


def test_each_perturbation_gets_several_trials_each_perturbed_afresh(task_path: Path) -> None:
    runtime = TaskRuntime(load_task(task_path), "cpu")
    runtime.settle(CONFIG.base_seed)
    plan = verification_plan(runtime, CONFIG, CaseSeeds())
    perturbed = [p for p in plan if p.distribution in sensitivity.PERTURBATIONS]
    assert len(perturbed) == PERTURBED_TRIALS * len(runtime.distributions()[1:]) and perturbed
    one, two = fresh_trial(runtime, perturbed[0]), fresh_trial(runtime, perturbed[0])
    native = runtime.case(perturbed[0].seeds[0])
    moved = [a[0].ne(native.args[0]) for a in (one.args, two.args)]
    assert bool(moved[0].any()) and bool(moved[1].any()) and not torch.equal(moved[0], moved[1])
    for case in (one, two):  # the reference is the perturbed inputs', not the native case's
        torch.testing.assert_close(case.expected[0], torch.mean((case.args[0] - case.args[1]) ** 2))


def test_check_task_says_what_it_found_and_what_it_added(task_path: Path) -> None:
    notes = check_task(load_task(task_path))
    found = [n for n in notes if "low-information" in n]
    assert len(found) == 1, notes
    assert "a scalar from 8,388,608 input values" in found[0]
    assert "an answer that ignores the input passes" in found[0]
    assert "verification adds outliers" in found[0]


def test_a_full_size_output_is_not_measured() -> None:
    x = torch.rand(64, 64)
    assert sensitivity.low_information([x], [x.clone()]) == []
    assert sensitivity.low_information([x], [x.sum()]) == [0]
    assert sensitivity.low_information([torch.rand(4096, 256)], [torch.rand(4096)]) == [0]  # row sums


@pytest.mark.parametrize("kind", sensitivity.PERTURBATIONS)
def test_a_perturbation_changes_a_small_region_only(kind: str) -> None:
    x = torch.rand(512, 1024)
    moved = sensitivity.perturb([x, 3], kind, seed=5)
    assert moved[1] == 3 and torch.equal(sensitivity.perturb([x], kind, seed=5)[0], moved[0])  # seeded
    changed = (moved[0] != x).sum().item()
    assert 0 < changed <= x.numel() // 128
    assert not torch.equal(sensitivity.perturb([x], kind, seed=6)[0], moved[0])


def test_large_inputs_are_not_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """A redraw generates the inputs again (on the CPU for KernelBench tasks): above the limit only the
    perturbations, copies on the device, are measured."""
    x = torch.rand(1 << 16)
    expected = [x.mean()]

    def reference(args: list[torch.Tensor]) -> list[torch.Tensor]:
        return [args[0].mean()]

    def redraw() -> list[torch.Tensor]:
        raise AssertionError("redrawn above the limit")

    monkeypatch.setattr(sensitivity, "REDRAW_MAX_BYTES", 1024)
    (finding,) = sensitivity.measure([x], expected, [1e-4], 1e-4, reference, redraw, seed=3)
    assert finding.redraw is None and finding.moved["outliers"] > sensitivity.MARGIN
    assert "not measured across input draws" in finding.note("shape set 0", ["outliers"])
