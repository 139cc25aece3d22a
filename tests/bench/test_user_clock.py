"""The user's clock without a GPU: the child script run for real in a fresh process on the CPU (its CPU
mode: host clock, no L2 flush) with ModelNew stand-ins, KernelBench's verdict and its reasons, the
orchestrator's timeout, crash and parse handling, and the timing and comparison arithmetic."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from optiml.bench import user_clock_child as child
from optiml.bench.user_clock import (
    Prebuilt,
    ReadyProcess,
    UserClockOptions,
    UserClockResult,
    agreement,
    measure_files,
    measure_kernel,
    parse_line,
    seed_export_build,
)
from optiml.export.rendering import library_key
from optiml.kernel.source import KernelSource
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]
CPU = UserClockOptions(device="cpu", correct_trials=3, perf_trials=5, torch_compile=False, warm_windows=3, window_ms=2)

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return [64]
"""


def stand_in(tmp_path: Path, forward: str, name: str = "model_new.py") -> tuple[Path, Path]:
    """The task file and a ModelNew file (the task's source, then ``ModelNew(Model)`` with ``forward``)."""
    task = tmp_path / "task.py"
    task.write_text(TASK, encoding="utf-8")
    model_new = tmp_path / name
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    model_new.write_text(f"{TASK}\n\nclass ModelNew(Model):\n    def forward(self, x):\n{body}\n", encoding="utf-8")
    return task, model_new


def test_a_correct_model_new_passes_and_every_subject_is_timed(tmp_path: Path) -> None:
    task, model_new = stand_in(tmp_path, "return torch.clamp_min(x @ self.linear.weight.t() + self.linear.bias, 0)")
    result = measure_files("toy", task, model_new, CPU)
    assert result.error == "" and result.ok, result
    assert result.device == "cpu" and result.precision == "float32"
    verdict = result.verdict
    assert verdict is not None and verdict.passed and verdict.passed_trials == verdict.trials == 3
    assert verdict.tolerance == 1e-4 and verdict.max_abs_diff is not None and verdict.max_abs_diff < 1e-4
    assert set(result.timings) == {"model_new", "eager", "eager_tf32"}  # no compile: switched off
    for timing in result.timings.values():
        assert timing.error == "" and timing.cold is not None and timing.warm is not None
        assert timing.cold.trials == 5 and timing.warm.trials == 3 and timing.warm.calls_per_trial >= 1
        assert 0 < timing.cold.min_ms <= timing.cold.median_ms <= timing.cold.max_ms
    assert result.input_bytes == 32 * 64 * 4 and result.output_bytes == 32 * 64 * 4
    assert result.speedup("eager") == pytest.approx(result.ms("eager") / result.ms("model_new"))  # type: ignore[operator]
    assert result.ms("fastest") == result.ms("eager_tf32")  # without compile the defaults' eager is the fastest
    cold = result.timings["model_new"].cold
    assert cold is not None and agreement(2 * cold.median_ms, result) == pytest.approx(2.0)
    assert result.kernelbench_speedup is not None and result.kernelbench_speedup > 0
    phases = result.phases_s  # where the process's time went, each subject's phase after its own timing
    check = ["check_inputs", "check_reference", "check_model_new", "check_compare", "check_free"]
    assert list(phases) == [
        "import",
        "draw_inputs",
        "device",
        "load",
        *check,
        "inputs",
        "model_new",
        "eager_tf32",
        "eager",
    ]
    assert result.inputs_drawn_in_parallel == 0  # 8 KB sets: drawn in turn
    assert all(seconds >= 0 for seconds in phases.values()) and phases["import"] > 0
    assert sum(phases.values()) - phases["import"] <= result.wall_s + 0.05 <= result.process_s + 0.05
    again = UserClockResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result


def test_a_wrong_answer_fails_with_its_distance_from_both_references(tmp_path: Path) -> None:
    task, model_new = stand_in(tmp_path, "return torch.relu(self.linear(x)) * 1.01")
    result = measure_files("toy", task, model_new, CPU)
    verdict = result.verdict
    assert result.error == "" and verdict is not None and not verdict.passed and verdict.passed_trials == 0
    assert verdict.max_abs_diff is not None and verdict.max_abs_diff > 1e-3
    assert verdict.exact_max_abs_diff == pytest.approx(verdict.max_abs_diff, rel=0.5)
    assert verdict.default_vs_exact == 0.0  # on the CPU the default settings are exact
    assert "differs from the reference under PyTorch's default settings by" in verdict.reason
    assert "exact-fp32 reference by" in verdict.reason


@pytest.mark.parametrize(
    ("forward", "reason"),
    [
        ("return torch.relu(self.linear(x))[:, :10]", "Output shape mismatch: Expected (32, 64), got (32, 10)"),
        ("return torch.relu(self.linear(x)).double()", "output 0 is torch.float64; the reference's is torch.float32"),
        ("raise RuntimeError('illegal memory access')", "ModelNew raised: RuntimeError: illegal memory access"),
    ],
)
def test_failures_say_why(tmp_path: Path, forward: str, reason: str) -> None:
    task, model_new = stand_in(tmp_path, forward)
    result = measure_files("toy", task, model_new, CPU)
    assert result.verdict is not None and not result.verdict.passed
    assert result.verdict.reason.startswith(reason), result.verdict.reason


def test_kernelbench_casts_integer_inputs_and_the_verdict_says_so(tmp_path: Path) -> None:
    """KernelBench's harness casts every input tensor to the precision (its issue #151): an index input
    becomes a float and ``one_hot`` refuses it, in the reference itself. The timings do not cast."""
    source = (
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, idx):\n        return torch.nn.functional.one_hot(idx, 8).float()\n\n\n"
        "def get_inputs():\n    return [torch.randint(0, 8, (16,))]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    task = tmp_path / "onehot.py"
    task.write_text(source, encoding="utf-8")
    model_new = tmp_path / "onehot_new.py"
    model_new.write_text(source + "\n\nclass ModelNew(Model):\n    pass\n", encoding="utf-8")
    result = measure_files("onehot", task, model_new, CPU)
    assert result.verdict is not None and not result.verdict.passed
    assert "the reference fails under KernelBench's harness (KernelBench cast integer input(s) [0]" in (
        result.verdict.reason
    )
    # the clock is the user's: the indices stay integers, so the model and the reference are still timed
    for name in ("model_new", "eager", "eager_tf32"):
        timing = result.timings[name]
        assert timing.error == "" and timing.cold is not None, (name, timing.error)
    assert result.input_bytes == 16 * 8  # int64 indices, not cast to float32


def test_the_real_export_runs_in_the_child_and_refuses_cpu_tensors(tmp_path: Path) -> None:
    """The whole path with OptiML's own export: rendered, exec'd into a dict after KernelBench's
    TORCH_EXTENSIONS_DIR line, built under the same seed; on the CPU its forward says it needs CUDA."""
    task = load_task(ROOT / "tasks" / "silu.py")
    kernel = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    options = UserClockOptions(device="cpu", correct_trials=1, perf_trials=2, torch_compile=False, torch_op=True)
    result = measure_kernel(task, kernel, options)
    assert result.error == "" and result.verdict is not None and not result.verdict.passed
    assert "ModelNew raised: RuntimeError" in result.verdict.reason and "CUDA" in result.verdict.reason
    assert "the kernel runs on CUDA tensors" in (result.timings["op"].error or result.timings["model_new"].error)


def test_a_process_that_dies_is_one_line_and_a_hang_is_killed(tmp_path: Path) -> None:
    task, dies = stand_in(tmp_path, "import os\nos._exit(7)", "dies.py")
    result = measure_files("toy", task, dies, CPU)
    assert result.error.startswith("the user's process ended (exit status 7) without a result")
    assert "\n" not in result.error and result.verdict is None
    _, hangs = stand_in(tmp_path, "import time\ntime.sleep(60)", "hangs.py")
    begin = time.perf_counter()
    hung = measure_files("toy", task, hangs, UserClockOptions(device="cpu", timeout_s=8))
    assert hung.error == "the user's process timed out after 8 s"
    assert time.perf_counter() - begin < 30


def test_a_process_started_ahead_imports_torch_while_it_waits_for_its_spec(tmp_path: Path) -> None:
    """The bench starts the user's process with the task: by the time the judge is done, ``import torch`` is."""
    task, model_new = stand_in(tmp_path, "return torch.relu(self.linear(x))")
    with ReadyProcess(replace(CPU, correct_trials=1)) as ready:
        time.sleep(3.0)  # the judge's work
        assert ready.process.poll() is None and not ready.spec.exists()
        begin = time.perf_counter()
        result = measure_files("toy", task, model_new, ready=ready)
        waited = time.perf_counter() - begin
    assert result.ok and result.verdict is not None and result.verdict.passed_trials == 1, result
    # it was ready before its spec came (unless its import took the whole three seconds on a loaded machine)
    assert result.waited_s > 0.0 or result.phases_s["import"] > 2.5, (result.waited_s, result.phases_s)
    assert result.process_s == pytest.approx(waited, abs=0.5)  # from the spec on, not from the start
    assert result.phases_s["import"] > 0
    fresh = measure_files("toy", task, model_new, replace(CPU, correct_trials=1))
    assert fresh.ok and fresh.waited_s < 1.0  # started on demand: no wait


def test_a_process_started_ahead_draws_the_inputs_while_it_waits(tmp_path: Path) -> None:
    """Given the task, the process draws KernelBench's input sets before its spec comes; its spec's run uses them
    where they were drawn for the same task and draw, and draws anew where not."""
    task, model_new = stand_in(tmp_path, "return torch.relu(self.linear(x))")
    (tmp_path / "other").mkdir()
    other, _ = stand_in(tmp_path / "other", "return torch.relu(self.linear(x))")
    options = replace(CPU, correct_trials=2, parallel_input_bytes=0, draw_ahead_cores=1)
    with ReadyProcess(options, task_file=task) as ready:
        time.sleep(2.0)  # the judge's work
        drawn = measure_files("toy", task, model_new, ready=ready)
    assert drawn.ok and drawn.inputs_drawn_ahead and drawn.inputs_drawn_in_parallel == 3, drawn  # 2 trials, timing
    with ReadyProcess(options, task_file=other) as ready:  # drawn for another task: dropped, drawn again
        redrawn = measure_files("toy", task, model_new, ready=ready)
    assert redrawn.ok and not redrawn.inputs_drawn_ahead and redrawn.inputs_drawn_in_parallel == 3, redrawn
    assert drawn.verdict == redrawn.verdict  # the same sets either way: KernelBench's seeds
    with ReadyProcess(replace(options, draw_ahead_cores=0), task_file=task) as ready:  # none asked for
        turn = measure_files("toy", task, model_new, ready=ready)
    assert turn.ok and not turn.inputs_drawn_ahead


def test_the_draw_ahead_leaves_a_small_machine_s_cores_to_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    from optiml.bench.user_clock import draw_ahead_cores

    for cores, want in ((2, 0), (3, 0), (4, 2), (16, 8), (128, 64)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert draw_ahead_cores(UserClockOptions()) == want
    assert draw_ahead_cores(UserClockOptions(draw_ahead_cores=3)) == 3


def test_an_abandoned_draw_leaves_no_process_behind() -> None:
    drawing = child.start_drawing(_kernelbench_like_inputs, [1, 2, 3], min_bytes=0, cores=2)
    assert drawing is not None and len(drawing.children) == 2
    drawing.abandon()
    assert not any(_alive(pid) for pid in drawing.children)


def test_a_draw_at_the_lowest_priority_gives_the_same_sets() -> None:
    drawing = child.start_drawing(_kernelbench_like_inputs, [5, 6], min_bytes=0, nice=child.AHEAD_NICE)
    assert drawing is not None
    niced = drawing.finish()
    plain = child.draw_inputs(_kernelbench_like_inputs, [5, 6], min_bytes=0)
    for seed in (5, 6):
        assert all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            for a, b in zip(niced[seed], plain[seed], strict=True)
        )


def test_a_process_started_ahead_ends_without_its_spec(tmp_path: Path) -> None:
    ready = ReadyProcess(CPU)
    folder = ready.work
    ready.close()  # the task failed before its kernel was measured
    assert ready.process.poll() is not None and not folder.exists()
    # one whose starter dies without closing it stops waiting (no process left behind)
    starter = (
        "import sys, os\n"
        "from optiml.bench.user_clock import ReadyProcess, UserClockOptions\n"
        "ready = ReadyProcess(UserClockOptions(device='cpu'))\n"
        "print(ready.process.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, timeout=60, check=True)
    pid = int(out.stdout.strip())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    assert not _alive(pid), "the orphaned user's process kept waiting"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"))  # a zombie has ended


def test_a_missing_model_new_is_the_result_s_error(tmp_path: Path) -> None:
    task, _ = stand_in(tmp_path, "return x")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n", encoding="utf-8")
    result = measure_files("toy", task, empty, CPU)
    assert result.error == "loading the task or the export: KeyError: 'ModelNew'"
    assert not result.ok


def test_parse_line_takes_the_last_marker_line() -> None:
    first, last = {"a": 1}, {"a": 2, "x": float("nan")}
    text = f"build log\n{child.MARKER}{json.dumps(first)}\nnoise\n{child.MARKER}{json.dumps(last)}\n"
    parsed = parse_line(text)
    assert parsed is not None and parsed["a"] == 2 and math.isnan(parsed["x"])
    assert parse_line("no marker here\n") is None
    assert parse_line(f"{child.MARKER}{{not json\n") is None


def test_kernelbench_s_cold_timing_warms_up_discards_the_first_and_keeps_the_last_output() -> None:
    dev = child.Device("cpu")
    calls: list[int] = []

    def fn(x: int) -> list[int]:
        calls.append(x)
        time.sleep(0.002)
        return calls

    times = child.time_cold(fn, [1], dev, warmup=3, trials=4, discard=1)
    assert len(calls) == 3 + 4 + 1 and len(times) == 4
    assert all(t >= 2.0 for t in times)
    warm, per_window = child.time_warm(fn, [1], dev, windows=2, window_ms=10)
    assert len(warm) == 2 and per_window >= 2 and all(t >= 2.0 for t in warm)


def test_stats_are_numpy_s_population_spread() -> None:
    s = child.stats([1.0, 2.0, 3.0, 10.0], calls=4)
    assert s == {
        "median_ms": 2.5,
        "mean_ms": 4.0,
        "std_ms": pytest.approx(math.sqrt(((3**2) + (2**2) + (1**2) + (6**2)) / 4)),
        "min_ms": 1.0,
        "max_ms": 10.0,
        "trials": 4,
        "calls_per_trial": 4,
    }


def test_the_chunked_comparison_is_torch_allclose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(child, "CHUNK", 7)  # many chunks, a ragged last one
    generator = torch.Generator().manual_seed(0)
    expected = torch.randn(10, 13, generator=generator)
    for got in (
        expected.clone(),
        expected + 5e-5,
        expected + 2e-4 * torch.randn(10, 13, generator=generator),
        torch.where(expected > 2, torch.nan, expected),
    ):
        assert child.all_close(expected, got, 1e-4) == torch.allclose(expected, got, atol=1e-4, rtol=1e-4)
        worst = (expected.double() - got.double()).abs().max().item()
        diff = child.max_abs_diff(expected, got)
        assert (math.isnan(diff) and math.isnan(worst)) or diff == pytest.approx(worst)
    zeros, near = torch.zeros(5), torch.full((5,), 1.00005e-4)  # within tolerance only relative to the kernel's
    assert child.all_close(zeros, near, 1e-4) and not child.all_close(near, zeros, 1e-4)
    flags = torch.tensor([True, False, True])
    assert child.compare(flags, flags.clone(), 1e-4) == (True, 0.0, "")


def test_trial_seeds_are_kernelbench_s_draws() -> None:
    """KernelBench draws its trial seeds with torch.randint after torch.manual_seed(seed): 5 distinct
    32-bit seeds, the same every run, and the global generator left where those draws leave it."""
    seeds = child.trial_seeds(42, 5)
    torch.manual_seed(42)
    assert seeds == [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(5)]
    assert len(set(seeds)) == 5 and all(0 <= s < 2**32 for s in seeds)


def test_the_child_sees_the_gpu_the_judge_sees(tmp_path: Path) -> None:
    """visible_devices becomes the child's CUDA_VISIBLE_DEVICES, as the judge's worker gets its GPU."""
    check = "import os\nassert os.environ.get('CUDA_VISIBLE_DEVICES') == '7', os.environ.get('CUDA_VISIBLE_DEVICES')"
    task, model_new = stand_in(tmp_path, check + "\nreturn torch.relu(self.linear(x))")
    seen = measure_files("toy", task, model_new, replace(CPU, visible_devices="7", correct_trials=1))
    assert seen.verdict is not None and seen.verdict.passed, seen.verdict
    unset = measure_files("toy", task, model_new, replace(CPU, correct_trials=1))
    assert unset.verdict is not None and "AssertionError" in unset.verdict.reason


def test_a_failure_around_the_kernel_is_the_result_s_error_not_a_verdict(tmp_path: Path) -> None:
    """Out of memory building the inputs is not the kernel's fault: the result says so, in one line."""
    task, model_new = stand_in(tmp_path, "return torch.relu(self.linear(x))")
    broken = TASK.replace("return [torch.randn(32, 64)]", "raise RuntimeError('CUDA out of memory. Tried to allocate')")
    task.write_text(broken, encoding="utf-8")
    result = measure_files("toy", task, model_new, CPU)
    assert result.error == "KernelBench's check: RuntimeError: CUDA out of memory. Tried to allocate"
    assert result.verdict is None and not result.ok


def test_the_judge_s_build_is_seeded_where_the_export_looks_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = load_task(ROOT / "tasks" / "silu.py")
    kernel = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    judge_so = tmp_path / "judge.so"
    judge_so.write_bytes(b"\x7fELF the judge's build")
    assert seed_export_build(task, kernel, Prebuilt(judge_so, "sm_90a"))
    seeded = tmp_path / "cache" / "optiml" / "export" / library_key(task, kernel, "sm_90a") / "kernel.so"
    assert seeded.read_bytes() == judge_so.read_bytes()
    assert [p.name for p in seeded.parent.parent.iterdir()] == [seeded.parent.name]  # no half-made folder left
    judge_so.write_bytes(b"a later build")
    assert not seed_export_build(task, kernel, Prebuilt(judge_so, "sm_90a"))  # a build already there is kept
    assert seeded.read_bytes() == b"\x7fELF the judge's build"
    assert not seed_export_build(task, kernel, Prebuilt(tmp_path / "missing.so", "sm_80"))


def test_a_seeded_build_is_what_the_result_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU the child cannot load the kernel, but the result still says whose binary was offered."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    task = load_task(ROOT / "tasks" / "silu.py")
    kernel = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    judge_so = tmp_path / "judge.so"
    judge_so.write_bytes(b"\x7fELF")
    options = UserClockOptions(device="cpu", correct_trials=1, perf_trials=2, torch_compile=False)
    assert measure_kernel(task, kernel, options, prebuilt=Prebuilt(judge_so, "sm_90a")).binary == "judge"
    assert measure_kernel(task, kernel, options, prebuilt=Prebuilt(judge_so, "sm_90a")).binary == "export"


def _kernelbench_like_inputs() -> list:
    return [torch.randn(64, 33), torch.randint(0, 7, (5, 9)), torch.rand(4, 4) > 0.5, 3, torch.empty(0, 2)]


def test_parallel_draws_are_kernelbench_s_inputs_bit_for_bit() -> None:
    """Each seed's set, drawn by a forked process into shared memory, equals set_seed(seed); get_inputs()."""
    seeds = [11, 12, 13, 11]
    drawn = child.draw_inputs(_kernelbench_like_inputs, seeds, min_bytes=0)
    assert sorted(drawn) == [11, 12, 13]  # a repeated seed is drawn once
    for seed in (11, 12, 13):
        child.set_seed(seed)
        want = _kernelbench_like_inputs()
        got = drawn[seed]
        assert got[3] == 3 and len(got) == len(want)
        for a, b in zip(want, got, strict=True):
            if isinstance(a, torch.Tensor):
                assert b.dtype == a.dtype and b.shape == a.shape and torch.equal(a, b)


@pytest.mark.parametrize(
    "inputs",
    [
        lambda: [torch.randn(64, 64).t()],  # not dense as KernelBench passes it: drawn in turn instead
        lambda: [torch.randn(8, device="cpu")],  # a device named in the file
        lambda: [torch.randn(int(torch.randint(1, 9, (1,))))],  # a shape that depends on the draw
        lambda: [torch.ones(3).numpy()],  # not a tensor on the meta device
    ],
)
def test_sets_unlike_their_layout_are_drawn_in_turn(inputs) -> None:  # type: ignore[no-untyped-def]
    assert child.draw_inputs(inputs, [1, 2], min_bytes=0) == {}


def test_small_sets_are_drawn_in_turn() -> None:
    assert child.draw_inputs(_kernelbench_like_inputs, [1, 2]) == {}  # under PARALLEL_INPUT_BYTES


def test_the_check_with_parallel_draws_gives_the_same_verdict(tmp_path: Path) -> None:
    task, model_new = stand_in(tmp_path, "return torch.relu(self.linear(x)) * 1.01")  # fails: distances compared
    turn = measure_files("toy", task, model_new, CPU)
    parallel = measure_files("toy", task, model_new, replace(CPU, parallel_input_bytes=0))
    assert parallel.error == "" and parallel.inputs_drawn_in_parallel == 4  # three trials and the timing set
    assert turn.inputs_drawn_in_parallel == 0
    assert turn.verdict is not None and parallel.verdict is not None
    assert parallel.verdict.max_abs_diff == turn.verdict.max_abs_diff and not parallel.verdict.passed
    assert parallel.verdict.exact_max_abs_diff == turn.verdict.exact_max_abs_diff
