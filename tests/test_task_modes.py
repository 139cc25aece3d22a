"""The reference as KernelBench runs it (training mode by default, ``OPTIML['mode']``) and at the precision the
task chooses (``OPTIML['precision']``): batch statistics without state written, random modules refused in one
line, PyTorch's default settings around a "tf32" reference."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from optiml.errors import TaskError
from optiml.evaluate.runtime import TaskRuntime, check_task
from optiml.task import load_task
from optiml.task_runtime import TORCH_DEFAULTS, TaskRunner, model_bytes

BN = """
import torch
import torch.nn as nn

N, C, H, W = 6, 3, 5, 4


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        with torch.no_grad():
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
{init}

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.rand(N, C, H, W) * 3 + 1]


def get_init_inputs():
    return [C]

OPTIML = {optiml}
"""


def write(folder: Path, name: str, *, init: str = "", body: str = "self.bn(x)", optiml: str = "{}") -> Path:
    path = folder / f"{name}.py"
    path.write_text(BN.format(init=init, body=body, optiml=optiml))
    return path


def test_the_defaults_are_kernelbench_s_mode_and_exact_precision(tmp_path: Path) -> None:
    meta = load_task(write(tmp_path, "plain")).meta
    assert (meta.mode, meta.precision, meta.atol, meta.rtol) == ("train", "exact", 1e-4, 1e-4)
    assert meta.to_dict()["mode"] == "train" and meta.to_dict()["precision"] == "exact"
    tf32 = load_task(write(tmp_path, "tf32", optiml='{"precision": "tf32"}')).meta
    assert (tf32.precision, tf32.atol, tf32.rtol) == ("tf32", 1e-2, 1e-2)  # fp16's tolerance: the same mantissa
    given = load_task(write(tmp_path, "given", optiml='{"precision": "tf32", "atol": 3e-3}')).meta
    assert (given.atol, given.rtol) == (3e-3, 1e-2)


def test_training_mode_normalises_by_batch_statistics_and_writes_no_state(tmp_path: Path) -> None:
    runtime = TaskRuntime(load_task(write(tmp_path, "bn")), "cpu")
    case = runtime.case(3)
    before = [t.clone() for t in case.params]
    (x,) = case.args
    bn = case.model.bn
    want = F.batch_norm(x, None, None, bn.weight, bn.bias, training=True, eps=bn.eps)
    assert torch.allclose(case.expected[0], want, atol=1e-6)
    again = [runtime.run_reference(case.model, case.args)[0] for _ in range(3)]  # the judge reruns it
    assert all(torch.equal(a, case.expected[0]) for a in again)
    names = list(case.model.state_dict())
    assert names == ["bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert all(torch.equal(a, b) for a, b in zip(before, case.params, strict=True))  # the kernel's inputs held
    assert any("mode train" in n and "BatchNorm on batch statistics: bn" in n for n in runtime.notes), runtime.notes


def test_check_task_says_how_the_reference_runs_at_full_size_and_on_the_meta_device(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, "bn_notes"))
    for notes in (check_task(task), check_task(task, max_bytes=1)):  # max_bytes=1: the meta-device check
        assert any(n.startswith("reference: mode train") and "precision exact" in n for n in notes), notes


def test_eval_mode_uses_running_statistics(tmp_path: Path) -> None:
    train = TaskRuntime(load_task(write(tmp_path, "bn_train")), "cpu").case(3)
    runtime = TaskRuntime(load_task(write(tmp_path, "bn_eval", optiml='{"mode": "eval"}')), "cpu")
    case = runtime.case(3)
    bn = case.model.bn
    want = F.batch_norm(case.args[0], bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False)
    assert torch.allclose(case.expected[0], want, atol=1e-6)
    assert not torch.allclose(case.expected[0], train.expected[0], atol=1e-2)  # the modes differ here
    assert any("mode eval" in n and "running statistics" in n for n in runtime.notes), runtime.notes


def test_a_module_the_file_puts_in_eval_mode_stays_there(tmp_path: Path) -> None:
    """KernelBench never calls ``model.train()`` either: the model runs exactly as its ``__init__`` leaves it."""
    runner = TaskRunner(load_task(write(tmp_path, "own_eval", init="        self.bn.eval()")), "cpu")
    model = runner.build_model(3)
    assert not model.bn.training and model.training
    assert "BatchNorm on running statistics: bn" in runner.notes[0]


@pytest.mark.parametrize(
    ("init", "body", "named"),
    [
        ("        self.drop = nn.Dropout(p=0.2)", "self.drop(self.bn(x))", "drop = nn.Dropout(p=0.2)"),
        ("        self.drop = nn.Dropout2d(0.5)", "self.drop(x)", "drop = nn.Dropout2d(p=0.5)"),
        ("        self.act = nn.RReLU()", "self.act(x - 2.5)", "act = nn.RReLU(lower=0.125, upper=0.333333)"),
    ],
)
def test_a_random_module_is_refused_in_one_line_unless_the_mode_is_eval(
    tmp_path: Path, init: str, body: str, named: str
) -> None:
    task = load_task(write(tmp_path, "random", init=init, body=body))
    with pytest.raises(TaskError) as info:
        check_task(task)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(task.shown))
    assert named in message and "random in training mode" in message and "{'mode': 'eval'}" in message
    assert "two draws on the same inputs moved it by" in message
    evaluated = load_task(write(tmp_path, "random_eval", init=init, body=body, optiml='{"mode": "eval"}'))
    notes = check_task(evaluated)  # eval mode: Dropout is the identity, the forward deterministic
    assert any("mode eval" in n for n in notes), notes


@pytest.mark.parametrize(
    ("init", "body", "named"),
    [
        # KernelBench's level 2 66 and 83: a mean over a size-1 dim, then softmax; a clamp to [0, 0] of a minimum
        (
            "        self.drop = nn.Dropout(p=0.2)",
            "torch.softmax(self.drop(x).mean(dim=1, keepdim=True), dim=1)",
            "drop = nn.Dropout(p=0.2)",
        ),
        ("        self.drop = nn.Dropout(p=0.2)", "self.drop(torch.clamp(torch.min(x, x * 0), 0, 0))", "drop ="),
        ("        self.attn = nn.MultiheadAttention(4, 2, dropout=0.1)", "x", "attn = nn.MultiheadAttention"),
    ],
)
def test_a_random_module_whose_draws_do_not_reach_the_outputs_runs_as_written(
    tmp_path: Path, init: str, body: str, named: str
) -> None:
    task = load_task(write(tmp_path, "unreached", init=init, body=body))
    notes = check_task(task)
    assert any(named in n and "do not reach the outputs" in n for n in notes), notes
    runner = TaskRunner(task, "cpu")
    model, args = runner.build_model(0), runner.make_args(0)
    assert model.training
    first, second = runner.run_reference(model, args), runner.run_reference(model, args)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_an_inactive_dropout_is_kept_in_training_mode(tmp_path: Path) -> None:
    init = "        self.drop = nn.Dropout(p=0.0)"
    notes = check_task(load_task(write(tmp_path, "p0", init=init, body="self.drop(self.bn(x))")))
    assert any("Dropout p=0 in training mode: drop" in n for n in notes), notes


def test_a_tf32_reference_runs_under_pytorch_s_defaults_and_restores_the_exact_state(tmp_path: Path) -> None:
    """The flags a reference's forward sees: exact by default, PyTorch's own under precision "tf32"."""
    body = "x * 0 + float(torch.backends.cudnn.allow_tf32) + 2 * float(torch.backends.cuda.matmul.allow_tf32)"
    seen = {}
    for precision in ("exact", "tf32"):
        task = load_task(write(tmp_path, precision, body=body, optiml=f'{{"precision": "{precision}"}}'))
        runner = TaskRunner(task, "cpu")
        (out,) = runner.run_reference(runner.build_model(0), runner.make_args(0))
        seen[precision] = out.flatten()[0].item()
        assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32  # restored
    assert seen == {"exact": 0.0, "tf32": float(TORCH_DEFAULTS[1]) + 2 * float(TORCH_DEFAULTS[0])}
    assert TORCH_DEFAULTS[1]  # PyTorch's default: cuDNN convolutions in TF32


CONV = """
import torch
import torch.nn as nn

OPTIML = {optiml}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 64, 3)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(8, 64, 64, 64)]


def get_init_inputs():
    return []
"""


@pytest.mark.gpu
def test_a_tf32_convolution_reference_differs_from_the_exact_one_as_kernelbench_s_does(tmp_path: Path) -> None:
    """On the GPU: the "tf32" reference is cuDNN's TF32 convolution (off the exact one by more than KernelBench's
    fp32 tolerance, within the tf32 default), and the exact reference is untouched by it."""
    refs = {}
    for precision in ("exact", "tf32"):
        path = tmp_path / f"conv_{precision}.py"
        path.write_text(CONV.format(optiml=f'{{"precision": "{precision}"}}'))
        case = TaskRuntime(load_task(path), "cuda").case(7)
        refs[precision] = case.expected[0].double()
    with torch.no_grad():  # the same seeded model and inputs in float64: the truth both are measured against
        truth = copy.deepcopy(case.model).double()(case.args[0].double())
    error = (refs["tf32"] - truth).abs().max().item()
    assert 1e-4 < error < 1e-2, error
    assert (refs["exact"] - truth).abs().max().item() < 1e-4
    assert not torch.backends.cudnn.allow_tf32  # the process stays exact (the `eager` timing reads it)


WIDE = """
import numpy as np
import torch
import torch.nn as nn

N, F = 4, 64


class Model(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.linear = nn.Linear(f, f)
        self.register_buffer("scale", torch.ones(f))
{init}

    def forward(self, x):
        return self.linear(x) * self.scale


def get_inputs():
    return [torch.rand(N, F)]


def get_init_inputs():
    return [F]
"""


def test_model_bytes_counts_parameters_and_buffers_on_the_meta_device(tmp_path: Path) -> None:
    path = tmp_path / "wide.py"
    path.write_text(WIDE.format(init=""))
    assert model_bytes(load_task(path)) == (64 * 64 + 64 + 64) * 4
    broken = tmp_path / "broken.py"
    broken.write_text(WIDE.format(init="        raise ValueError('no')"))
    assert model_bytes(load_task(broken)) == 0  # the real build reports it
    runner = TaskRunner(load_task(path), "cpu")
    assert not runner._initialises_on_device(0)  # only a GPU runtime initialises there


@pytest.mark.gpu
def test_a_large_model_is_initialised_on_the_gpu_seeded_and_one_that_cannot_be_is_built_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import optiml.task_runtime as task_runtime

    monkeypatch.setattr(task_runtime, "DEVICE_INIT_BYTES", 1)  # every model counts as large
    path = tmp_path / "wide.py"
    path.write_text(WIDE.format(init=""))
    runner = TaskRunner(load_task(path), "cuda")
    first, again = runner.build_model(5), runner.build_model(5)
    assert first.linear.weight.is_cuda and torch.equal(first.linear.weight, again.linear.weight)  # seeded
    assert not torch.equal(first.linear.weight, runner.build_model(6).linear.weight)
    assert any("initialised on the GPU" in note for note in runner.notes)
    numpy_init = tmp_path / "numpy_init.py"  # an __init__ that mixes a CPU array into a default-device tensor
    numpy_init.write_text(
        WIDE.format(init="        self.offset = torch.ones(f) + torch.from_numpy(np.ones(f, 'float32'))")
    )
    cpu_built = TaskRunner(load_task(numpy_init), "cuda")
    model = cpu_built.build_model(5)
    assert model.linear.weight.is_cuda and cpu_built._device_init_bytes == {0: 0}
