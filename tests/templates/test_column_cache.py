"""``col_cached``: a thread's column held in registers between the passes of a norm or softmax over an outer
dim (RMSNorm over the channels of NCHW reads its input once, not twice). Offered and seeded only where the
column is read more than once and fits; checked against torch on the CPU emulator, with a second shape set
whose column is longer than the cache (the kernel falls back to reading each pass)."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task
from optiml.templates.kernels import TemplateKernels

#: the first shape set's 16 channels fit the cache; the second's 80 do not (the cached condition fails at run time)
SHAPES = [{"B": 2, "C": 16, "H": 8, "W": 9}, {"B": 1, "C": 80, "H": 4, "W": 5}]
INPUTS = "[torch.randn(B, C, H, W)]"
CASES = {
    "rmsnorm_channels": "x\nreturn x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
    "softmax_channels": "x\nreturn torch.softmax(x, dim=1)",
    "centred_channels": (
        "x\nm = x.mean(dim=1, keepdim=True)\n"
        "return (x - m) * torch.rsqrt(((x - m) ** 2).mean(dim=1, keepdim=True) + 1e-5)"
    ),
}


def _task(tmp_path: Path, name: str, forward: str) -> Task:
    return write_task(tmp_path, name, task_text(SHAPES, forward, INPUTS))


def _cached_seeds(kernels: TemplateKernels) -> list[list]:
    return [configs for configs in kernels.seeds(4) if any(c.variant == "col_cached" for c in configs)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_column_read_in_several_passes_is_seeded_with_a_register_cache(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, CASES[name]))
    seeded = _cached_seeds(kernels)
    assert seeded, [[c.label() for c in s] for s in kernels.seeds(4)]
    cached = next(c for c in seeded[0] if c.variant == "col_cached")
    assert cached.get("items") == 16  # the 16 channels of the first shape set, one register each


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rule_reads_a_cached_column_with_64_threads_a_block(name: str, tmp_path: Path) -> None:
    """The planner's first choice (measured: 36_RMSNorm 10.9 ms against col's 13.2 ms), with plain col seeded."""
    seeds = planned(_task(tmp_path, name, CASES[name])).seeds(4)
    first = seeds[0][0]
    assert (first.variant, first.get("threads"), first.get("items")) == ("col_cached", 64, 16)
    assert any(c.variant == "col" and c.get("threads") == 256 for s in seeds for c in s)


def test_a_long_column_is_also_seeded_with_32_lanes(tmp_path: Path) -> None:
    long = [{"B": 4, "C": 1024, "H": 2, "W": 33}]
    kernels = planned(write_task(tmp_path, "sum_long", task_text(long, "x\nreturn x.sum(dim=1)", INPUTS)))
    labels = [c.label() for s in kernels.seeds(4) for c in s]
    assert "col_split(lanes=32,threads=1024)" in labels, labels
    many_short = [{"B": 64, "C": 16, "H": 64, "W": 64}]  # enough columns to fill the GPU a thread each
    short = planned(write_task(tmp_path, "sum_short", task_text(many_short, "x\nreturn x.sum(dim=1)", INPUTS)))
    short_labels = [c.label() for s in short.seeds(4) for c in s]
    assert short_labels[0] == "col(threads=256)" and "col_split(lanes=32,threads=1024)" not in short_labels


def test_a_column_read_once_gets_no_cache(tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, "sum_channels", "x\nreturn x.sum(dim=1)"))
    assert "col_cached" not in kernels.spaces[0].variants
    assert not _cached_seeds(kernels)


def test_a_column_longer_than_64_registers_gets_no_cache(tmp_path: Path) -> None:
    long = [{"B": 2, "C": 96, "H": 4, "W": 5}]
    text = task_text(long, CASES["rmsnorm_channels"], INPUTS)
    kernels = planned(write_task(tmp_path, "long", text))
    assert "col_cached" not in kernels.spaces[0].variants


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_cached_columns_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name, CASES[name]))
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in _cached_seeds(kernels)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-4)
    assert not failures, "\n".join(failures)
