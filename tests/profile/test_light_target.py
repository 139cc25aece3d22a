"""The torch-free profile target and the case it runs on (the GPU run itself is in test_profile_target)."""

from __future__ import annotations

import array
import base64
import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from profile_data import SRC

from optiml.evaluate.abi import OptimlTensor
from optiml.kernel.compile_sandbox import toolkit_root
from optiml.kernel.compiler import find_nvcc, include_dir
from optiml.profile.case_dump import dump_case
from optiml.profile.light_target import MANIFEST

ROOT = SRC.parent
LIGHT = SRC / "optiml" / "profile" / "light_target.py"


def test_the_case_holds_the_harness_structs_and_the_input_bytes(tmp_path: Path) -> None:
    manifest = dump_case(str(ROOT / "tasks" / "layernorm.py"), 1000, 0, tmp_path, device="cpu")
    assert json.loads((tmp_path / MANIFEST).read_text()) == manifest
    size = ctypes.sizeof(OptimlTensor)
    assert manifest["entry_bytes"] == size
    devices = [e for e in manifest["inputs"] if e["data"] == "device"]
    assert devices and sum(e["bytes"] for e in devices) == manifest["input_bytes"]
    for entry in devices:
        assert (tmp_path / entry["file"]).stat().st_size == entry["bytes"]
        struct = OptimlTensor.from_buffer_copy(base64.b64decode(entry["struct"]))
        numel = 1
        for d in range(struct.ndim):
            numel *= struct.shape[d]
        assert numel > 0 and struct.stride[struct.ndim - 1] == 1  # contiguous, as the harness hands them
    [output] = manifest["outputs"]
    assert output["bytes"] == manifest["output_bytes"]


def test_host_scalars_travel_as_their_bytes(tmp_path: Path) -> None:
    task = tmp_path / "scaled.py"
    task.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x, alpha: float):\n"
        "        return x * alpha\n"
        "def get_inputs():\n"
        "    return [torch.rand(8, 4), 2.5]\n"
        "def get_init_inputs():\n"
        "    return []\n"
    )
    manifest = dump_case(str(task), 1000, 0, tmp_path / "case", device="cpu")
    scalar = manifest["inputs"][1]
    assert scalar["data"] == "host"
    assert ctypes.c_double.from_buffer_copy(base64.b64decode(scalar["host"])).value == 2.5


def test_the_light_target_imports_neither_torch_nor_optiml() -> None:
    code = (
        f"import runpy, sys; sys.argv = ['x', '--help']\n"
        f"try:\n    runpy.run_path({str(LIGHT)!r}, run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'optiml')))"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stderr


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="a GPU is visible")
def test_without_a_gpu_it_fails_in_one_line(tmp_path: Path) -> None:
    dump_case(str(ROOT / "tasks" / "silu.py"), 1000, 0, tmp_path / "case", device="cpu")
    report = tmp_path / "events.jsonl"
    argv = [sys.executable, "-I", "-S", str(LIGHT), "--case", str(tmp_path / "case"), "--so", "x.so"]
    proc = subprocess.run(
        [*argv, "--report", str(report)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    [event] = [json.loads(line) for line in report.read_text().splitlines()]
    assert event["event"] == "error" and "\n" not in event["error"]


SCALED_TASK = (
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x, alpha: float):\n"
    "        return x * alpha\n"
    "def get_inputs():\n"
    "    return [torch.rand(64, 32), 2.5]\n"
    "def get_init_inputs():\n"
    "    return []\n"
)


def _gcc(out: Path, source: Path, *extra: str) -> Path:
    root = toolkit_root(find_nvcc())
    assert root is not None
    cuda_include = root / "include"
    cmd = ["gcc", "-shared", "-fPIC", "-O1", f"-I{include_dir()}", f"-I{cuda_include}", *extra, "-o", str(out)]
    subprocess.run([*cmd, str(source)], check=True, capture_output=True, text=True)
    return out


def _fake_gpu_and_case(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    """The stand-in libcuda.so.1's folder, a candidate built for it, and a case of SCALED_TASK (in
    ``tmp_path/case``) with its manifest."""
    data = Path(__file__).resolve().parent / "data"
    lib = tmp_path / "lib"
    lib.mkdir()
    _gcc(lib / "libcuda.so.1", data / "fake_libcuda.c")
    candidate = _gcc(tmp_path / "candidate.so", data / "host_candidate.c")
    task = tmp_path / "scaled.py"
    task.write_text(SCALED_TASK)
    manifest = dump_case(str(task), 1000, 0, tmp_path / "case", device="cpu")
    return lib, candidate, tmp_path / "case", manifest


@pytest.mark.nvcc  # the CUDA headers come with nvcc
def test_the_protocol_end_to_end_on_a_host_memory_driver(tmp_path: Path) -> None:
    """light_target.py against a stand-in libcuda.so.1 (host memory) and a candidate built for it: the
    structs are relocated onto filled buffers, scalars keep their bytes, the workspace is asked with
    shapes only, outputs are poisoned, each entry gets a marker inside start/stop, failures are events."""
    lib, candidate, case, manifest = _fake_gpu_and_case(tmp_path)
    x = array.array("f", (case / manifest["inputs"][0]["file"]).read_bytes())
    log, report = tmp_path / "driver.log", tmp_path / "events.jsonl"
    env = {"LD_LIBRARY_PATH": str(lib), "FAKE_CUDA_LOG": str(log), "PATH": os.environ.get("PATH", "")}
    argv = [sys.executable, "-I", "-S", str(LIGHT), "--case", str(case), "--so", str(candidate)]
    argv += ["--so", str(tmp_path / "missing.so"), "--report", str(report)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in report.read_text().splitlines()]
    assert [e["event"] for e in events] == ["case", "failed", "profiling", "profiled", "done"]
    assert events[0]["device"] == "Fake GPU" and events[1]["label"] == "candidate 1"
    expected = f"sum {sum(v * 2.5 for v in x):.4f}"
    lines = log.read_text().split()
    assert " ".join(lines) == f"{expected} start marker {expected} stop"  # warm-up, then the profiled call


@pytest.mark.nvcc
def test_a_failing_call_is_an_event_not_a_crash(tmp_path: Path) -> None:
    lib, candidate, _, _ = _fake_gpu_and_case(tmp_path)
    env = {"LD_LIBRARY_PATH": str(lib), "FAKE_CUDA_LOG": str(tmp_path / "log"), "FAIL": "1"}
    report = tmp_path / "events.jsonl"
    argv = [sys.executable, "-I", "-S", str(LIGHT), "--case", str(tmp_path / "case"), "--so", str(candidate)]
    proc = subprocess.run([*argv, "--report", str(report)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in report.read_text().splitlines()]
    assert events[1] == {"event": "failed", "index": 0, "label": "candidate 0", "error": "optiml_forward returned 5"}


@pytest.mark.nvcc
def test_with_a_gate_nothing_of_a_candidate_runs_before_its_turn(tmp_path: Path) -> None:
    """--gate: the target says 'ready' once the case is up, and loads and calls no candidate (no warm-up,
    no marker) until the gate file exists; then it carries on as without one."""
    lib, candidate, _, _ = _fake_gpu_and_case(tmp_path)
    log, report, gate = tmp_path / "driver.log", tmp_path / "events.jsonl", tmp_path / "turn"
    env = {"LD_LIBRARY_PATH": str(lib), "FAKE_CUDA_LOG": str(log), "PATH": os.environ.get("PATH", "")}
    argv = [sys.executable, "-I", "-S", str(LIGHT), "--case", str(tmp_path / "case"), "--so", str(candidate)]
    proc = subprocess.Popen([*argv, "--report", str(report), "--gate", str(gate)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while '"ready"' not in (report.read_text() if report.exists() else ""):
            assert proc.poll() is None and time.monotonic() < deadline, "the target never said it was ready"
            time.sleep(0.01)
        time.sleep(0.3)
        assert proc.poll() is None  # waiting for its turn
        assert not log.exists()  # no call, no marker, no profiler range yet
        gate.touch()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    events = [json.loads(line)["event"] for line in report.read_text().splitlines()]
    assert events == ["case", "ready", "profiling", "profiled", "done"]
    calls = " ".join(log.read_text().split())
    assert calls.startswith("sum ") and " start marker sum " in calls and calls.endswith(" stop")  # warm-up first
