"""The exports' C++ launcher (issue 19) on the CPU: a host stand-in for the kernel library stands where the GPU
kernel would, so signature matching, descriptor copies, outputs, workspace, scalars and errors are checked
without a GPU. The GPU path (CUDA device guard, current stream) runs in test_export_gpu.py.

Building the launcher needs a C++ compiler and ninja (torch's load_inline), about 45 s once per torch build;
the tests skip without them.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import warnings
from pathlib import Path
from types import ModuleType

import pytest
import torch
from export_helpers import TASKS, import_file, write

from optiml.export.kernelbench import render_model_new
from optiml.kernel.source import KernelSource
from optiml.task import load_task

# The OptiML ABI 2 descriptor, and a kernel computing y = x * scale (+ offset from the workspace) on the host.
STAND_IN = r"""
#include <stdint.h>
#include <stddef.h>
typedef struct {
  void* data; int64_t shape[8]; int64_t stride[8]; int32_t ndim; int32_t dtype; int32_t memory; int32_t reserved;
} OptimlTensor;

size_t stand_in_slot_bytes(void) { return sizeof(OptimlTensor); }

int optiml_forward(const OptimlTensor* in, int n_in, OptimlTensor* out, int n_out, void* workspace,
                   size_t workspace_bytes, void* stream) {
  if (n_in != 2 || n_out != 1 || stream != NULL) return 9;
  if (in[1].memory != 1 || in[1].dtype != 3) return 8;
  if (workspace_bytes && workspace == NULL) return 7;
  const float* x = (const float*)in[0].data;
  float* y = (float*)out[0].data;
  double scale = *(const double*)in[1].data;
  int64_t n = 1;
  for (int d = 0; d < in[0].ndim; ++d) n *= in[0].shape[d];
  if (n > 0 && x[0] != x[0]) return 3;  /* NaN first: the "kernel" reports a failure */
  for (int64_t i = 0; i < n; ++i) y[i] = (float)(x[i] * scale) + (workspace_bytes ? 1.0f : 0.0f);
  return 0;
}
"""


def _toolchain_missing() -> str | None:
    for tool in ("g++", "ninja"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (the launcher is built with torch's load_inline)"
    return None


pytestmark = pytest.mark.skipif(_toolchain_missing() is not None, reason=str(_toolchain_missing()))


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """A rendered export (layernorm's ModelNew), whose runtime holds ArgumentBlock and the launcher."""
    task = load_task(TASKS / "layernorm.py")
    text = render_model_new(task, KernelSource.from_file(TASKS / "layernorm.naive.cu"))
    return import_file(write(tmp_path_factory.mktemp("export"), "layernorm_model_new.py", text))


@pytest.fixture(scope="module")
def launcher(export: ModuleType) -> ModuleType:
    """Built as an export builds it; with a CUDA build of torch that needs torch to find a CUDA toolkit, with or
    without a GPU (none is needed: the launcher is host code)."""
    missing = export._launcher_toolchain_missing(bool(torch.version.cuda))
    if missing is not None:
        pytest.skip(f"the C++ launcher cannot be built here: {missing}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed build warns: here that is a failure
        fast = export.cpp_launcher()
    assert fast is not None
    return fast


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    folder = tmp_path_factory.mktemp("stand_in")
    (folder / "stand_in.c").write_text(STAND_IN)
    subprocess.run(
        ["g++", "-x", "c", "-shared", "-fPIC", "-O1", "-o", str(folder / "stand_in.so"), str(folder / "stand_in.c")],
        check=True,
    )
    library = ctypes.CDLL(str(folder / "stand_in.so"))
    library.stand_in_slot_bytes.restype = ctypes.c_size_t
    return library


def block_for(export: ModuleType, library: ctypes.CDLL, values: list, workspace_bytes: int = 0) -> object:
    """An argument block for ``values`` on the CPU whose 'kernel' is the stand-in (a GPU block loads nvcc's)."""
    first = values[0]
    block = export.ArgumentBlock(values, [(tuple(first.shape), torch.float32)], torch.device("cpu"))
    block.library, block.workspace_bytes = library, workspace_bytes
    return block


def test_the_stand_in_has_the_exports_descriptor_layout(export: ModuleType, stand_in: ctypes.CDLL) -> None:
    assert stand_in.stand_in_slot_bytes() == ctypes.sizeof(export._OptimlTensor)


def test_a_registered_signature_is_launched_from_cpp(export: ModuleType, launcher: ModuleType, stand_in) -> None:
    owner = 101
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    block = block_for(export, stand_in, [x, 2.5])
    launcher.add(owner, block, *block.launch_spec())
    assert launcher.count(owner) == 1
    y = launcher.call(owner, [x, 2.5])
    torch.testing.assert_close(y, x * 2.5)
    other = torch.randn(3, 4)  # new data, same signature: the same block, the new data pointer
    torch.testing.assert_close(launcher.call(owner, [other, 2.5]), other * 2.5)
    assert launcher.call(owner, [x, 2.5]) is not y  # a fresh output per call
    launcher.forget(owner)
    assert launcher.count(owner) == 0 and launcher.call(owner, [x, 2.5]) is None


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([torch.ones(3, 5), 2.5], id="shape"),
        pytest.param([torch.ones(3, 4, dtype=torch.float64), 2.5], id="dtype"),
        pytest.param([torch.ones(4, 3).t(), 2.5], id="layout"),
        pytest.param([torch.ones(3, 4), 3.5], id="scalar-value"),
        pytest.param([torch.ones(3, 4), 2], id="scalar-type"),
        pytest.param([torch.ones(3, 4)], id="count"),
        pytest.param([2.5, torch.ones(3, 4)], id="kinds"),
        pytest.param([torch.ones(3, 4, device="meta"), 2.5], id="device"),
    ],
)
def test_values_of_another_signature_are_left_to_python(export, launcher, stand_in, values: list) -> None:
    owner = 102
    block = block_for(export, stand_in, [torch.ones(3, 4), 2.5])
    launcher.add(owner, block, *block.launch_spec())
    try:
        assert launcher.call(owner, values) is None
        assert launcher.call(owner + 1, [torch.ones(3, 4), 2.5]) is None  # another owner's signatures are its own
    finally:
        launcher.forget(owner)


def test_a_non_contiguous_signature_passes_a_contiguous_copy(export, launcher, stand_in) -> None:
    owner = 103
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3).t()
    block = block_for(export, stand_in, [x, 2.0])
    launcher.add(owner, block, *block.launch_spec())
    try:
        torch.testing.assert_close(launcher.call(owner, [x, 2.0]), x * 2.0)
        assert launcher.call(owner, [x.contiguous(), 2.0]) is None  # the contiguous layout is another signature
    finally:
        launcher.forget(owner)


def test_several_signatures_and_replacement(export, launcher, stand_in) -> None:
    owner = 104
    small, large = torch.ones(2, 2), torch.ones(5, 7)
    for values in ([small, 1.5], [large, 1.5]):
        block = block_for(export, stand_in, values)
        launcher.add(owner, block, *block.launch_spec())
    launcher.add(owner, block, *block.launch_spec())  # the same Python block again replaces its entry
    try:
        assert launcher.count(owner) == 2
        torch.testing.assert_close(launcher.call(owner, [small, 1.5]), small * 1.5)
        torch.testing.assert_close(launcher.call(owner, [large, 1.5]), large * 1.5)
    finally:
        launcher.forget(owner)


def test_workspace_and_kernel_errors(export, launcher, stand_in) -> None:
    owner = 105
    x = torch.ones(3, 4)
    block = block_for(export, stand_in, [x, 2.0], workspace_bytes=64)
    launcher.add(owner, block, *block.launch_spec())
    try:
        torch.testing.assert_close(launcher.call(owner, [x, 2.0]), x * 2.0 + 1.0)  # the workspace was passed
        with pytest.raises(RuntimeError, match=r"ModelNew \(layernorm\): the kernel returned 3"):
            launcher.call(owner, [torch.full((3, 4), float("nan")), 2.0])
    finally:
        launcher.forget(owner)


def test_without_ninja_the_export_warns_and_calls_through_ctypes(
    export: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A launcher the toolchain cannot build (here: no ninja on PATH, and a source no process has built) is a
    warning and None, never an error: the ctypes path needs none of it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(export, "LAUNCHER_SOURCE", export.LAUNCHER_SOURCE + "\n// another build\n")
    monkeypatch.setattr(export, "_LAUNCHER", [])
    with pytest.warns(UserWarning, match="cannot be built here: ninja is not installed.*calls go through ctypes"):
        assert export.cpp_launcher() is None
    assert export._LAUNCHER == [None]  # decided once per export


def test_ctypes_can_be_chosen(export: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIML_EXPORT_LAUNCHER", "ctypes")
    monkeypatch.setattr(export, "_LAUNCHER", [])
    assert export.cpp_launcher() is None
