"""check-task and init-kernel on the tasks a new user brings (issue 16, item 7)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from optiml.cli import app
from optiml.errors import TaskError
from optiml.task import load_task

runner = CliRunner()

HEAD = "import torch\nimport torch.nn as nn\n"
TAIL = "\ndef get_init_inputs():\n    return []\n"


def write(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body + TAIL)
    return path


def test_a_shape_set_key_that_is_not_a_global_is_rejected(tmp_path: Path) -> None:
    task = write(
        tmp_path,
        "typo.py",
        'M = 64\nOPTIML = {"shape_sets": [{"M": 7}, {"Q": 5}]}\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
        "def get_inputs():\n    return [torch.rand(M)]\n",
    )
    with pytest.raises(TaskError) as raised:
        load_task(task)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{task}: OPTIML['shape_sets'][1] sets 'Q'")
    assert "not a module-level global" in message and "M" in message
    result = runner.invoke(app, ["check-task", str(task)])
    assert result.exit_code == 2 and "'Q'" in result.output


def test_globals_assigned_together_can_be_shape_set_keys(tmp_path: Path) -> None:
    task = write(
        tmp_path,
        "pair.py",
        'M, N = 8, 16\nOPTIML = {"shape_sets": [{"M": 3, "N": 5}]}\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return x + 1\n"
        "def get_inputs():\n    return [torch.rand(M, N)]\n",
    )
    assert load_task(task).num_shape_sets == 2


def test_a_hanging_forward_times_out(tmp_path: Path) -> None:
    task = write(
        tmp_path,
        "hangs.py",
        "class Model(nn.Module):\n    def forward(self, x):\n        while True:\n            pass\n"
        "def get_inputs():\n    return [torch.rand(4)]\n",
    )
    start = time.monotonic()
    result = runner.invoke(app, ["check-task", str(task), "--timeout", "6"])
    assert result.exit_code == 2 and "took longer than 6 s" in result.output, result.output
    assert time.monotonic() - start < 60


def test_kernelbench_cuda_calls_run_on_the_cpu(tmp_path: Path) -> None:
    task = write(
        tmp_path,
        "on_cuda.py",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scale = nn.Parameter(torch.ones(8).cuda())\n"
        "    def forward(self, x):\n        return x * self.scale + torch.ones(8, device='cuda')\n"
        "def get_inputs():\n    return [torch.rand(4, 8).cuda()]\n",
    )
    result = runner.invoke(app, ["check-task", str(task)])
    assert result.exit_code == 0, result.output
    assert "output 0: shape (4, 8) float32" in result.output


def test_a_task_too_big_for_max_bytes_is_checked_on_the_meta_device(tmp_path: Path) -> None:
    task = write(
        tmp_path,
        "big.py",
        "N = 2_000_000\nclass Model(nn.Module):\n    def forward(self, x):\n        return x.cumsum(0)\n"
        "def get_inputs():\n    return [torch.rand(N)]\n",
    )
    result = runner.invoke(app, ["check-task", str(task), "--max-bytes", "1M"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "checked on the meta device only" in text and "16.00 MB, over the 1.00 MB limit" in text
    assert "output 0: shape (2000000,) float32" in text
    full = runner.invoke(app, ["check-task", str(task)])  # the default limit (2G) runs it in full
    assert full.exit_code == 0 and "meta device" not in full.output


def test_bad_max_bytes_is_one_line(tmp_path: Path) -> None:
    task = str(Path(__file__).resolve().parent.parent / "tasks" / "silu.py")
    result = runner.invoke(app, ["check-task", task, "--max-bytes", "lots"])
    assert result.exit_code == 2 and "expected a size like 2G" in result.output


def test_errors_show_the_task_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(
        tmp_path,
        "broken.py",
        "class Model(nn.Module):\n    def forward(self, x):\n        raise ValueError('nope')\n"
        "def get_inputs():\n    return [torch.rand(4)]\n",
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check-task", "broken.py"])
    assert result.exit_code == 2
    assert result.output.startswith("error: broken.py: Model.forward failed: ValueError: nope"), result.output


def _record_describes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    import optiml.kernel.skeleton as skeleton

    calls: list[tuple[str, int]] = []
    original = skeleton._describe_on

    def recording(task: Any, device: str, shape_set: int) -> Any:
        calls.append((device, shape_set))
        return original(task, device, shape_set)

    monkeypatch.setattr(skeleton, "_describe_on", recording)
    return calls


def test_init_kernel_does_not_retry_on_the_cpu_after_the_task_s_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiml.kernel.skeleton import describe

    task = write(
        tmp_path,
        "imports.py",
        "import not_a_module_anywhere_xyz\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.rand(4)]\n",
    )
    calls = _record_describes(monkeypatch)
    with pytest.raises(TaskError, match="ModuleNotFoundError"):
        describe(load_task(task))
    assert calls == [("meta", 0)]


def test_init_kernel_retries_a_meta_failure_on_the_cpu_at_the_smallest_shape_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiml.kernel.skeleton import describe

    task = write(
        tmp_path,
        "item.py",
        'M = 4096\nOPTIML = {"shape_sets": [{"M": 512}, {"M": 8}, {"M": 100}]}\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return x / x.abs().max().item()\n"
        "def get_inputs():\n    return [torch.rand(M)]\n",
    )
    calls = _record_describes(monkeypatch)
    inputs, outputs = describe(load_task(task))  # .item() has no meta value: the CPU runs it
    assert calls == [("meta", 0), ("cpu", 2)]
    assert inputs[0].shape == (8,) and outputs[0].shape == (8,)


def test_a_package_the_task_imports_and_the_machine_lacks_is_named_with_its_install(tmp_path: Path) -> None:
    body = (
        "import not_a_module_anywhere_xyz.sub\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    task = write(tmp_path, "needs_pkg.py", body + "def get_inputs():\n    return [torch.rand(4)]\n")
    with pytest.raises(TaskError, match=r"No module named .*\(install it: pip install not_a_module_anywhere_xyz\)"):
        load_task(task).namespace()
