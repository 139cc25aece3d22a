"""The torch.library custom-op export on the CPU (issue 15): schema from the task's signature, the fake
implementation under meta tensors, ``make_fx`` and ``torch.compile``, and clear errors for calls the
kernel was not verified for. Running the CUDA kernel is test_export_gpu.py's business."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch
from export_helpers import TASKS, import_file, unique_namespace, write
from torch.fx.experimental.proxy_tensor import make_fx

from optiml.export.op import default_op_name, render_op
from optiml.export.signature import ExportError
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task

SILU_KERNEL = KernelSource.from_file(TASKS / "silu.naive.cu")  # any kernel: nothing is compiled here


def export_op(tmp_path: Path, task: Task, kernel: KernelSource = SILU_KERNEL, name: str | None = None) -> ModuleType:
    namespace = unique_namespace()
    text = render_op(task, kernel, namespace=namespace, name=name)
    module = import_file(write(tmp_path, f"{task.name}_op.py", text))
    module.namespace = namespace  # type: ignore[attr-defined]
    return module


def op_of(module: ModuleType, name: str) -> torch._ops.OpOverloadPacket:
    return getattr(getattr(torch.ops, module.namespace), name)


def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


def test_the_schema_is_the_tasks_forward_arguments_then_its_parameters(tmp_path: Path) -> None:
    module = export_op(tmp_path, load_task(TASKS / "layernorm.py"))
    schema = str(op_of(module, "layernorm").default._schema)
    assert schema == f"{module.namespace}::layernorm(Tensor x, Tensor ln_weight, Tensor ln_bias) -> Tensor"
    assert "torch.ops." + module.namespace + ".layernorm(x, ln_weight, ln_bias)" in module.__doc__
    ce = export_op(tmp_path, load_task(TASKS / "cross_entropy.py"), name="xent")
    assert str(op_of(ce, "xent").default._schema).endswith("xent(Tensor logits, Tensor targets) -> Tensor")


def test_the_fake_implementation_gives_the_output_shapes(tmp_path: Path) -> None:
    ln = op_of(export_op(tmp_path, load_task(TASKS / "layernorm.py")), "layernorm")
    assert ln(meta(5, 7), meta(7), meta(7)).shape == (5, 7)
    transpose = op_of(export_op(tmp_path, load_task(TASKS / "transpose.py")), "transpose")
    assert transpose(meta(3, 1000)).shape == (1000, 3)
    xent = op_of(export_op(tmp_path, load_task(TASKS / "cross_entropy.py")), "cross_entropy")
    loss = xent(meta(4, 10), meta(4, dtype=torch.int64))
    assert loss.shape == () and loss.dtype == torch.float32


def test_the_op_traces_under_make_fx_and_torch_compile(tmp_path: Path) -> None:
    module = export_op(tmp_path, load_task(TASKS / "layernorm.py"))
    ln = op_of(module, "layernorm")

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return ln(x, w, b) * 2 + 1

    graph = make_fx(f, tracing_mode="symbolic")(meta(3, 4), meta(4), meta(4))
    assert f"torch.ops.{module.namespace}.layernorm.default" in graph.code
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    assert compiled(meta(6, 9), meta(9), meta(9)).shape == (6, 9)
    assert compiled(meta(2, 33), meta(33), meta(33)).shape == (2, 33)


def test_outputs_without_a_rule_are_known_for_the_tasks_shape_sets_only(tmp_path: Path) -> None:
    """avgpool1d halves the length: no output dimension equals an input's, so shapes come from the table."""
    task = load_task(TASKS / "memory" / "avgpool1d.py")
    pool = op_of(export_op(tmp_path, task), "avgpool1d")
    assert pool(meta(3, 5, 3001)).shape == (3, 5, 1500)
    with pytest.raises(ValueError, match=r"no rule gives output 0's shape for inputs of shapes \[\(2, 2, 10\)\]"):
        pool(meta(2, 2, 10))


def test_calls_the_kernel_was_not_verified_for_fail_clearly(tmp_path: Path) -> None:
    module = export_op(tmp_path, load_task(TASKS / "layernorm.py"))
    ln = op_of(module, "layernorm")
    w = meta(7)
    with pytest.raises(
        RuntimeError,
        match=r"the kernel runs on CUDA tensors; these are on cpu; (move them to a GPU|no CUDA GPU is visible here)$",
    ):
        ln(torch.randn(5, 7), torch.randn(7), torch.randn(7))
    with pytest.raises(TypeError, match=r"input 'x' is float64; the kernel was verified for float32"):
        ln(meta(5, 7, dtype=torch.float64), w, w)
    with pytest.raises(ValueError, match=r"input 'x' is not contiguous; give it x.contiguous\(\)"):
        ln(meta(7, 5).t(), w, w)
    with pytest.raises(ValueError, match=r"parameter 'ln.weight' has 2 dims; the kernel was verified with 1"):
        ln(meta(5, 7), meta(1, 7), w)


def test_one_argument_block_per_input_signature(tmp_path: Path) -> None:
    module = export_op(tmp_path, load_task(TASKS / "layernorm.py"))
    block = module.argument_block(meta(5, 7), meta(7), meta(7))
    assert module.argument_block(meta(5, 7), meta(7), meta(7)) is block
    assert module.argument_block(meta(6, 7), meta(7), meta(7)).output_specs == [((6, 7), torch.float32)]


def test_names_and_namespaces(tmp_path: Path) -> None:
    assert default_op_name(load_task(write(tmp_path, "40_LayerNorm.py", (TASKS / "softmax.py").read_text()))) == (
        "op_40_layernorm"
    )
    task = load_task(TASKS / "softmax.py")
    with pytest.raises(ExportError, match="--namespace 'aten' belongs to PyTorch"):
        render_op(task, SILU_KERNEL, namespace="aten")
    with pytest.raises(ExportError, match=r"--name 'my-op': expected an identifier"):
        render_op(task, SILU_KERNEL, name="my-op")


def test_the_kernel_refuses_a_call_autograd_would_record(tmp_path: Path) -> None:
    """The CUDA implementation checks for gradients before anything else: a Parameter (as a user passes
    ``model.ln.weight``) with grad mode on is refused in one line; under no_grad the check passes and
    the call goes on to the device check (CPU tensors here)."""
    module = export_op(tmp_path, load_task(TASKS / "layernorm.py"))
    x, bias, weight = torch.randn(2, 4), torch.zeros(4), torch.nn.Parameter(torch.ones(4))
    with pytest.raises(RuntimeError, match="has no backward, and an input requires grad"):
        module._kernel(x, weight, bias)
    with torch.no_grad(), pytest.raises(RuntimeError, match="runs on CUDA tensors"):
        module._kernel(x, weight, bias)
