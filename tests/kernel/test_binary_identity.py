"""Binary digests from real nvcc builds: equal code → equal digest, any code change → a new one."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.kernel.test_compiler import SCALE

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.identity import IdentityError, elf_sections, host_flags
from optiml.kernel.source import KernelSource

pytestmark = pytest.mark.nvcc


@pytest.fixture(scope="module")
def digests(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path_factory.mktemp("cache")))
    variants = {
        "base": KernelSource(SCALE),
        # equal code: the lines move, an unused macro appears, a comment changes the source hash
        "moved": KernelSource("// a new first line moves every line of -lineinfo\n#define UNUSED 7\n" + SCALE),
        # host code only: the launch's block size (the kernel reads blockDim, so its SASS is unchanged)
        "host": KernelSource(SCALE.replace("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 128")),
        # device code only
        "device": KernelSource(SCALE.replace("2.0f * x[i]", "3.0f * x[i]")),
        # a flag that changes the device code, and one that changes only host code
        "ptxas": KernelSource(SCALE, flags=("-Xptxas", "-dlcm=cg")),
        "host_flag": KernelSource(SCALE, flags=("-Xcompiler", "-O0")),
    }
    results = compiler.compile_many(list(variants.values()))
    assert all(r.ok for r in results), [r.error_summary() for r in results]
    return {name: r.binary_digest for name, r in zip(variants, results, strict=True)}


def test_equal_code_gets_the_same_digest(digests: dict[str, str]) -> None:
    assert digests["base"] and digests["moved"] == digests["base"]


@pytest.mark.parametrize("variant", ["host", "device", "host_flag"])
def test_a_change_of_host_or_device_code_gets_a_new_digest(digests: dict[str, str], variant: str) -> None:
    assert digests[variant] != digests["base"]


def test_the_build_folder_does_not_matter(tmp_path: Path) -> None:
    first = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "a")).compile(KernelSource(SCALE))
    second = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "elsewhere")).compile(KernelSource(SCALE))
    assert first.binary_digest == second.binary_digest
    assert Path(str(first.so_path)).read_bytes() != Path(str(second.so_path)).read_bytes()  # why a digest is needed


def test_intermediates_are_not_kept(tmp_path: Path) -> None:
    result = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path)).compile(KernelSource(SCALE))
    entry = Path(str(result.so_path)).parent
    assert sorted(p.name for p in entry.iterdir()) == ["kernel.cu", "kernel.so", "result.json"]


def test_device_only_flags_are_left_to_the_cubin() -> None:
    flags = ["-Xptxas", "-dlcm=cg", "-DN=4", "--use_fast_math", "-Xcompiler", "-O0", "-O2", "-maxrregcount", "32"]
    assert host_flags(flags) == ["-Xcompiler", "-O0", "-O2"]


def test_a_file_that_is_not_elf_is_refused() -> None:
    with pytest.raises(IdentityError):
        list(elf_sections(b"not an elf file at all, clearly" * 4))


@pytest.mark.gpu
def test_the_evaluator_reuses_the_verdict_of_an_equal_binary(tmp_path: Path) -> None:
    from optiml.evaluate.evaluator import Evaluator
    from optiml.task import load_task

    root = Path(__file__).resolve().parents[2]
    task = load_task(root / "tasks" / "silu.py")
    assert task.naive_kernel_path is not None
    naive = KernelSource.from_file(task.naive_kernel_path)
    same = naive.with_code("// moved down a line\n#define UNUSED_KNOB 3\n" + naive.code)
    compiler = Compiler(CompilerConfig(cache_dir=tmp_path / "kernels"))
    with Evaluator(task, compiler=compiler) as evaluator:
        first, second = evaluator.evaluate_many([naive, same])
    assert first.ok, first.message
    assert second.kernel_digest == same.digest != first.kernel_digest
    assert second.timing == first.timing and second.status is first.status
    assert any("same binary as" in w for w in second.warnings)
    assert set(second.phase_seconds) <= {"compile", "total"}
