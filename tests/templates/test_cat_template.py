"""``torch.cat`` as a dedicated copy kernel, checked against torch on the CPU emulator.

Parts computed by an earlier kernel or read from the inputs, the same part twice, more parts than
one launch's table holds, odd lengths (the element path) and 16-byte vectors, integer and half
dtypes, and a concatenation feeding a convolution (DenseNet's pattern).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.errors import OptimlError
from optiml.templates.permute.cat import MAX_PARTS

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(7, 4, 3, padding=1)

    def forward(self, x, y):
        return {body}


def get_inputs():
    return [torch.randn({x}).to({dtype}), torch.randn({y}).to({dtype})]


def get_init_inputs():
    return []
"""

CASES = [  # body, x shape, y shape, dtype, expected plan fragment
    ("torch.cat([torch.relu(x), y, x * 2], dim=1)", "2, 3, 5, 4", "2, 5, 5, 4", "torch.float32", "cat[cat]"),
    ("torch.cat([x, x], dim=0)", "3, 7", "1", "torch.float32", "cat[cat]"),
    ("torch.cat([x, y], dim=-1)", "4, 6, 3", "4, 6, 5", "torch.float32", "cat[cat]"),  # odd lengths
    ("torch.cat([x, y], dim=1)", "2, 24, 100", "2, 8, 100", "torch.float32", "cat[cat]"),  # rows of many vectors
    (f"torch.cat([x] * {MAX_PARTS + 5}, dim=1)", "3, 8", "1", "torch.float32", "cat[cat]"),  # two launches
    ("torch.stack([x, y], dim=1)", "5, 16", "5, 16", "torch.float32", "cat"),
    ("torch.cat([x, y + 1], dim=1)", "2, 8, 3", "2, 16, 3", "torch.int64", "cat"),
    ("torch.cat([x, y], dim=1)", "2, 16, 9", "2, 8, 9", "torch.float16", "cat[cat]"),  # 8-half vectors
    ("self.conv(torch.cat([x, F.relu(y)], dim=1))", "2, 3, 6, 6", "2, 4, 6, 6", "torch.float32", "conv"),
]


@needs_gxx
def test_concatenations_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, (body, x, y, dtype, fragment) in enumerate(CASES):
        task = write_task(tmp_path, f"cat_{k}", TASK.format(body=body, x=x, y=y, dtype=dtype))
        kernels = planned(task)
        assert fragment in kernels.describe() and "cat" in kernels.describe(), (body, kernels.describe())
        units.append((kernels.task, body, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=11, tol=1e-3)
    assert not failures, "\n".join(failures)


def test_a_concatenation_of_mixed_dtypes_is_refused_in_one_line(tmp_path: Path) -> None:
    body = "torch.cat([x, y.half()], dim=1)"
    task = write_task(tmp_path, "cat_mixed", TASK.format(body=body, x="2, 3", y="2, 4", dtype="torch.float32"))
    with pytest.raises(OptimlError) as caught:
        planned(task).render(planned(task).default())
    message = str(caught.value)
    assert "\n" not in message and "cat" in message, message
