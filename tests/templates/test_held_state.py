"""A model holding a tensor it overwrites from an input each call (KernelBench's level3/33_VanillaRNN),
planned and run on the CPU emulator against the reference as KernelBench calls it."""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

VANILLA_RNN = """import torch
import torch.nn as nn

batch_size = 5
input_size = 12
hidden_size = 20
output_size = 7


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.tanh = nn.Tanh()

    def forward(self, x, initial_hidden=None):
        if initial_hidden is not None:
            self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        combined = torch.cat((x, self.hidden), dim=1)
        self.hidden = self.tanh(self.i2h(combined))
        return self.h2o(self.hidden)


def get_inputs():
    return [torch.rand(batch_size, input_size), torch.rand(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
"""


def test_the_held_hidden_state_plans_as_the_input_it_copies(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "vanilla_rnn", VANILLA_RNN))
    assert kernels.describe() == "cat[cat] → gemm[matmul add tanh] → gemm[matmul add]"


@needs_gxx
def test_the_vanilla_rnn_matches_torch_on_the_emulator(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "vanilla_rnn", VANILLA_RNN))
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(2)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=7, tol=1e-4)
    assert not failures, "\n".join(failures)
