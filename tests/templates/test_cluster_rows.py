"""``cluster_row``: a row read more than once held in shared memory, split over the blocks of a thread-block cluster
whose partial results meet through distributed shared memory — checked against torch on the emulator (which runs
a cluster's blocks together) for online and two-stage statistics, arg-reductions, broadcast weights, rows whose
segments start off 16-byte boundaries, empty segments, and the path that reads global memory when a row does not
fit; the rule that seeds it; and the same kernels on a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from emulated_tasks import emulator_mismatches, planned, task_text, variant_units, with_variant, write_task
from test_gemm_template import gpu_failures, needs_gxx

from optiml.kernel.source import KernelSource
from optiml.task import Task
from optiml.templates.base import DeviceFacts, GroupConfig
from optiml.templates.kernels import TemplateKernels
from optiml.templates.row.cluster import HELD_BYTES

H100 = DeviceFacts(sm_count=132)
ROWS = [{"N": 3, "L": 2000}, {"N": 4, "L": 333}, {"N": 2, "L": 20}]
#: name: (shape sets, forward, inputs, init); each reads its rows more than once
PROGRAMS = {
    # max and the sum of exponentials in one online pass, then every element
    "softmax": (ROWS, "x\nreturn torch.softmax(x, dim=1)", "[torch.randn(N, L) * 4.0]", ""),
    "log_softmax": (ROWS, "x\nreturn torch.log_softmax(x, dim=1)", "[torch.randn(N, L)]", ""),
    # a sum of squares, then the scaled row (rows of odd length: segments off 16-byte boundaries)
    "l2_normalize": (ROWS, "x\nreturn x / torch.norm(x, p=2, dim=1, keepdim=True)", "[torch.randn(N, L)]", ""),
    # mean and variance (a partnered sum of squares), then the normalised row times a weight along it
    "instance_norm": (
        ROWS,
        "x\nm = x.mean(dim=1, keepdim=True)\nv = x.var(dim=1, keepdim=True, unbiased=False)\n"
        "return (x - m) / torch.sqrt(v + 1e-5) * self.w",
        "[torch.randn(N, L) * 2.0 + 3.0]",
        "self.w = nn.Parameter(torch.randn(L))",
    ),
    # the first index of the maximum (ties across blocks), and an outer output beside the full one
    "argmax_shift": (
        ROWS,
        "x\nreturn x - x.amax(dim=1, keepdim=True) + x.argmax(dim=1, keepdim=True).float()",
        "[torch.randint(-3, 4, (N, L)).float()]",
        "",
    ),
}
CONFIGS = [
    GroupConfig.of("cluster_row", threads=256, vec=4, cluster=4),
    GroupConfig.of("cluster_row", threads=256, vec=1, cluster=2),
    GroupConfig.of("cluster_row", threads=256, vec=4, cluster=1),
]


def _task(folder: Path, name: str, dtype: str = "float32") -> Task:
    shape_sets, forward, inputs, init = PROGRAMS[name]
    text = task_text(shape_sets, forward, inputs, init=init).replace('"dtype": "float32"', f'"dtype": "{dtype}"')
    return write_task(folder, f"{name}_{dtype}", text)


def _units(folder: Path, names: list[str], configs: list[GroupConfig]) -> list[tuple[Task, str, str]]:
    return variant_units([_task(folder, name) for name in names], configs)


def _uncached(code: str) -> str:
    """The same kernel made to read its row from global memory on every pass (as a row too long to hold)."""
    held = f"<= {HELD_BYTES};"
    assert held in code
    return code.replace(held, "<= 0;")


def _softmax_task(folder: Path, rows: int, length: int) -> Task:
    return write_task(
        folder,
        f"softmax_{rows}x{length}",
        task_text([{"N": rows, "L": length}], "x\nreturn torch.softmax(x, dim=1)", "[torch.randn(N, L)]"),
    )


def test_the_rule_holds_rows_re_read_past_l2(tmp_path: Path) -> None:
    """A 256 KB row (65 535 floats) is held by 4 blocks of 64 KB, the rule (two blocks an SM), the row re-read
    raced second; KernelBench's softmax (4096 rows of 393 216 floats, 1.5 MB: one block an SM) keeps the re-read
    and races a cluster of 8 second; rows that fit in L2 all together, a single-pass sum, and short rows are left
    alone."""
    odd = TemplateKernels.for_task(_softmax_task(tmp_path, 32768, 65535), facts=H100).seeds(4)
    assert odd[0][0] == GroupConfig.of("cluster_row", threads=512, vec=1, cluster=4)
    assert odd[1][0] == GroupConfig.of("block_row", threads=512, vec=1, items=0)
    big = TemplateKernels.for_task(_softmax_task(tmp_path, 4096, 393216), facts=H100).seeds(4)
    assert big[0][0].variant == "block_row"
    assert big[1][0] == GroupConfig.of("cluster_row", threads=512, vec=4, cluster=8)
    few = TemplateKernels.for_task(_softmax_task(tmp_path, 16, 393216), facts=H100).seeds(4)
    assert all(seed[0].variant != "cluster_row" for seed in few)
    short = TemplateKernels.for_task(_softmax_task(tmp_path, 1 << 20, 512), facts=H100)
    assert all(seed[0].variant != "cluster_row" for seed in short.seeds(4))
    total = write_task(
        tmp_path, "row_sum", task_text([{"N": 4096, "L": 393216}], "x\nreturn x.sum(dim=1)", "[torch.randn(N, L)]")
    )
    assert all("cluster_row" not in space.variants for space in TemplateKernels.for_task(total, facts=H100).spaces)
    off_hopper = TemplateKernels.for_task(_softmax_task(tmp_path, 4096, 393216), facts=DeviceFacts(arch="sm_80"))
    assert all("cluster_row" not in space.variants for space in off_hopper.spaces)


@needs_gxx
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_clustered_rows_match_torch_on_the_emulator(tmp_path: Path, name: str) -> None:
    units = _units(tmp_path, [name], CONFIGS)
    units += [(task, f"{label} uncached", _uncached(code)) for task, label, code in units[:1]]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=2e-5)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_half_precision_rows_match_torch_on_the_emulator(tmp_path: Path) -> None:
    """bfloat16 rows: packs of 8 from the held segment, the statistics in float."""
    kernels = planned(_task(tmp_path, "softmax", "bfloat16"))
    config = GroupConfig.of("cluster_row", threads=256, vec=8, cluster=4)
    units = [(kernels.task, config.label(), with_variant(kernels, config).code)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-2)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_a_kernel_missing_a_merge_a_shift_or_a_wait_fails(tmp_path: Path) -> None:
    """Not vacuous: the cluster's partials must all be merged, each segment land where its reads look, and the
    first pass wait for each piece it reads."""
    task, label, code = _units(tmp_path, ["l2_normalize"], CONFIGS[:1])[0]
    alone = code.replace("q < 4u;", "q < 1u;")
    unshifted = code.replace("h0 = mis / sizeof(float);", "h0 = 0;")
    unwaited = code.replace("optiml_mbar_wait(bar + 8 * k, phase);", "if (k == 0) optiml_mbar_wait(bar, phase);")
    assert alone != code and unshifted != code and unwaited != code
    for broken in (alone, unshifted, unwaited):
        assert emulator_mismatches(tmp_path / "emu", [(task, label, broken)], seed=3, tol=2e-5)


@pytest.mark.gpu
def test_clustered_rows_verify_on_the_gpu(tmp_path: Path) -> None:
    """The emulator's programs and configurations through the harness on a real GPU (sm_90), planned for it."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("no CUDA GPU with thread-block clusters")
    tasks = {name: _task(tmp_path, name) for name in PROGRAMS}
    tasks["softmax_bf16"] = _task(tmp_path, "softmax", "bfloat16")
    configs = [*CONFIGS, GroupConfig.of("cluster_row", threads=512, vec=4, cluster=8)]
    cases = [(name, config) for name in PROGRAMS for config in configs]
    cases.append(("softmax_bf16", GroupConfig.of("cluster_row", threads=256, vec=8, cluster=4)))

    def render(name: str, config: GroupConfig) -> KernelSource:
        return with_variant(TemplateKernels.for_task(tasks[name]), config)

    failures = gpu_failures(tasks, cases, render, tmp_path)
    assert not failures, "\n".join(failures)
