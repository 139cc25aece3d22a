"""A new user's first hour (issue 40), as a user meets it: real processes for what a terminal shows (timing,
pipes, help), CliRunner for messages. Cheap checks come before any work: no GPU, a swapped order, a missing file
are answered before torch is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from optiml.cli import app
from optiml.cli.preflight import PROPOSE_KINDS, SEARCH_PROPOSERS, STRATEGIES, gpu_missing

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
runner = CliRunner()
no_gpu = pytest.mark.skipif(gpu_missing() is None, reason="this machine has a GPU device")


def optiml(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``optiml ARGS`` in a process of its own, its output into pipes (not a terminal)."""
    merged = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "optiml.cli", *args], capture_output=True, text=True, env=merged, timeout=timeout
    )


def test_the_flags_choices_are_the_librarys() -> None:
    from optiml.search.config import STRATEGIES as LIBRARY_STRATEGIES
    from optiml.session import PROPOSER_CHOICES

    assert SEARCH_PROPOSERS == PROPOSER_CHOICES
    assert set(STRATEGIES) == set(LIBRARY_STRATEGIES)
    from optiml.propose.factory import make_proposer

    for kind in PROPOSE_KINDS:
        if kind != "llm":
            make_proposer(kind)  # every kind the CLI offers is one the library makes


@no_gpu
def test_eval_without_a_gpu_answers_within_three_seconds_and_imports_no_torch() -> None:
    start = time.monotonic()
    run = optiml("eval", str(TASKS / "silu.py"), str(TASKS / "silu.naive.cu"), env={"PYTHONVERBOSE": ""})
    took = time.monotonic() - start
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: no CUDA GPU is visible") and "--compile-only" in run.stderr
    assert took <= 3.0, f"eval took {took:.1f} s to say there is no GPU"


@no_gpu
def test_eval_json_without_a_gpu_prints_json() -> None:
    run = optiml("eval", str(TASKS / "silu.py"), str(TASKS / "silu.naive.cu"), "--json")
    assert run.returncode == 2
    reply = json.loads(run.stdout)
    assert reply["ok"] is False and reply["exit_code"] == 2 and "no CUDA GPU" in reply["error"]


def test_json_mode_prints_json_for_usage_errors_and_missing_files(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["eval", str(TASKS / "silu.py"), str(tmp_path / "none.cu"), "--json"])
    assert missing.exit_code == 2 and json.loads(missing.stdout)["error"].endswith("none.cu: no such kernel file")
    usage = optiml("eval", str(TASKS / "silu.py"), "--json")
    assert usage.returncode == 2 and "Missing argument 'KERNEL'" in json.loads(usage.stdout)["error"]


def test_task_and_kernel_swapped_says_the_order() -> None:
    result = runner.invoke(app, ["eval", str(TASKS / "silu.naive.cu"), str(TASKS / "silu.py")])
    assert result.exit_code == 2
    assert "swapped: the task comes first, then the kernel" in result.output
    assert f"give {TASKS / 'silu.py'} {TASKS / 'silu.naive.cu'}" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["propose", "T", "K", "--proposer", "magic"], "--proposer 'magic': choose one of heuristic, structural"),
        (["propose", "T", "K", "-n", "0"], "-n must be at least 1"),
        (["optimize", "T", "--proposer", "magic"], "--proposer 'magic': choose one of auto, heuristic, llm, mix"),
        (["optimize", "T", "--evals", "0"], "--evals must be at least 1"),
        (["optimize", "T", "--strategy", "magic"], "--strategy 'magic': choose one of"),
    ],
)
def test_bad_flag_values_are_refused_before_anything_loads(args: list[str], message: str) -> None:
    """The task and kernel do not even exist: the flag is what is wrong, and it is said first, in a second."""
    start = time.monotonic()
    run = optiml(*args)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert time.monotonic() - start < 3.0


def test_bare_optiml_prints_its_help_once() -> None:
    run = optiml()
    text = run.stdout + run.stderr
    assert text.count("Usage:") == 1 and "check-task" in text


def test_help_texts_flow_as_sentences() -> None:
    run = optiml("--help", env={"COLUMNS": "250"})
    line = next(line for line in run.stdout.splitlines() if "check-task" in line)
    assert "in a separate process with a timeout" in line  # one line at 250 columns: no break from the source


def test_piped_output_is_not_wrapped_at_80_columns(tmp_path: Path) -> None:
    deep = tmp_path / ("a_long_folder_name_" * 4) / ("another_long_folder_name_" * 3)
    deep.mkdir(parents=True)
    target = deep / "softmax_skeleton_with_a_long_name.cu"
    run = optiml("init-kernel", str(TASKS / "softmax.py"), "-o", str(target))
    assert run.returncode == 0, run.stderr
    assert f"wrote {target}" in run.stdout.splitlines()


def test_runs_on_an_empty_store_gives_a_hint(tmp_path: Path) -> None:
    from optiml.store import RunStore

    store = tmp_path / "runs.db"
    RunStore(store).close()
    result = runner.invoke(app, ["runs", "--store", str(store)])
    assert result.exit_code == 0
    assert "no runs yet" in result.output and "optiml optimize" in result.output


def _task(tmp_path: Path, name: str, inputs: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x * 2\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    return path


def test_a_task_no_gpu_can_hold_is_not_ok(tmp_path: Path) -> None:
    task = _task(tmp_path, "huge", "torch.rand(1000, 1000, 1000, 1000)")  # 4000 GB in, as much out
    result = runner.invoke(app, ["check-task", str(task)])
    assert result.exit_code == 2, result.output
    assert "8,000 GB" in result.output and "more than any GPU holds" in result.output
    assert "ok" not in result.output.split()


def test_a_task_over_max_bytes_is_marked_meta_only_with_its_tolerance_note(tmp_path: Path) -> None:
    task = _task(tmp_path, "big", "torch.rand(2000, 1000, 1000)")  # 8 GB in, 8 GB out
    result = runner.invoke(app, ["check-task", str(task)])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("ok on the meta device only")
    assert "whether atol must be tightened" in result.output


def test_a_full_check_out_of_memory_says_so(tmp_path: Path) -> None:
    task = _task(tmp_path, "oom", "torch.rand(100, 1000, 1000, 250)")  # 100 GB in: more than the check may hold
    result = runner.invoke(app, ["check-task", str(task), "--max-bytes", "600G"])
    assert result.exit_code == 2, result.output
    assert "ran out of memory checking the task at full size" in result.output
    assert "DefaultCPUAllocator" not in result.output and "get_inputs() failed" not in result.output


BROKEN = r"""
#include "optiml.h"
#define BLOCK 256
__global__ void k(const float* x, float* y, long n) {
  long i = blockIdx.x * BLOCK + threadIdx.x; if (i < n) y[i] = x[i] * undefined_thing; }
extern "C" OPTIML_EXPORT int optiml_forward(const optiml_tensor* in, int n_in, optiml_tensor* out, int n_out,
                                            void* ws, size_t wsb, cudaStream_t s) {
  long n = 1; for (int d = 0; d < out[0].ndim; ++d) n *= out[0].shape[d];
  k<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n); return 0; }
"""


@pytest.mark.nvcc
def test_proposals_for_a_kernel_that_does_not_compile_are_not_usable(tmp_path: Path, kernel_cache: Path) -> None:
    kernel = tmp_path / "broken.cu"
    kernel.write_text(BROKEN)
    result = runner.invoke(app, ["propose", str(TASKS / "silu.py"), str(kernel), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    assert "0 of 4 proposals usable" in result.output
    assert "does not compile" in result.output and "undefined_thing" in result.output
    assert f"no usable proposal: {kernel} does not build" in result.output


def _without_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OPTIML_LLM_") or name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            monkeypatch.delenv(name)


def test_the_no_llm_hint_says_a_local_server_needs_a_model_too(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_llm(monkeypatch)
    result = runner.invoke(app, ["generate", "row softmax"])
    assert result.exit_code == 2
    assert "OPTIML_LLM_BASE_URL=http://127.0.0.1:8000/v1 and OPTIML_LLM_MODEL" in result.output


def test_generate_no_verify_without_an_llm_says_it_needs_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_llm(monkeypatch)
    result = runner.invoke(app, ["generate", "x", "--reference", str(TASKS / "silu.py"), "--no-verify"])
    assert result.exit_code == 2
    assert result.output.startswith("error: --no-verify writes the LLM's candidate kernels: it needs an LLM")
    assert "GPU" not in result.output


def test_bench_tasks_selects_names_not_parts_of_names(tmp_path: Path) -> None:
    from optiml.bench.suite import discover_suite

    for name in ("silu", "silu_fp16", "swiglu_silu", "19_relu"):
        (tmp_path / f"{name}.py").write_text("# a task\n")
    assert [p.stem for p in discover_suite(str(tmp_path), "silu")] == ["silu"]
    assert [p.stem for p in discover_suite(str(tmp_path), "relu,*fp16")] == ["19_relu", "silu_fp16"]
    result = runner.invoke(app, ["bench", str(tmp_path), "--tasks", "swig"])
    assert result.exit_code == 2
    assert "no task is named 'swig' (names containing it: swiglu_silu; the glob '*swig*' selects them)" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["check-task", str(TASKS / "silu.py")],  # the check runs in its own process: torch is imported there
        ["eval", str(TASKS / "silu.naive.cu"), str(TASKS / "silu.py")],
        ["propose", str(TASKS / "silu.py"), str(TASKS / "silu.naive.cu"), "--proposer", "magic"],
    ],
    ids=["check-task", "eval-swapped", "propose-bad-flag"],
)
def test_these_commands_never_import_torch_in_the_optiml_process(args: list[str]) -> None:
    script = (
        "import sys\nfrom typer.testing import CliRunner\nfrom optiml.cli import app\n"
        f"result = CliRunner().invoke(app, {args!r})\nprint(result.exit_code, 'torch' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    code, imported = run.stdout.split()
    assert imported == "False", f"exit {code}: torch imported"


@pytest.mark.nvcc
def test_a_rejected_kernel_is_said_once_with_its_rule(tmp_path: Path, kernel_cache: Path) -> None:
    kernel = tmp_path / "spawns.cu"
    source = (TASKS / "silu.naive.cu").read_text()
    kernel.write_text(source.replace('#include "optiml.h"', '#include "optiml.h"\n#include <cstdlib>\n'
                                     'static int f() { return system("ls"); }', 1))  # fmt: skip
    result = runner.invoke(app, ["eval", str(TASKS / "silu.py"), str(kernel), "--compile-only"])
    assert result.exit_code == 1
    line = next(line for line in result.output.splitlines() if line.startswith("screening"))
    assert "rejected: [process-spawn] line" in line and "rejected by screening" not in line


def test_feedback_names_a_status_once() -> None:
    from optiml.values import EvalResult, EvalStatus

    rejected = EvalResult(status=EvalStatus.REJECTED, message="rejected by screening: [process-spawn] line 3")
    assert rejected.feedback() == "rejected by screening: [process-spawn] line 3"
    crashed = EvalResult(status=EvalStatus.CRASH, message="killed by SIGSEGV")
    assert crashed.feedback() == "crash: killed by SIGSEGV"
