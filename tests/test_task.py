"""Task loading: KernelBench files as they are, metadata validated, one-line errors for every defect."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.errors import TaskError
from optiml.evaluate.runtime import TaskRuntime, check_task
from optiml.task import load_task

GOOD = """
import torch
import torch.nn as nn
M = 64
N = 32
class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(N))
    def forward(self, x, targets):
        return x * self.scale + self.bias, targets.sum()
def get_inputs():
    return [torch.rand(M, N), torch.randint(0, 10, (M,))]
def get_init_inputs():
    return [2.0]
OPTIML = {"description": "scale and shift", "atol": 1e-5, "shape_sets": [{"M": 7}], "flops": "2*M*N"}
"""


def write(tmp_path: Path, text: str, name: str = "task.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_loads_kernelbench_file_with_metadata(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, GOOD))
    assert task.name == "task"
    assert task.meta.atol == 1e-5 and task.meta.rtol == 1e-4
    assert task.num_shape_sets == 2
    assert task.flops(0) == 2 * 64 * 32
    assert task.flops(1) == 2 * 7 * 32


def test_floating_inputs_cast_integer_inputs_kept(tmp_path: Path) -> None:
    text = GOOD.replace('"atol": 1e-5,', '"atol": 1e-5, "dtype": "float64",')
    runtime = TaskRuntime(load_task(write(tmp_path, text)), "cpu")
    case = runtime.case(seed=3)
    x, targets = case.args
    assert x.dtype == torch.float64
    assert targets.dtype == torch.int64  # KernelBench casts this too; we must not
    assert case.params[0].dtype == torch.float64
    assert len(case.abi_inputs) == 3  # forward args, then the parameter
    assert case.expected[0].shape == (64, 32)


def test_same_seed_same_inputs_and_shape_sets_apply(tmp_path: Path) -> None:
    runtime = TaskRuntime(load_task(write(tmp_path, GOOD)), "cpu")
    a = runtime.make_args(5)
    b = runtime.make_args(5)
    c = runtime.make_args(6)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert runtime.make_args(5, shape_set=1)[0].shape == (7, 32)


def test_check_task_passes_a_good_task(tmp_path: Path) -> None:
    notes = check_task(load_task(write(tmp_path, GOOD)))
    assert any("output 0" in n for n in notes)


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("def broken(:\n", "syntax error on line 1"),
        ("def get_inputs(): return []\ndef get_init_inputs(): return []\n", "no `class Model"),
        (
            "import torch\nclass Model(torch.nn.Module): pass\ndef get_init_inputs(): return []\n",
            "get_inputs",
        ),
        (GOOD + "\nOPTIML = {'atol': -1}\n", "non-negative"),
        (GOOD + "\nOPTIML = {'dtype': 'int8'}\n", "dtype"),
        (GOOD + "\nOPTIML = {'shape_set': []}\n", "unknown keys"),
        (GOOD + "\nOPTIML = dict(atol=1)\n", "literal dict"),
        (GOOD + "\nOPTIML = {'flops': '2*'}\n", "not an expression"),
        (GOOD + "\nOPTIML = {'distributions': ['cauchy']}\n", "distributions"),
        (GOOD + "\nOPTIML = {'mode': 'training'}\n", "OPTIML['mode'] = 'training'; expected one of ('train', 'eval')"),
        (GOOD + "\nOPTIML = {'precision': 'fp16'}\n", "OPTIML['precision'] = 'fp16'; expected one of"),
        (GOOD + "\nOPTIML = {'precision': 'tf32', 'dtype': 'bfloat16'}\n", "'tf32' is for float32 tasks"),
    ],
)
def test_static_defects_get_one_line_errors_naming_the_file(tmp_path: Path, text: str, phrase: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(TaskError) as info:
        load_task(path)
    message = str(info.value)
    assert message.startswith(str(path)) and phrase in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no such task file"):
        load_task(tmp_path / "nope.py")


def test_a_folder_is_not_a_task_file(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="is a folder; give a task file"):
        load_task(tmp_path)


@pytest.mark.parametrize(
    ("edit", "phrase"),
    [
        (
            ("torch.rand(M, N)", "torch.tensor(__import__('random').random()).expand(M, N)"),
            "not reproducible",
        ),
        (("return x * self.scale + self.bias, targets.sum()", "return 3"), "not a tensor"),
        (("return [torch.rand(M, N)", "return [torch.ones(M, N)"), "ignores the seed"),
        (("return [2.0]", "return [1/0]"), "ZeroDivisionError"),
        (("return x * self.scale", "return x.undefined_method() * self.scale"), "Model.forward failed"),
    ],
)
def test_dynamic_defects_are_caught(tmp_path: Path, edit: tuple[str, str], phrase: str) -> None:
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(TaskError, match=phrase):
        check_task(load_task(path))


def test_every_starter_task_passes_its_checks() -> None:
    tasks = sorted((Path(__file__).resolve().parent.parent / "tasks").glob("*.py"))
    assert len(tasks) >= 8
    for path in tasks:
        task = load_task(path)
        assert task.naive_kernel_path is not None, f"{path.name} ships no naive kernel"
        assert task.meta.shape_sets, f"{path.name} declares no extra shape set"
        check_task(task)
