"""``col_chunks``: long columns too few to fill the GPU are cut into chunks along their length, a block a chunk of a
tile of columns, the stages' partial results combined through the workspace — checked against torch on the
emulator for one- and two-stage reductions, arg-reductions, full outputs and columns of two runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from emulated_tasks import emulator_mismatches, task_text, variant_units, with_variant, write_task
from test_gemm_template import gpu_failures, needs_gxx

from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.templates.base import DeviceFacts, GroupConfig
from optiml.templates.kernels import TemplateKernels

H100 = DeviceFacts(sm_count=132)
#: name: (shape sets, forward, inputs); each reduces over the leading dim(s), keeping the innermost
PROGRAMS = {
    # one stage, an outer output; columns in two tiles of 32 and a partial one
    "sum_dim0": ([{"N": 3000, "C": 70}, {"N": 517, "C": 5}], "x\nreturn x.sum(dim=0)", "[torch.randn(N, C)]"),
    # two stages (batch statistics), then a full output: a training-mode batch norm over (N, C)
    "batchnorm1d": (
        [{"N": 2900, "C": 6}, {"N": 64, "C": 33}],
        "x\nreturn torch.nn.functional.batch_norm(x, None, None, training=True) * 2.0 + 1.0",
        "[torch.randn(N, C) * 3.0 + 1.5]",
    ),
    # an arg-reduction: the first index of the maximum across chunks
    "argmax_dim0": (
        [{"N": 2500, "C": 7}, {"N": 300, "C": 40}],
        "x\nreturn torch.argmax(x, dim=0)",
        "[torch.randint(-3, 4, (N, C)).float()]",
    ),
    # a softmax down the columns: max, then a sum of exponentials, then every element
    "softmax_dim0": ([{"N": 2100, "C": 9}], "x\nreturn torch.softmax(x, dim=0)", "[torch.randn(N, C)]"),
    # a column of two runs: the mean over dims 0 and 1 of (A, B, C)
    "mean_dims01": (
        [{"A": 30, "B": 70, "C": 6}, {"A": 3, "B": 5, "C": 35}],
        "x\nreturn x.mean(dim=(0, 1))",
        "[torch.randn(A, B, C)]",
    ),
}
CONFIGS = [
    GroupConfig.of("col_chunks", threads=512, lanes=16, blocks_per_sm=4),
    GroupConfig.of("col_chunks", threads=256, lanes=8, blocks_per_sm=8),
    GroupConfig.of("col_chunks", threads=1024, lanes=32, blocks_per_sm=2),
]


def _task(folder: Path, name: str) -> Task:
    shape_sets, forward, inputs = PROGRAMS[name]
    return write_task(folder, name, task_text(shape_sets, forward, inputs))


def _units(folder: Path, names: list[str], configs: list[GroupConfig]) -> list[tuple[Task, str, str]]:
    return variant_units([_task(folder, name) for name in names], configs)


def test_the_rule_cuts_long_columns_too_few_for_the_sms(tmp_path: Path) -> None:
    """48 columns of 204 800 rows (a NetVLAD's batch norm): col_split would give 132 SMs two blocks."""
    tall = write_task(
        tmp_path, "tall", task_text([{"N": 204800, "C": 48}], "x\nreturn x.sum(dim=0)", "[torch.randn(N, C)]")
    )
    wide = write_task(
        tmp_path, "wide", task_text([{"N": 204800, "C": 8192}], "x\nreturn x.sum(dim=0)", "[torch.randn(N, C)]")
    )
    # 4096 columns: col_split's 128 tiles of 32 nearly fill 132 SMs, as measured; left as they were
    half = write_task(
        tmp_path, "half", task_text([{"N": 16384, "C": 4096}], "x\nreturn x.sum(dim=0)", "[torch.randn(N, C)]")
    )
    short = write_task(
        tmp_path, "short", task_text([{"N": 4096, "C": 48}], "x\nreturn x.sum(dim=0)", "[torch.randn(N, C)]")
    )
    first = TemplateKernels.for_task(tall, facts=H100).seeds(4)
    assert first[0][0].variant == "col_chunks" and any(s[0].variant == "col_split" for s in first)
    assert TemplateKernels.for_task(wide, facts=H100).default()[0].variant == "col_split"
    assert TemplateKernels.for_task(short, facts=H100).default()[0].variant == "col_split"
    assert TemplateKernels.for_task(half, facts=H100).default()[0].variant == "col_split"


@needs_gxx
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_chunked_columns_match_torch_on_the_emulator(tmp_path: Path, name: str) -> None:
    failures = emulator_mismatches(tmp_path / "emu", _units(tmp_path, [name], CONFIGS), seed=3, tol=2e-5)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_a_stage_that_combines_only_its_own_chunk_fails(tmp_path: Path) -> None:
    """The partials must be combined over every chunk: a kernel reading only chunk 0's is caught."""
    (task, label, code) = _units(tmp_path, ["batchnorm1d"], CONFIGS[:1])[0]
    broken = code.replace("active && c < p.C;", "active && c < 1;")
    assert broken != code
    assert emulator_mismatches(tmp_path / "emu", [(task, label, broken)], seed=3, tol=2e-5)


@pytest.mark.gpu
def test_chunked_columns_verify_on_the_gpu(tmp_path: Path) -> None:
    """The emulator's programs and configurations through the harness on a real GPU, planned for it."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    tasks = {name: _task(tmp_path, name) for name in PROGRAMS}

    def render(name: str, config: GroupConfig) -> KernelSource:
        return with_variant(TemplateKernels.for_task(tasks[name]), config)

    failures = gpu_failures(tasks, [(name, config) for name in PROGRAMS for config in CONFIGS], render, tmp_path)
    assert not failures, "\n".join(failures)
