"""benchmarks/sandbox_cuda_probe.py without a GPU: a stand-in CUDA runtime (two exported functions that return
success) started in each of the probe's setups, so the plumbing — above all the nested start from inside the
worker's sandbox, as the judge starts candidates — is exercised where CI runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from benchmark_scripts import benchmark_module
from optiml.integrity.candidate_sandbox import candidate_view, probe_candidate_isolation
from optiml.integrity.sandbox import probe_isolation

pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc"),
    pytest.mark.skipif(not probe_candidate_isolation().isolated, reason=probe_candidate_isolation().note),
]

STAND_IN = """
#include <stddef.h>
int cudaSetDevice(int device) { return 0; }
int cudaMemGetInfo(size_t* free, size_t* total) { *free = 1; *total = 2; return 0; }
"""


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return benchmark_module("sandbox_cuda_probe")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("cudart")
    (folder / "cudart.c").write_text(STAND_IN)
    library = folder / "libcudart_standin.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(folder / "cudart.c")], check=True)
    return str(library)


@pytest.mark.parametrize("mode", ["unconfined", "sandboxed", "nested"])
def test_each_setup_starts_the_runtime_and_says_what_it_saw(script: ModuleType, runtime: str, mode: str) -> None:
    if mode == "nested" and not probe_isolation().unshare_jail:
        pytest.skip("the worker's jail (unshare) is not available here")
    view = candidate_view(str(Path(script.__file__)), runtime)
    row = script.start(runtime, mode, view if mode != "unconfined" else ())
    assert row["rc"] == 0 and row["mem_info_rc"] == 0, row
    if mode == "unconfined":
        assert row["seen"]["/proc"] > 2  # the host's processes
    else:  # only the view's few device nodes, and a /proc of its own (empty without one: CUDA's 304)
        assert row["seen"]["/dev"] <= 9, row
        assert row["seen"]["/proc"] > 0, row
