"""The Profiler end to end with real processes standing in for ncu: attribution, and every way it degrades.

A fake ``ncu`` (a script on a temporary PATH) prints what the real one prints — a recorded CSV cut
into several candidates, or the real ERR_NVGPUCTRPERM text — or hangs; the profiler's own process
handling, parsing and attribution run for real.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from profile_data import multi_candidate_csv, plain_launch, read

from optiml.kernel.ptxas import parse_resources
from optiml.kernel.source import KernelSource
from optiml.profile.attribution import split_by_markers
from optiml.profile.ncu import PERMISSION_HINT, find_ncu, interpret
from optiml.profile.ncu_csv import parse_raw_csv
from optiml.profile.profiler import ProfileConfig, Profiler
from optiml.profile.roofline import datasheet_peaks
from optiml.task import Task, load_task
from optiml.values import CompileDiagnostic, CompileResult, EvalResult, EvalStatus, TimingStats

PERMISSION_ERROR = (
    "==PROF== Connected to process 9012 (/usr/bin/python3.12)\n"
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
    "on the target device 0. For instructions on enabling permissions and to get more information see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
    "==PROF== Disconnected from process 9012\n"
)

# The fake ncu: reads the target's arguments after "-m optiml.profile.target", writes the target's
# events, prints a prepared CSV. {plan} is a JSON file: {"csv": ..., "failed": {label: error}, "stop_after": n}.
FAKE_NCU = """#!{python}
import json, sys
plan = json.load(open({plan!r}))
args = sys.argv[sys.argv.index("optiml.profile.target") + 1:]
report = args[args.index("--report") + 1]
labels = ["candidate %d" % j for j in range(args.count("--so"))] + (["reference"] if "--reference" in args else [])
with open(report, "w") as events:
    events.write(json.dumps({{"event": "case", "input_bytes": 1000, "output_bytes": 24}}) + "\\n")
    profiled = 0
    for label in labels:
        if label in plan["failed"]:
            failed = {{"event": "failed", "index": 0, "label": label, "error": plan["failed"][label]}}
            events.write(json.dumps(failed) + "\\n")
            continue
        if plan["stop_after"] is not None and profiled == plan["stop_after"]:
            break
        events.write(json.dumps({{"event": "profiling", "index": 0, "label": label}}) + "\\n")
        profiled += 1
sys.stdout.write(plan["csv"])
sys.stderr.write(plan.get("stderr", ""))
sys.exit(plan.get("exit", 0))
"""


class FakeCompiler:
    """Stands in for the nvcc Compiler: every source 'compiles' to a named path unless it says BROKEN."""

    nvcc = None

    def compile(self, kernel: KernelSource) -> CompileResult:
        if "BROKEN" in kernel.code:
            error = CompileDiagnostic("error", 'expected a ";"', line=3)
            return CompileResult(False, None, kernel.digest, "sm_90", 0.1, False, diagnostics=(error,))
        resources = tuple(parse_resources(read("ptxas.txt")))
        return CompileResult(
            True, f"/nowhere/{kernel.digest}.so", kernel.digest, "sm_90", 0.1, False, resources=resources
        )

    def compile_many(self, kernels: Sequence[KernelSource]) -> list[CompileResult]:
        return [self.compile(k) for k in kernels]


@pytest.fixture
def task(tmp_path: Path) -> Task:
    path = tmp_path / "square.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\nN = 2048\nOPTIML = {'flops': '2*N*N*N'}\n"
        "class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
        "def get_inputs():\n    return [torch.randn(N, N), torch.randn(N, N)]\n"
        "def get_init_inputs():\n    return []\n",
        encoding="utf-8",
    )
    return load_task(path)


def kernel(tag: str) -> KernelSource:
    return KernelSource(code=f"// {tag}\nOPTIML_EXPORT int optiml_forward() {{ return 0; }}\n")


def install_ncu(folder: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ncu = folder / "ncu"
    ncu.write_text(script, encoding="utf-8")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return ncu


def install_fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **plan: object) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"failed": {}, "stop_after": None, **plan}), encoding="utf-8")
    install_ncu(tmp_path / "bin", FAKE_NCU.format(python=sys.executable, plan=str(plan_file)), monkeypatch)


def profiler(task: Task, **config: object) -> Profiler:
    peaks = datasheet_peaks("NVIDIA H200")
    return Profiler(task, FakeCompiler(), ProfileConfig(peaks=peaks, **config), launch=plain_launch)  # type: ignore[arg-type]


def test_kernels_are_attributed_to_their_candidates(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    csv = multi_candidate_csv([["vecadd"], ["transpose_naive", "matmul_naive"], ["smem_conflict"]])
    install_fake_ncu(tmp_path, monkeypatch, csv=csv)
    a, b = kernel("a"), kernel("b")
    profiles = profiler(task).profile([a, b], reference=True)
    assert [p.label for p in profiles] == ["candidate 0", "candidate 1", "reference"]
    assert [[k.short_name for k in p.kernels] for p in profiles] == [
        ["vecadd"],
        ["transpose_naive", "matmul_naive"],
        ["smem_conflict"],
    ]
    assert all(p.ok for p in profiles)
    assert profiles[0].kernel_digest == a.digest and profiles[1].kernel_digest == b.digest
    assert profiles[1].totals.duration_ms == pytest.approx(0.976224 + 3.129312)
    assert profiles[1].totals.kernels == 2
    assert profiles[0].seconds > 0


def test_with_the_evaluators_lock_an_ncu_launch_waits_for_it(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The torch target has no gate: the launch takes the lock before it starts and frees it after."""
    install_fake_ncu(tmp_path, monkeypatch, csv=multi_candidate_csv([["vecadd"], ["smem_conflict"]]))
    lock = threading.Lock()
    lock.acquire()  # a timing in progress
    peaks = datasheet_peaks("NVIDIA H200")
    config = ProfileConfig(peaks=peaks, light_target=False)
    prof = Profiler(task, FakeCompiler(), config, launch=plain_launch, gpu_lock=lock)  # type: ignore[arg-type]
    releaser = threading.Timer(1.0, lock.release)
    start = time.perf_counter()
    releaser.start()
    profiles = prof.profile([kernel("a")], reference=True)
    assert time.perf_counter() - start >= 0.9
    assert all(p.ok for p in profiles)
    assert prof.gpu_held_s > 0 and not lock.locked()


def test_compile_failures_and_warm_up_failures_are_per_candidate(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # candidates: 0 compiles and runs, 1 does not compile, 2 fails its warm-up call in the target
    csv = multi_candidate_csv([["vecadd"]])
    install_fake_ncu(tmp_path, monkeypatch, csv=csv, failed={"candidate 1": "optiml_forward returned -2 (-2)"})
    profiles = profiler(task).profile([kernel("ok"), kernel("BROKEN"), kernel("fails")])
    assert profiles[0].ok and profiles[0].kernels[0].short_name == "vecadd"
    assert profiles[1].errors == ('compile failed: error: line 3: expected a ";"',)
    # the target numbers the shared objects it got: its "candidate 1" is our candidate 2
    assert profiles[2].errors == ("the call in the profile target failed: optiml_forward returned -2 (-2)",)


def test_a_target_that_stops_early_leaves_the_rest_unprofiled(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    csv = multi_candidate_csv([["vecadd"]])
    install_fake_ncu(tmp_path, monkeypatch, csv=csv, stop_after=1, stderr="Segmentation fault\n", exit=1)
    first, second = profiler(task).profile([kernel("a"), kernel("b")])
    assert first.ok
    assert not second.ok and "stopped early" in second.errors[0] and "Segmentation fault" in second.errors[0]


def test_ncu_missing(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if find_ncu() is not None:
        pytest.skip("ncu is installed under /usr/local/cuda here")
    (result,) = profiler(task).profile(kernel("a"))
    assert not result.ok
    assert result.errors == ("ncu (Nsight Compute) not found: install it or put ncu on PATH",)


def test_ncu_without_counter_permission(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = f"#!{sys.executable}\nimport sys\nsys.stdout.write({PERMISSION_ERROR!r})\nsys.exit(0)\n"
    install_ncu(tmp_path / "bin", script, monkeypatch)
    (result,) = profiler(task).profile(kernel("a"))
    assert result.errors == (PERMISSION_HINT,)
    assert "ERR_NVGPUCTRPERM" in result.errors[0]


def test_ncu_timing_out_is_killed_with_its_children(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = tmp_path / "pids"
    script = (
        f"#!{sys.executable}\nimport os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write('%d %d' % (os.getpid(), child.pid))\n"
        "time.sleep(60)\n"
    )
    install_ncu(tmp_path / "bin", script, monkeypatch)
    start = time.monotonic()
    (result,) = profiler(task, timeout_s=2.0).profile(kernel("a"))
    assert time.monotonic() - start < 30
    assert result.errors == ("ncu timed out after 2 s (process group killed)",)
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid), f"process {pid} survived the timeout"


def test_ncu_reporting_an_error_line(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    error = "==ERROR== Failed to profile kernel: unknown metric"
    script = f"#!{sys.executable}\nimport sys\nprint({error!r})\nsys.exit(1)\n"
    install_ncu(tmp_path / "bin", script, monkeypatch)
    (result,) = profiler(task).profile(kernel("a"))
    assert result.errors == ("ncu: Failed to profile kernel: unknown metric",)


def test_diagnose_without_ncu_uses_static_facts_and_timing(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    if find_ncu() is not None:
        pytest.skip("ncu is installed under /usr/local/cuda here")
    timing = TimingStats(median_ms=3.129312, q1_ms=3.1, q3_ms=3.2, min_ms=3.0, max_ms=3.3, trials=10)
    result = EvalResult(status=EvalStatus.OK, timing=timing)
    d = profiler(task).diagnose(kernel("a"), result)
    assert d.bound == "unknown"
    assert any("ncu (Nsight Compute) not found" in m for m in d.missing_evidence)
    assert any(m.startswith("SASS") for m in d.missing_evidence)  # no cuobjdump here, and no real .so
    assert d.roofline is not None and d.roofline.min_bytes == 3 * 2048 * 2048 * 4  # from shapes on meta
    assert d.roofline_fraction == pytest.approx(2 * 2048**3 / (989e12 / 6) * 1e3 / 3.129312)  # the 3xTF32 roof
    assert d.proxy_score == d.roofline_fraction


def test_unverified_candidates_are_not_profiled(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_ncu(tmp_path / "bin", f"#!{sys.executable}\nraise SystemExit('ncu must not run')\n", monkeypatch)
    d = profiler(task).diagnose(kernel("a"), EvalResult(status=EvalStatus.WRONG_ANSWER, message="off"))
    assert d.profile is None
    assert any("wrong_answer" in m for m in d.missing_evidence)


def test_reported_io_bytes_feed_the_roofline(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_ncu(tmp_path, monkeypatch, csv=multi_candidate_csv([["vecadd"]]))
    p = profiler(task)
    p.profile(kernel("a"))
    assert p.roofline().min_bytes == 1024  # the target's case event: 1000 + 24 bytes


def test_raw_output_is_kept_when_asked(task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = multi_candidate_csv([["vecadd"]])
    install_fake_ncu(tmp_path, monkeypatch, csv=csv)
    profiler(task, raw_dir=tmp_path / "raw").profile(kernel("a"))
    (kept,) = (tmp_path / "raw").glob("*.csv")
    assert len(parse_raw_csv(kept.read_text())) == 2


def test_attribution_of_a_recorded_csv_cut_into_candidates() -> None:
    rows = parse_raw_csv(multi_candidate_csv([["vecadd", "transpose_naive"], [], ["matmul_naive"]]))
    assert len(rows) == 6
    split = split_by_markers(rows, ["candidate 0", "candidate 1", "reference"])
    assert [r.kernel_name.split("(")[0] for r in split.kernels["candidate 0"]] == ["vecadd", "transpose_naive"]
    assert split.kernels["candidate 1"] == []
    assert [r.kernel_name.split("(")[0] for r in split.kernels["reference"]] == ["matmul_naive"]
    assert split.problems == []


def test_attribution_problems_are_reported() -> None:
    rows = parse_raw_csv(multi_candidate_csv([["vecadd"], ["smem_conflict"]]))
    too_many = split_by_markers(rows, ["candidate 0"])
    assert too_many.kernels == {"candidate 0": []}
    assert "2 markers for 1 profiled entries" in too_many.problems[0]
    unmarked = [r for r in rows if "spin_kernel" not in r.kernel_name]
    stray = split_by_markers(unmarked, ["candidate 0"])
    assert stray.kernels == {"candidate 0": []}
    assert "before the first marker" in stray.problems[0]


def test_interpret_prefers_rows_and_keeps_warnings() -> None:
    csv = multi_candidate_csv([["vecadd"]])
    run = interpret(csv + "==WARNING== Found outstanding GPU clock reset\n", "", 0)
    assert run.error is None and len(run.rows) == 2
    assert run.warnings == ("Found outstanding GPU clock reset",)  # the clock note is not repeated
    assert interpret("", "", 0).error == "ncu profiled no kernels"
    crashed = interpret("", "Traceback ...\nRuntimeError: boom\n", -11)
    assert crashed.error == "ncu was killed by SIGSEGV: RuntimeError: boom"


def _alive(pid: int) -> bool:
    for _ in range(50):  # the kill is asynchronous: give the kernel a moment to reap
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        if Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False  # a zombie waiting for a parent that is gone: dead
        time.sleep(0.1)
    return True


# Inside the read-only sandbox this fake ncu is refused the counters, as a real one may be in a user
# namespace; outside it (network-only isolation) it behaves like FAKE_NCU.
SANDBOX_AWARE_NCU = """#!{python}
import sys
try:
    open({probe!r}, "w").write("x")
except OSError:
    sys.stdout.write({refusal!r})
    sys.exit(1)
exec(open({fake!r}).read())
"""


def test_sandbox_refusal_falls_back_to_network_only_isolation(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiml.integrity.sandbox import probe_isolation

    if not probe_isolation().filesystem:
        pytest.skip("no filesystem sandbox on this host")
    install_fake_ncu(tmp_path, monkeypatch, csv=multi_candidate_csv([["vecadd"]]))
    fake = tmp_path / "bin" / "ncu"
    inner = tmp_path / "inner_ncu.py"
    inner.write_text(fake.read_text().split("\n", 1)[1], encoding="utf-8")
    script = SANDBOX_AWARE_NCU.format(
        python=sys.executable, probe=str(tmp_path / "writable"), refusal=PERMISSION_ERROR, fake=str(inner)
    )
    fake.write_text(script, encoding="utf-8")
    p = Profiler(task, FakeCompiler(), ProfileConfig(peaks=datasheet_peaks("NVIDIA H200")))  # type: ignore[arg-type]
    (first,) = p.profile(kernel("a"))
    assert first.ok, first.errors
    assert any("network-only isolation" in note and "ERR_NVGPUCTRPERM" in note for note in first.notes)
    (second,) = p.profile(kernel("b"))  # the lighter isolation is kept: no second refusal
    assert second.ok and not any("network-only" in note for note in second.notes)


def test_the_case_written_in_the_background_is_written_once(
    task: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search starts the case's writing as it starts; the first launch's light_case waits for that
    write (here: one that fails, without a GPU) instead of starting a second, and close() waits too."""
    import optiml.profile.profiler as profiler_module

    runs: list[list[str]] = []
    real_run = profiler_module.process.run

    def counting_run(argv: list[str], *args: object, **kwargs: object) -> object:
        runs.append(argv)
        time.sleep(0.3)  # a slow write: the foreground call arrives while it is in flight
        return real_run(argv, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(profiler_module.process, "run", counting_run)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU even on the GPU machine: the write fails fast
    prof = profiler(task)
    prof.write_case_in_background()
    prof.write_case_in_background()  # a second call starts nothing
    case = prof.light_case()
    assert isinstance(case, str) and case.startswith("the case could not be written")
    assert len(runs) == 1 and "optiml.profile.case_dump" in runs[0]
    assert prof.case_seconds >= 0.3
    prof.close()
