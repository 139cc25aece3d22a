"""Ctrl-C ends a command and everything it started (issue 40): real processes, a real SIGINT.

The sandboxed nvcc leads a session of its own and, under ``unshare``, its cudafe++ and cicc live in a pid
namespace of their own: a terminal's Ctrl-C reaches only ``optiml``. The command must still end within 2 s
with every descendant gone. A compile's memory is bounded for all its processes together.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optiml.integrity.children import descendants, resident_bytes
from optiml.kernel import compile_sandbox

ROOT = Path(__file__).resolve().parents[2]

#: a kernel whose front ends take a minute: 16 × 32 × 64 template instantiations
SLOW = r"""
#include "optiml.h"
template <int A, int B> struct P { static __device__ __forceinline__ float h(float x) { return x * (A + 1) + B; } };
template <int A, int... B> __device__ __forceinline__ float row(float x, int j) {
  float r = 0; ((r += (j == B ? P<A, B>::h(x) : 0.f)), ...); return r; }
template <int... A> struct Rows { static __device__ float go(float x, int i, int j) { float r = 0;
  ((r += (i == A ? row<A, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,
  32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63>(x, j) : 0.f)), ...);
  return r; } };
template <int K> __global__ void k(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = Rows<K+0,K+1,K+2,K+3,K+4,K+5,K+6,K+7,K+8,K+9,K+10,K+11,K+12,K+13,K+14,K+15,K+16,K+17,K+18,K+19,
  K+20,K+21,K+22,K+23,K+24,K+25,K+26,K+27,K+28,K+29,K+30,K+31>::go(y[i], i % 37, i % 61); }
template <int... K> void launch_all(float* y, int n, cudaStream_t s) {
  ((k<K * 32><<<(n + 255) / 256, 256, 0, s>>>(y, n)), ...); }
extern "C" OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int n_in, optiml_tensor* out, int n_out,
                                            void* ws, size_t wsb, cudaStream_t s) {
  int n = 1; for (int d = 0; d < out[0].ndim; ++d) n *= (int)out[0].shape[d];
  launch_all<0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15>((float*)out[0].data, n, s); return 0; }
"""


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


def _start_in_terminal_group(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """As a terminal starts a command: a process group of its own, SIGINT at its default (Python's handler)."""
    return subprocess.Popen(
        argv,
        process_group=0,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.mark.nvcc
def test_ctrl_c_during_a_compile_ends_the_command_and_the_compiler_within_two_seconds(tmp_path: Path) -> None:
    kernel = tmp_path / "slow.cu"
    kernel.write_text(SLOW)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    argv = [sys.executable, "-m", "optiml.cli", "eval", str(ROOT / "tasks" / "silu.py"), str(kernel), "--compile-only"]
    proc = _start_in_terminal_group(argv, env, tmp_path / "log.txt")
    try:
        deadline = time.monotonic() + 120
        compilers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            started = descendants(proc.pid)
            compilers = [pid for pid in started if any(t in _command_line(pid) for t in ("cicc", "cudafe++"))]
            if compilers:
                break
            time.sleep(0.1)
        assert compilers, f"no cicc/cudafe++ started: {(tmp_path / 'log.txt').read_text()[-2000:]}"
        time.sleep(0.5)  # well into the front ends
        started = descendants(proc.pid)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=10)
        took = time.monotonic() - sent
        while any(_alive(pid) for pid in started) and time.monotonic() - sent < 2.0:
            time.sleep(0.05)
        left = [_command_line(pid)[:120] for pid in started if _alive(pid)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130, (tmp_path / "log.txt").read_text()[-2000:]
    assert took <= 2.0, f"the command took {took:.2f} s to end after SIGINT"
    assert not left, f"still running 2 s after SIGINT: {left}"
    assert "interrupted" in (tmp_path / "log.txt").read_text()
    assert not list((tmp_path / "cache" / "optiml" / "kernels").glob("*/result.json")), "a stopped build was cached"


#: two processes that each hold ``MIB`` MiB for a few seconds: each alone is under the budget, both are over
TWO_HOLDERS = """
import subprocess, sys, time
hold = "x = bytearray({mib} << 20); x[::4096] = b'1' * len(x[::4096]); import time; time.sleep(8)"
children = [subprocess.Popen([sys.executable, "-c", hold]) for _ in range(2)]
for child in children: child.wait()
print("both finished")
"""


def test_a_compile_is_stopped_when_its_processes_together_pass_the_budget(tmp_path: Path) -> None:
    script = TWO_HOLDERS.format(mib=200)
    start = time.monotonic()
    run = compile_sandbox.run_tool(
        [sys.executable, "-c", script], tmp_path, (), 30, sandbox=False, memory_bytes=300 << 20
    )
    assert time.monotonic() - start < 6, "the compile ran on past its budget"
    assert run.returncode is None and not run.timed_out
    assert "all its processes together" in run.output and "both finished" not in run.output


def test_under_the_budget_a_compile_runs_to_its_end(tmp_path: Path) -> None:
    script = TWO_HOLDERS.format(mib=20).replace("time.sleep(8)", "time.sleep(0.5)")
    argv = [sys.executable, "-c", script]
    run = compile_sandbox.run_tool(argv, tmp_path, (), 30, sandbox=False, memory_bytes=1 << 30)
    assert run.returncode == 0 and "both finished" in run.output


def test_descendants_and_their_memory_are_found_through_proc(tmp_path: Path) -> None:
    script = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(5)'])"
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while not descendants(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(descendants(parent.pid)) == 1
        assert resident_bytes(parent.pid) > resident_bytes(descendants(parent.pid)[0]) > 1 << 20
    finally:
        parent.kill()
        parent.wait()


def test_ctrl_c_during_check_task_ends_the_command_and_its_check_process(tmp_path: Path) -> None:
    task = tmp_path / "slow_task.py"
    task.write_text(
        "import time\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        time.sleep(120)\n        return x\n\n\n"
        "def get_inputs():\n    return [torch.rand(4)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    argv = [sys.executable, "-m", "optiml.cli", "check-task", str(task)]
    proc = _start_in_terminal_group(argv, dict(os.environ), tmp_path / "log.txt")
    try:
        deadline = time.monotonic() + 120
        checking: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None and not checking:
            checking = [pid for pid in descendants(proc.pid) if "task_check" in _command_line(pid)]
            time.sleep(0.1)
        assert checking, (tmp_path / "log.txt").read_text()[-2000:]
        time.sleep(3)  # the check is in forward's sleep by now
        started = descendants(proc.pid)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=10)
        took = time.monotonic() - sent
        while any(_alive(pid) for pid in started) and time.monotonic() - sent < 2.0:
            time.sleep(0.05)
        left = [_command_line(pid)[:120] for pid in started if _alive(pid)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130 and took <= 2.0, f"exit {code} after {took:.2f} s"
    assert not left, f"still running 2 s after SIGINT: {left}"


#: silu whose kernel spins for about 20 s on the GPU before it writes its output
SPINNING = r"""
#include "optiml.h"
__global__ void spin_silu(const float* x, float* y, long n) {
  long long start = clock64();
  while (clock64() - start < 20LL * 1000 * 1000 * 1000) {}
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
extern "C" OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int n_in, optiml_tensor* out, int n_out,
                                            void* ws, size_t wsb, cudaStream_t s) {
  long n = 1; for (int d = 0; d < out[0].ndim; ++d) n *= out[0].shape[d];
  spin_silu<<<(unsigned)((n + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);
  return 0; }
"""


@pytest.mark.gpu
def test_ctrl_c_during_a_gpu_evaluation_ends_the_judge_and_the_candidate_within_two_seconds(tmp_path: Path) -> None:
    kernel = tmp_path / "spin.cu"
    kernel.write_text(SPINNING)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "optiml.cli", "eval", str(ROOT / "tasks" / "silu.py"), str(kernel)]
    proc = _start_in_terminal_group(argv, env, tmp_path / "log.txt")
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            if any("candidate_process" in _command_line(pid) for pid in descendants(proc.pid)):
                break
            time.sleep(0.1)
        time.sleep(2.0)  # the candidate is spinning on the GPU
        started = descendants(proc.pid)
        assert started, (tmp_path / "log.txt").read_text()[-2000:]
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent
        while any(_alive(pid) for pid in started) and time.monotonic() - sent < 2.0:
            time.sleep(0.05)
        left = [_command_line(pid)[:120] for pid in started if _alive(pid)]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 130 and took <= 2.0, f"exit {code} after {took:.2f} s"
    assert not left, f"still running 2 s after SIGINT: {left}"
