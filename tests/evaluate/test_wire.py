"""The judge protocol end to end on CPU: the worker's real request loop behind the real client and Evaluator.

A stub stands in for the GPU-bound parts (the judge, the task runtime); everything between the
Evaluator and the worker's reply — encoding, the fatal flag, the error kinds, decoding the judge's
``EvalResult`` — is the code the GPU path runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from optiml.errors import NoGPUError, TaskError
from optiml.evaluate.client import WorkerClient
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.wire import KIND_NO_GPU, Reply, encode, failure, success
from optiml.integrity.sandbox import ResourceLimits, WorkerLaunch, build_worker_launch
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.values import CompileResult, EvalStatus, TimingStats

ROOT = Path(__file__).resolve().parents[2]

#: The worker's own request loop (optiml.evaluate.worker._serve) around a stub worker. The stub's
#: evaluate answers from the shared object's name: "ok", "slow_wrong", "fatal", "crash_status", "judge_oom".
STUB_WORKER = r"""
import sys
import time
from optiml.errors import TaskError
from optiml.evaluate import worker as w
from optiml.evaluate.harness import CandidateFailure
from optiml.values import EvalResult, EvalStatus, TimingStats, TrialCheck, VerifyReport

MODE = sys.argv[1]
EAGER_MS = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0  # this "GPU"'s reference time

class StubJudge:
    def keep_spare(self): pass
    def close(self): pass

class StubWorker:
    def __init__(self):
        self.judge, self.unusable = StubJudge(), False
    def hello(self, request): return {"name": "stub"}
    def prepare(self, request):
        if MODE == "broken_task":
            raise TaskError("the task file " + request["task"] + " does not define Model")
        timing = {"median_ms": EAGER_MS, "q1_ms": EAGER_MS, "q3_ms": EAGER_MS, "min_ms": EAGER_MS,
                  "max_ms": EAGER_MS, "trials": 3}
        return {"reference": {"eager": timing}, "input_bytes": 8, "output_bytes": 8, "flops": None,
                "bandwidth": 1e12, "round_trip": {"host_ms": 0.25}, "notes": ["stub"], "seconds": 0.1}
    def evaluate(self, request):
        name = request["so"].rsplit("/", 1)[-1]
        if name.startswith("slow"):
            time.sleep(0.3)
        if name == "crash_status":
            raise CandidateFailure(EvalStatus.OUT_OF_MEMORY, "the candidate ran the judge out of memory", fatal=True)
        if name == "judge_oom":  # the judge's own allocation, as the harness lets it go up
            import torch
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        trials = (TrialCheck(seed=1, shape_set=0, distribution="normal", passed=True),)
        result = EvalResult(EvalStatus.OK, verify=VerifyReport(passed=True, trials=trials),
                            timing=TimingStats.from_samples([1.0, 1.0, 1.0]), floor_ms=0.01,
                            warnings=["judged by a stub"], phase_seconds={"load": 0.1, "verify": 0.2},
                            memory={"peak_bytes": 64})
        if name == "slow_wrong":
            result.status, result.message = EvalStatus.WRONG_ANSWER, "timed call 3 produced a wrong output"
            result.verify = VerifyReport(passed=False, trials=trials, message=result.message)
        self.unusable = name == "fatal"
        return {"evaluation": result.to_dict(), "judge": {"claimed_stream_ms": 0.9}}
    def retime(self, request):  # each kernel 1 ms, each reference its mode's length in ms, over the rounds
        def stats(ms):
            return {"median_ms": ms, "q1_ms": ms, "q3_ms": ms, "min_ms": ms, "max_ms": ms, "trials": request["rounds"]}
        modes = request.get("references", [])
        return {"timings": [stats(1.0) for _ in request["so"]],
                "samples": [[1.0] * request["rounds"] for _ in request["so"]],
                "reference_timings": {m: stats(float(len(m))) for m in modes},
                "reference_samples": {m: [float(len(m))] * request["rounds"] for m in modes},
                "window_calls": [request["settle"] + 1 for _ in request["so"]]}

if MODE == "no_gpu":
    w.Worker = lambda: (_ for _ in ()).throw(w.NoCudaDevice("no CUDA device is visible to the worker"))
else:
    w.Worker = StubWorker
protocol = sys.stdout
sys.exit(w.serve(sys.stdin, protocol))
"""


class StubCompiler:
    """'Builds' a kernel into a shared object named by its first line (the stub worker reads the name)."""

    def compile(self, kernel: KernelSource) -> CompileResult:
        name = kernel.code.split("\n", 1)[0].removeprefix("// ")
        return CompileResult(
            ok=True, so_path=f"/nowhere/{name}", digest=kernel.digest, arch="sm_90a", seconds=0.5, cached=False
        )

    def prefetch(self, kernels: list[KernelSource]) -> list[CompileResult]:
        return [self.compile(k) for k in kernels]

    def compile_many(self, kernels: list[KernelSource]) -> list[CompileResult]:
        return [self.compile(k) for k in kernels]


def stub_launcher(mode: str, eager_ms: float = 2.0):  # type: ignore[no-untyped-def]
    """Starts the stub worker (see STUB_WORKER) instead of the real one; ``eager_ms``: its reference time."""

    def launch(argv: list[str], workdir: Path) -> WorkerLaunch:
        script = workdir / "stub_worker.py"
        script.write_text(STUB_WORKER)
        command = [sys.executable, str(script), mode, str(eager_ms)]
        spec = build_worker_launch(command, workdir=workdir, limits=ResourceLimits())
        spec.env["PYTHONPATH"] = str(ROOT / "src")
        return spec

    return launch


def _evaluator(mode: str = "normal") -> Evaluator:
    task = load_task(ROOT / "tasks" / "silu.py")
    worker = WorkerClient(launch=stub_launcher(mode))
    return Evaluator(task, EvalConfig(screen=False), compiler=StubCompiler(), worker=worker, peak_flops=0.0)  # type: ignore[arg-type]


def test_replies_round_trip_through_their_encoding() -> None:
    ok = Reply.decode(encode(success({"x": 1}, fatal=True)))
    assert ok.ok and ok.fatal and ok.result == {"x": 1}
    bad = Reply.decode(encode(failure("no GPU here", kind=KIND_NO_GPU)))
    assert not bad.ok and bad.kind == KIND_NO_GPU and bad.error == "no GPU here" and not bad.fatal
    for garbage in ("[1, 2]", '{"result": {}}', '{"ok": true, "result": 5}', "not json"):
        with pytest.raises(ValueError):
            Reply.decode(garbage)


def test_the_judges_result_reaches_the_evaluator_whole() -> None:
    with _evaluator() as evaluator:
        result = evaluator.evaluate(KernelSource("// ok\n"))
    assert result.status is EvalStatus.OK, result.message
    assert result.verify is not None and result.verify.passed and len(result.verify.trials) == 1
    assert result.timing is not None and result.timing.median_ms == 1.0 and result.floor_ms == 0.01
    assert result.memory == {"peak_bytes": 64} and "judged by a stub" in result.warnings
    assert {"compile", "gpu_wait", "load", "verify", "total"} <= set(result.phase_seconds)
    assert result.reference["eager"].median_ms == 2.0 and result.task_notes[0] == "stub"
    assert result.speedup("eager").value == pytest.approx(2.0)


def test_a_retiming_brings_back_the_prepared_references_timed_in_its_rounds() -> None:
    with _evaluator() as evaluator:
        timings, references = evaluator.retime_with_references([KernelSource("// a\n"), KernelSource("// b\n")], 4)
        retimed = evaluator.retime_interleaved([KernelSource("// a\n")], 3, references=("eager", "compile"), settle=2)
    assert [t.median_ms for t in timings] == [1.0, 1.0] and all(t.trials == 4 for t in timings)
    assert references == {"eager": TimingStats(5.0, 5.0, 5.0, 5.0, 5.0, 4)}  # the modes the task was prepared with
    assert retimed.references["compile"].median_ms == 7.0 and retimed.reference_samples["eager"] == [5.0] * 3
    assert retimed.window_calls == [3] and retimed.samples == [[1.0] * 3]


def test_a_wrong_answer_keeps_its_trials_and_message() -> None:
    with _evaluator() as evaluator:
        result = evaluator.evaluate(KernelSource("// slow_wrong\n"))
    assert result.status is EvalStatus.WRONG_ANSWER and "timed call 3" in result.message
    assert result.verify is not None and not result.verify.passed and result.verify.message == result.message


def test_after_a_fatal_verdict_the_next_candidate_gets_a_fresh_prepared_worker() -> None:
    with _evaluator() as evaluator:
        assert evaluator.evaluate(KernelSource("// fatal\n")).ok  # the verdict stands; the worker then exits
        failed = evaluator.evaluate(KernelSource("// crash_status\n"))
        assert failed.status is EvalStatus.OUT_OF_MEMORY and "out of memory" in failed.message
        assert evaluator.evaluate(KernelSource("// ok\n")).ok
        assert evaluator.worker.starts == 3


def test_the_judges_own_out_of_memory_is_asked_again_then_stands_as_the_candidates_out_of_memory() -> None:
    from optiml.evaluate.evaluator import GPU_MEMORY_RETRIED

    with _evaluator() as evaluator:
        failed = evaluator.evaluate(KernelSource("// judge_oom\n"))
        assert failed.status is EvalStatus.OUT_OF_MEMORY and GPU_MEMORY_RETRIED in failed.message
        assert failed.message.startswith("the judge ran out of GPU memory: OutOfMemoryError: CUDA out of memory.")
        assert evaluator.worker.starts == 2  # the second try ran on a fresh worker
        assert evaluator.evaluate(KernelSource("// ok\n")).ok


def test_a_worker_without_a_gpu_and_a_broken_task_are_told_apart_by_kind() -> None:
    with _evaluator("no_gpu") as evaluator, pytest.raises(NoGPUError, match="no CUDA GPU is visible"):
        evaluator.prepare()
    with _evaluator("broken_task") as evaluator, pytest.raises(TaskError, match="does not define Model"):
        evaluator.prepare()
