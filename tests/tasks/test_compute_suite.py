"""The compute-bound task suite (tasks/compute/): every task loads, is well described, runs on the CPU, and plans.

Fast and CPU only: references run at the small shape sets; the default (GPU-sized) shapes are only
sized on PyTorch's ``meta`` device. Planning traces on the meta device too, so the planner's decision
for every task is pinned here: a template that cannot cover a task must say so in one line, never
plan a wrong kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.errors import OptimlError
from optiml.evaluate.runtime import TaskRuntime, check_task
from optiml.task import Task, load_task
from optiml.task_runtime import _smallest_shape_set, torch_dtype

COMPUTE = Path(__file__).resolve().parents[2] / "tasks" / "compute"
TASK_FILES = sorted(COMPUTE.glob("*.py"))

#: Every class of compute-bound task the suite must cover, by task file stem.
EXPECTED = {
    "gemm": [
        "sgemm_square",
        "bf16_gemm_square",
        "gemm_rect_nt",
        "bmm_fp32",
        "bmm_qk_fp16",
        "gemv_fp32",
        "large_k_gemm",
        "small_m_linear",
        "tall_skinny_gemm",
        "small_k_gemm",
    ],
    "fused_tail": [
        "linear_bias_relu",
        "linear_gelu_bf16",
        "matmul_scale_residual",
        "linear_softmax",
        "matmul_logsumexp",
        "linear_layernorm",
        "conv2d_bias_relu",
        "conv2d_batchnorm_eval",
        "conv2d_relu_maxpool",
        "conv2d_residual_bf16",
    ],
    "conv": [
        "conv1d",
        "conv2d_strided",
        "conv3d",
        "depthwise_conv2d",
        "depthwise_conv2d_k5s2",
        "depthwise_separable_fp16",
        "conv_transpose2d",
        "pointwise_conv2d_bf16",
        "conv2d_fp16",
        "conv3d_few_channels",
        "conv_transpose2d_dilated",
    ],
    "recurrent": ["lstm_stack", "gru_bidirectional"],
}
#: Tasks whose output is one value per row (a reduction tail), not the product's shape.
ROW_OUTPUT = {"matmul_logsumexp"}

#: The planner's decision for every task (kernels and the ops each fuses): a change here is deliberate.
PLANS = {
    "sgemm_square": "gemm[matmul]",
    "bf16_gemm_square": "gemm[matmul]",
    "gemm_rect_nt": "gemm[matmul]",
    "bmm_fp32": "gemm[matmul]",
    "bmm_qk_fp16": "gemm[matmul mul]",  # k.transpose(-2, -1) is read in place: trans_b over two batch dims
    "gemv_fp32": "gemm[matmul]",
    "large_k_gemm": "gemm[matmul]",
    "small_m_linear": "gemm[matmul add]",
    "tall_skinny_gemm": "gemm[matmul]",
    "small_k_gemm": "gemm[matmul]",
    "linear_bias_relu": "gemm[matmul add relu]",
    "linear_gelu_bf16": "gemm[matmul add cast mul mul mul add mul mul tanh add mul cast]",
    "matmul_scale_residual": "gemm[matmul mul add]",
    "linear_softmax": "gemm[matmul add] → reduce[amax sub exp sum div]",
    "matmul_logsumexp": "gemm[matmul mul] → reduce[amax abs eq where view sub exp sum log add]",
    "linear_layernorm": "gemm[matmul add] → reduce[mean sub mul mean add rsqrt mul mul add]",
    "conv2d_bias_relu": "conv[conv relu]",
    "conv2d_batchnorm_eval": "conv[conv sub mul mul add relu]",
    "conv2d_relu_maxpool": "conv[conv relu] → pool[max_pool]",
    "conv2d_residual_bf16": "conv[conv add relu]",
    "conv1d": "conv[conv]",
    "conv2d_strided": "conv[conv]",
    "conv3d": "conv[conv]",
    "depthwise_conv2d": "conv[conv]",
    "depthwise_conv2d_k5s2": "conv[conv]",
    "depthwise_separable_fp16": "conv[conv] → conv[conv]",
    "conv_transpose2d": "conv[conv]",
    "pointwise_conv2d_bf16": "conv[conv]",
    "conv2d_fp16": "conv[conv]",
    "conv3d_few_channels": "conv[conv]",
    "conv_transpose2d_dilated": "conv[conv]",
    "lstm_stack": "recurrent[lstm]",
    "gru_bidirectional": "recurrent[gru]",
}
#: The conv kernel's variant under the planner's rule (H200 facts) for the convolution tasks; the GEMM
#: template's choices are pinned by its own tests (tests/templates/test_gemm_template.py) as it is tuned.
VARIANTS = {
    "conv_transpose2d": "implicit",  # 128 x 16 taps, a quarter of them real at stride 2: 512 products
    "depthwise_conv2d": "stencil",  # one input channel a group: an input box in shared memory
    "depthwise_conv2d_k5s2": "stencil",
    "depthwise_separable_fp16": "stencil",
    "conv2d_bias_relu": "tf32x3_wgmma",  # Hopper warp-group MMAs: the implicit GEMM with tap-major weights
    "conv3d": "tf32x3_wgmma",
    "conv2d_fp16": "wgmma",
    "pointwise_conv2d_bf16": "wgmma",  # B by 16-byte pixel copies
    "conv2d_batchnorm_eval": "tf32x3_wgmma",
    "conv2d_residual_bf16": "wgmma",
}

MIN_DEFAULT_FLOPS = 2e8  # the default shape set is worth timing on an H200
MAX_INPUT_BYTES = 1.5e9  # any shape set's inputs (forward args and parameters)
MAX_SMALLEST_BYTES = 64e6  # the smallest shape set must stay cheap for CPU tests
MAX_SMALLEST_FLOPS = 5e8


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _assert_finite(outputs: list[torch.Tensor], where: str) -> None:
    assert outputs, f"{where}: no outputs"
    for i, out in enumerate(outputs):
        if out.is_floating_point():
            assert torch.isfinite(out).all(), f"{where}: output {i} has non-finite values"


def test_suite_has_at_least_20_tasks() -> None:
    assert len(TASK_FILES) >= 20, [p.name for p in TASK_FILES]
    assert len(EXPECTED["fused_tail"]) >= 8


@pytest.mark.parametrize("op_class", sorted(EXPECTED))
def test_suite_covers_class(op_class: str) -> None:
    missing = [name for name in EXPECTED[op_class] if not (COMPUTE / f"{name}.py").is_file()]
    assert not missing, f"{op_class}: missing tasks {missing}"


def test_every_task_file_is_classified_and_planned() -> None:
    listed = {name for names in EXPECTED.values() for name in names}
    assert {p.stem for p in TASK_FILES} == listed == set(PLANS)


def test_suite_mixes_precisions() -> None:
    dtypes = {load_task(p).meta.dtype for p in TASK_FILES}
    assert {"float32", "bfloat16", "float16"} <= dtypes
    conv_dtypes = {load_task(COMPUTE / f"{n}.py").meta.dtype for n in EXPECTED["conv"]}
    assert "float32" in conv_dtypes and conv_dtypes & {"bfloat16", "float16"}


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_task_loads_with_metadata(path: Path) -> None:
    task = load_task(path)
    assert task.meta.description.strip(), "empty description"
    assert task.meta.flops, "no flops expression"
    assert task.num_shape_sets >= 3, "needs at least 2 shape sets beyond the default"
    assert task.flops(0) is not None and task.flops(0) >= MIN_DEFAULT_FLOPS, f"default set: {task.flops(0)} flops"
    for shape_set in range(task.num_shape_sets):
        flops = task.flops(shape_set)
        assert flops is not None and flops > 0
        unknown = set(task.overrides(shape_set)) - set(task.globals_)
        assert not unknown, f"shape set {shape_set} overrides globals the file does not define: {unknown}"
    overrides = [value for s in task.meta.shape_sets for value in s.values() if isinstance(value, int)]
    assert any(value % 2 for value in overrides), "no odd size in the shape sets"
    source = path.read_text(encoding="utf-8")
    assert "TF32" in source or task.meta.dtype != "float32", "an fp32 task must say why TF32 fails its tolerance"


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_reference_runs_at_smallest_shape_set(path: Path) -> None:
    task = load_task(path)
    runtime = TaskRuntime(task, "cpu")
    shape_set = _smallest_shape_set(runtime)
    args = runtime.make_args(0, shape_set)
    outputs = runtime.run_reference(runtime.build_model(0, shape_set), args)
    where = f"{task.name} shape set {shape_set}"
    _assert_finite(outputs, where)
    in_bytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    assert in_bytes <= MAX_SMALLEST_BYTES, f"{where}: {in_bytes / 1e6:.0f} MB is too big for a CPU test"
    assert (task.flops(shape_set) or 0) <= MAX_SMALLEST_FLOPS, f"{where}: too many flops for a CPU test"
    for out in outputs:
        assert out.dtype == torch_dtype(task.meta.dtype), f"{where}: output dtype {out.dtype}"
        if task.name in ROW_OUTPUT:
            assert out.dim() == 1, f"{where}: expected a row vector, got shape {tuple(out.shape)}"
    # The same dynamic checks as `optiml check-task`: reproducible inputs, deterministic forward.
    check_task(task, "cpu", shape_set)


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_reference_runs_at_every_extra_shape_set(path: Path) -> None:
    task = load_task(path)
    runtime = TaskRuntime(task, "cpu")
    for shape_set in range(1, task.num_shape_sets):
        outputs = runtime.run_reference(runtime.build_model(0, shape_set), runtime.make_args(0, shape_set))
        _assert_finite(outputs, f"{task.name} shape set {shape_set}")


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_shape_sets_fit_the_byte_budget(path: Path) -> None:
    task = load_task(path)
    runtime = TaskRuntime(task, "meta")  # shapes and dtypes only: nothing is allocated or computed
    for shape_set in range(task.num_shape_sets):
        tensors = [a for a in runtime.make_args(0, shape_set) if isinstance(a, torch.Tensor)]
        tensors += list(runtime.build_model(0, shape_set).state_dict().values())
        in_bytes = sum(t.numel() * t.element_size() for t in tensors)
        assert in_bytes < MAX_INPUT_BYTES, f"shape set {shape_set}: inputs {in_bytes / 1e9:.2f} GB"


def _plan(task: Task) -> tuple[str, str]:
    from optiml.templates.kernels import template_kernels

    try:
        kernels = template_kernels(task)
    except OptimlError as exc:  # no template: one line naming what is missing
        message = str(exc)
        assert "no template for" in message and "\n" not in message, message
        return f"unplanned: {message}", ""
    return kernels.describe(), kernels.default()[0].variant


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_the_planner_decision_is_pinned(path: Path) -> None:
    task = load_task(path)
    plan, variant = _plan(task)
    assert plan == PLANS[task.name]
    if task.name in VARIANTS:
        assert variant == VARIANTS[task.name]
    assert _plan(load_task(path)) == (plan, variant), "planning is deterministic"
