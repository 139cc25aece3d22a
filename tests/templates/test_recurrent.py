"""``nn.LSTM`` / ``nn.GRU`` as one planned kernel each (the recurrent family), against torch on the CPU emulator.

KernelBench level 3 has eight of them (35–42): multi-layer, bidirectional, batch-first or not, returning
the last step's output, ``h_n`` or ``c_n``. These are the same shapes of problem at small sizes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TEMPLATE = """import torch
import torch.nn as nn

STEPS, BATCH, FEATURES, HIDDEN, LAYERS = 6, 3, 5, 7, {layers}
BATCH_FIRST, BIDIRECTIONAL = {batch_first}, {bidirectional}
DIRECTIONS = 2 if BIDIRECTIONAL else 1
OPTIML = {{"shape_sets": [{{"BATCH": 2, "FEATURES": 9, "HIDDEN": 4}}]}}  # the steps stay: out[:, -1] is a start


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cell}(
            FEATURES, HIDDEN, LAYERS, bias={bias}, batch_first=BATCH_FIRST, bidirectional=BIDIRECTIONAL
        )
        self.fc = nn.Linear(DIRECTIONS * HIDDEN, 4)

    def forward(self, x, *states):
        {body}


def get_inputs():
    x = torch.rand(BATCH, STEPS, FEATURES) if BATCH_FIRST else torch.rand(STEPS, BATCH, FEATURES)
    state = (LAYERS * DIRECTIONS, BATCH, HIDDEN)
    return [x, {states}]


def get_init_inputs():
    return []
"""

LSTM_LAST_STEP = "out, _ = self.rnn(x, (states[0], states[1]))\n        return self.fc(out[:, -1, :])"
LSTM_CELL = "_, (h_n, c_n) = self.rnn(x, (states[0], states[1]))\n        return c_n, h_n"
LSTM_NO_STATE = "out, _ = self.rnn(x)\n        return out"
GRU_HIDDEN = "_, h_n = self.rnn(x, states[0])\n        return h_n"
GRU_OUTPUT = "out, _ = self.rnn(x, states[0])\n        return out"
BOTH = "torch.rand(state), torch.rand(state)"
ONE = "torch.rand(state)"


def layer(cell: str, layers: int, batch_first: bool, bidirectional: bool, bias: bool, body: str, states: str) -> dict:
    return dict(
        cell=cell,
        layers=layers,
        batch_first=batch_first,
        bidirectional=bidirectional,
        bias=bias,
        body=body,
        states=states,
    )


TASKS = {
    "lstm_last_step": layer("LSTM", 2, True, False, True, LSTM_LAST_STEP, BOTH),
    "lstm_bidirectional_cell": layer("LSTM", 2, True, True, True, LSTM_CELL, BOTH),
    "lstm_zero_state": layer("LSTM", 1, False, False, False, LSTM_NO_STATE, BOTH),
    "gru_hidden": layer("GRU", 3, False, False, True, GRU_HIDDEN, ONE),
    "gru_bidirectional": layer("GRU", 2, False, True, False, GRU_OUTPUT, ONE),
}


def task_text(name: str) -> str:
    return TEMPLATE.format(**TASKS[name])


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_recurrent_layer_is_one_planned_kernel(tmp_path: Path, name: str) -> None:
    plan = planned(write_task(tmp_path, name, task_text(name))).describe()
    cell = TASKS[name]["cell"].lower()
    assert plan.startswith(f"recurrent[{cell}]") and plan.count("recurrent[") == 1, plan


@needs_gxx
def test_recurrent_layers_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for name in sorted(TASKS):
        kernels = planned(write_task(tmp_path, name, task_text(name)))
        units += [(kernels.task, f"{name} {c[0].label()}", kernels.render(c).code) for c in kernels.seeds()]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=11, tol=1e-4)
    assert not failures, "\n".join(failures)


@pytest.mark.nvcc
def test_recurrent_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    from optiml.kernel.compiler import Compiler, CompilerConfig

    sources = []
    for name in sorted(TASKS):
        kernels = planned(write_task(tmp_path, name, task_text(name)))
        sources.append(kernels.render(kernels.default()))
    results = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache")).compile_many(sources)
    failed = [f"{name}: {r.error_summary(3)}" for name, r in zip(sorted(TASKS), results, strict=True) if not r.ok]
    assert not failed, "\n".join(failed)


@pytest.mark.gpu
def test_every_seed_verifies_through_the_harness_on_the_gpu(tmp_path: Path) -> None:
    """On a GPU: each task's seeds pass the harness's trials against ``nn.LSTM``/``nn.GRU`` as cuDNN runs them."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tu import gpu_trial_failures

    from optiml.evaluate.runtime import TaskRuntime
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.templates.kernels import template_kernels

    compiler = Compiler(CompilerConfig(cache_dir=tmp_path / "cache"))
    failures = []
    for name in sorted(TASKS):
        kernels = template_kernels(write_task(tmp_path, name, task_text(name)))
        configs = kernels.seeds()
        built = compiler.compile_many([kernels.render(c) for c in configs])
        runtime = TaskRuntime(kernels.task, "cuda")
        for config, compiled in zip(configs, built, strict=True):
            failures += gpu_trial_failures(runtime, compiled, f"{name} {config[0].label()}")
    assert not failures, "\n".join(failures)
