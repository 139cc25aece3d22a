"""The compiler as a file reader (issue 20, class 5): nvcc runs where only the toolkit exists.

Each candidate tries to embed a file from outside its build folder — by ``#include`` of an
absolute path, through a macro, by ``.incbin`` in host or device inline assembly, or another
candidate's source from the kernel cache. Screening is off (``Compiler.compile`` does not
screen), so the sandbox alone must stop them; the same sources built with ``sandbox=False``
succeed, which shows each read is real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.kernel.test_compiler import SCALE

from optiml.errors import ToolchainError
from optiml.integrity.sandbox import probe_view
from optiml.kernel import compile_sandbox
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource

pytestmark = pytest.mark.nvcc

SECRET = "optiml-secret-424242"
KEEP = "__attribute__((used)) static const char"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.h"
    path.parent.mkdir()
    path.write_text(f'"{SECRET}"\n')  # a C string literal, so #include can embed it
    return path


def _attacks(secret: Path, cache: Path) -> dict[str, str]:
    return {
        "include": f'{KEEP} stolen[] = \n#include "{secret}"\n;\n' + SCALE,
        "macro include": f'#define STOLEN "{secret}"\n{KEEP} stolen[] = \n#include STOLEN\n;\n' + SCALE,
        "host incbin": SCALE + f'\nasm(".section .rodata\\n.incbin \\"{secret}\\"\\n.previous");\n',
        "etc passwd": '#include "/etc/passwd"\n' + SCALE,
        "other candidate": f'#include "{cache}/victim/kernel.cu"\n' + SCALE,
    }


def _sandboxed(tmp_path: Path) -> Compiler:
    ok, why = probe_view()
    if not ok:
        pytest.skip(f"no compile sandbox on this host: {why}")
    return Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache", sandbox=True))


@pytest.mark.parametrize("attack", ["include", "macro include", "host incbin", "etc passwd", "other candidate"])
def test_reading_a_file_outside_the_build_folder_fails(tmp_path: Path, secret: Path, attack: str) -> None:
    compiler = _sandboxed(tmp_path)
    victim = tmp_path / "cache" / "victim"
    victim.mkdir(parents=True)
    (victim / "kernel.cu").write_text("// another candidate's source\n")
    result = compiler.compile(KernelSource(_attacks(secret, tmp_path / "cache")[attack]))
    assert not result.ok and result.sandbox in ("unshare+jail", "bwrap")
    assert "No such file" in result.log or "not found" in result.log, result.log


@pytest.mark.parametrize("attack", ["include", "host incbin"])
def test_without_the_sandbox_the_same_read_succeeds(tmp_path: Path, secret: Path, attack: str) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache", sandbox=False))
    result = compiler.compile(KernelSource(_attacks(secret, tmp_path / "cache")[attack]))
    assert result.ok and result.sandbox == "none", result.log
    assert SECRET.encode() in Path(str(result.so_path)).read_bytes()


def test_an_honest_kernel_builds_in_the_sandbox(tmp_path: Path) -> None:
    result = _sandboxed(tmp_path).compile(KernelSource(SCALE))
    assert result.ok and result.sandbox in ("unshare+jail", "bwrap"), result.log
    assert result.binary_digest


def test_the_view_holds_the_toolkit_and_headers_but_no_home_or_etc(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path))
    view = compiler.view
    root = compile_sandbox.toolkit_root(compiler.nvcc)
    assert root is not None and str(root) in view
    assert not any(p in ("/", "/etc", "/home", "/root", "/tmp", "/proc") for p in view)
    assert not any(p.startswith(str(Path.home())) and "include" not in p for p in view if p != "/")


def test_a_required_sandbox_that_is_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_sandbox, "sandbox_available", lambda: (False, "no mount namespaces here"))
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path, sandbox=True))
    with pytest.raises(ToolchainError, match="compile sandbox is required but unavailable here: no mount"):
        compiler.compile(KernelSource(SCALE))
    fallback = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "b"))
    assert fallback.compile(KernelSource(SCALE)).sandbox == "none"  # said, never silent


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_build_runs_nicer_than_the_process_that_times(tmp_path: Path, sandboxed: bool) -> None:
    """nvcc's builds yield the CPUs to the judge's clock (a compiled reference's launch is host-bound)."""
    import os
    import shutil

    nice = shutil.which("nice")
    if nice is None:
        pytest.skip("no nice(1) here")
    if sandboxed and not probe_view()[0]:
        pytest.skip("no compile sandbox on this host")
    view = compile_sandbox.compile_view(nice, []) if sandboxed else ()
    run = compile_sandbox.run_tool([nice], tmp_path, view, 60, sandbox=sandboxed)  # prints its niceness
    assert run.returncode == 0, run.output
    assert int(run.output.strip().splitlines()[-1]) == min(19, os.nice(0) + compile_sandbox.COMPILE_NICENESS)
