"""The memory-bound task suite (tasks/memory/): every task loads, is well described, and runs on the CPU.

Fast and CPU only: references run at the small shape sets; the default (GPU-sized) shapes are only
sized on PyTorch's ``meta`` device, which allocates nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.evaluate.runtime import TaskRuntime, check_task
from optiml.task import Task, load_task
from optiml.task_runtime import _smallest_shape_set, torch_dtype

MEMORY = Path(__file__).resolve().parents[2] / "tasks" / "memory"
TASK_FILES = sorted(MEMORY.glob("*.py"))

#: Every class of memory-bound op the suite must cover, by task file stem.
EXPECTED = {
    "pointwise": [
        "gelu_tanh",
        "gelu_erf",
        "silu_scale_bias",
        "relu6",
        "leaky_relu",
        "swish_fp16",
        "silu_mul_bf16",
        "swiglu_chunk",
        "broadcast_fma",
        "masked_where",
    ],
    "reduction": [
        "sum_last_dim",
        "mean_dim1",
        "max_dim0",
        "amin_keepdim",
        "prod_last_dim",
        "argmax_last_dim",
        "argmin_dim1",
        "argmax_middle_dim",
        "sum_all",
    ],
    "norm": [
        "softmax_dim1",
        "softmax_long_rows",
        "log_softmax",
        "logsumexp",
        "layernorm_affine",
        "rmsnorm",
        "groupnorm",
        "instancenorm2d",
        "batchnorm2d_train",
        "l2_normalize_rows",
        "l2_normalize_odd_rows",
        "l1_normalize_rows",
        "frobenius_normalize",
    ],
    "loss": [
        "cross_entropy_vocab",
        "mse_loss",
        "huber_loss",
        "kl_div_loss",
        "hinge_loss",
        "cosine_similarity_loss",
        "triplet_margin_loss",
    ],
    "scan": ["cumsum_dim1", "cumprod_last_dim", "reverse_cumsum", "exclusive_cumsum", "masked_cumsum"],
    "data_movement": [
        "transpose_batched",
        "permute_nchw_nhwc",
        "channel_concat",
        "rotary_half",
        "relative_position_bias",
        "upsample_nearest",
    ],
    "pooling": ["maxpool1d", "maxpool2d", "avgpool2d", "maxpool3d", "avgpool3d", "avgpool1d"],
}
#: Tasks whose output is a 0-dim scalar (losses and full reductions).
SCALAR_OUTPUT = {*EXPECTED["loss"], "sum_all"}
#: Tasks with an integer (index) output instead of one in the task dtype.
INDEX_OUTPUT = {"argmax_last_dim", "argmin_dim1", "argmax_middle_dim"}

MIN_DEFAULT_BYTES = 400e6  # >= 0.1 ms at 4 TB/s: big enough to time on an H200
MAX_DEFAULT_BYTES = 2e9
MAX_INPUT_BYTES = 1.5e9  # any shape set's inputs (forward args and parameters)
MAX_SMALLEST_BYTES = 64e6  # the smallest shape set must stay cheap for CPU tests


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


def _task(path: Path) -> Task:
    return load_task(path)


def _assert_finite(outputs: list[torch.Tensor], where: str) -> None:
    assert outputs, f"{where}: no outputs"
    for i, out in enumerate(outputs):
        if out.is_floating_point():
            assert torch.isfinite(out).all(), f"{where}: output {i} has non-finite values"


def test_suite_has_at_least_32_tasks() -> None:
    assert len(TASK_FILES) >= 32, [p.name for p in TASK_FILES]


@pytest.mark.parametrize("op_class", sorted(EXPECTED))
def test_suite_covers_class(op_class: str) -> None:
    missing = [name for name in EXPECTED[op_class] if not (MEMORY / f"{name}.py").is_file()]
    assert not missing, f"{op_class}: missing tasks {missing}"


def test_every_task_file_is_classified() -> None:
    listed = {name for names in EXPECTED.values() for name in names}
    assert {p.stem for p in TASK_FILES} == listed


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_task_loads_with_metadata(path: Path) -> None:
    task = _task(path)
    assert task.meta.description.strip(), "empty description"
    assert task.meta.flops, "no flops expression"
    assert task.num_shape_sets >= 3, "needs at least 2 shape sets beyond the default"
    for shape_set in range(task.num_shape_sets):
        flops = task.flops(shape_set)
        assert flops is not None and flops >= 0
        unknown = set(task.overrides(shape_set)) - set(task.globals_)
        assert not unknown, f"shape set {shape_set} overrides globals the file does not define: {unknown}"
    overrides = [value for s in task.meta.shape_sets for value in s.values() if isinstance(value, int)]
    assert any(value % 4 for value in overrides), "no awkward (non-multiple-of-4) size in the shape sets"


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_reference_runs_at_smallest_shape_set(path: Path) -> None:
    task = _task(path)
    runtime = TaskRuntime(task, "cpu")
    shape_set = _smallest_shape_set(runtime)
    args = runtime.make_args(0, shape_set)
    model = runtime.build_model(0, shape_set)
    outputs = runtime.run_reference(model, args)
    where = f"{task.name} shape set {shape_set}"
    _assert_finite(outputs, where)
    in_bytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
    assert in_bytes <= MAX_SMALLEST_BYTES, f"{where}: {in_bytes / 1e6:.0f} MB is too big for a CPU test"
    for out in outputs:
        if task.name in INDEX_OUTPUT:
            assert out.dtype == torch.int64
        else:
            assert out.dtype == torch_dtype(task.meta.dtype), f"{where}: output dtype {out.dtype}"
        if task.name in SCALAR_OUTPUT:
            assert out.dim() == 0, f"{where}: expected a 0-dim output, got shape {tuple(out.shape)}"
    # The same dynamic checks as `optiml check-task`: reproducible inputs, deterministic forward.
    check_task(task, "cpu", shape_set)


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_reference_runs_at_every_extra_shape_set(path: Path) -> None:
    task = _task(path)
    runtime = TaskRuntime(task, "cpu")
    for shape_set in range(1, task.num_shape_sets):
        outputs = runtime.run_reference(runtime.build_model(0, shape_set), runtime.make_args(0, shape_set))
        _assert_finite(outputs, f"{task.name} shape set {shape_set}")


@pytest.mark.parametrize("path", TASK_FILES, ids=_ids(TASK_FILES))
def test_shape_sets_fit_the_byte_budget(path: Path) -> None:
    task = _task(path)
    runtime = TaskRuntime(task, "meta")  # shapes and dtypes only: nothing is allocated or computed
    for shape_set in range(task.num_shape_sets):
        case = runtime.case(0, shape_set)
        in_bytes, out_bytes = case.input_bytes(), case.output_bytes()
        assert in_bytes < MAX_INPUT_BYTES, f"shape set {shape_set}: inputs {in_bytes / 1e9:.2f} GB"
        if shape_set == 0:
            total = in_bytes + out_bytes
            assert MIN_DEFAULT_BYTES <= total <= MAX_DEFAULT_BYTES, f"default set moves {total / 1e6:.0f} MB"
