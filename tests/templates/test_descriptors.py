"""A kernel receives by value only the ABI descriptors its device code names.

A network with hundreds of parameters once gave its pooling kernel every descriptor of the task
(ResNet-101: 627 inputs, a 95 560-byte parameter struct that nvcc refuses past 32 764 bytes).
"""

from __future__ import annotations

import re
from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.templates.descriptors import compact_descriptors

MANY_PARAMETERS = """import torch
import torch.nn as nn
import torch.nn.functional as F

N, C, H, W = 2, 3, 8, 10


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.unused = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(240)])
        self.a = nn.Parameter(torch.rand(C, 1, 1) + 0.5)

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return []
"""

CASES = {
    "pool": "F.max_pool2d(x * self.a, 2)",
    "permute": "(x * self.a).permute(0, 2, 3, 1).contiguous()",
    "scan": "torch.cumsum(x * self.a, dim=3)",
}


def test_references_are_renumbered_to_dense_slots_and_the_host_copies_those() -> None:
    code = "a = inputs[7].shape[1] + inputs[3].data + outputs[2].ndim + inputs[7].ndim; n_inputs[0];"
    rewritten, used = compact_descriptors(code)
    assert used.inputs == (3, 7) and used.outputs == (2,)
    assert rewritten == "a = inputs[1].shape[1] + inputs[0].data + outputs[0].ndim + inputs[1].ndim; n_inputs[0];"
    assert used.fill("g1_args") == ["g1_args.in[0] = inputs[3];", "g1_args.in[1] = inputs[7];",
                                    "g1_args.out[0] = outputs[2];"]  # fmt: skip
    empty = compact_descriptors("no references")[1]
    assert (empty.input_slots, empty.output_slots, empty.fill("x")) == (1, 1, [])


@needs_gxx
def test_kernels_of_a_task_with_hundreds_of_parameters_stay_small_and_right(tmp_path: Path) -> None:
    units = []
    for name, body in CASES.items():
        kernels = planned(write_task(tmp_path, f"many_{name}", MANY_PARAMETERS.format(body=body)))
        assert f"{name}[" in kernels.describe(), kernels.describe()
        code = kernels.render(kernels.default()).code
        slots = [int(n) for n in re.findall(r"optiml_tensor (?:in|out)\[(\d+)\];", code)]
        assert max(slots, default=0) < 8, f"{name}: by-value descriptor arrays of {slots} (the task has 241 inputs)"
        units.append((kernels.task, name, code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-5)
    assert not failures, "\n".join(failures)
