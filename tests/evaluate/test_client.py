"""The worker client against real misbehaving processes: crashes, hangs and garbage are contained."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from optiml.errors import NoGPUError, WorkerError
from optiml.evaluate.client import WorkerClient, WorkerCrashed, WorkerReplyError, WorkerTimeout
from optiml.evaluate.evaluator import Evaluator
from optiml.integrity.sandbox import ResourceLimits, WorkerLaunch, build_worker_launch
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]

FAKE_WORKER = r"""
import json, os, signal, sys, time
for line in sys.stdin:
    request = json.loads(line)
    op = request["op"]
    if op == "shutdown":
        break
    if op == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if op == "hang":
        time.sleep(3600)
    if op == "fatal":
        sys.stdout.write(json.dumps({"ok": True, "result": {"verdict": 1}, "fatal": True}) + "\n"); sys.stdout.flush()
        time.sleep(0.3)
        sys.exit(3)
    if op == "garbage":
        sys.stdout.write("this is not json\n"); sys.stdout.flush(); continue
    if op == "fail":
        sys.stdout.write(json.dumps({"ok": False, "error": "nope", "status": "runtime_error"}) + "\n")
        sys.stdout.flush(); continue
    sys.stdout.write(json.dumps({"ok": True, "result": {"pid": os.getpid(), "echo": request.get("x")}}) + "\n")
    sys.stdout.flush()
"""


def fake_launch(argv: list[str], workdir: Path) -> WorkerLaunch:
    script = workdir / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    return build_worker_launch([sys.executable, str(script)], workdir=workdir, limits=ResourceLimits())


@pytest.fixture
def client() -> WorkerClient:
    worker = WorkerClient(launch=fake_launch)
    yield worker
    worker.stop()


def test_round_trip(client: WorkerClient) -> None:
    assert client.request({"op": "echo", "x": 5}, timeout_s=30)["echo"] == 5
    assert client.starts == 1 and client.alive


def test_crash_is_reported_with_its_signal_and_the_next_request_gets_a_fresh_worker(client: WorkerClient) -> None:
    client.request({"op": "echo"}, timeout_s=30)
    with pytest.raises(WorkerCrashed, match="SIGSEGV"):
        client.request({"op": "crash"}, timeout_s=30)
    assert not client.alive
    assert client.request({"op": "echo", "x": 1}, timeout_s=30)["echo"] == 1
    assert client.starts == 2


def test_hang_times_out_and_the_process_is_killed(client: WorkerClient) -> None:
    client.request({"op": "echo"}, timeout_s=30)
    workdir = str(client.workdir)
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        client.request({"op": "hang"}, timeout_s=1.5)
    assert time.monotonic() - start < 10
    assert not client.alive
    survivors = [p for p in Path("/proc").glob("[0-9]*") if _is_fake_worker(p, workdir)]
    assert not survivors, "the hung worker survived its process-group kill"


def _is_fake_worker(proc: Path, workdir: str) -> bool:
    try:
        return f"{workdir}/fake_worker.py" in (proc / "cmdline").read_text().replace("\0", " ")
    except OSError:
        return False


def test_after_a_fatal_reply_the_next_request_goes_to_a_fresh_worker(client: WorkerClient) -> None:
    assert client.request({"op": "fatal"}, timeout_s=30) == {"verdict": 1}
    assert client.request({"op": "echo", "x": 2}, timeout_s=30)["echo"] == 2
    assert client.starts == 2


def test_garbage_and_error_replies_are_typed(client: WorkerClient) -> None:
    with pytest.raises(WorkerReplyError) as info:
        client.request({"op": "fail"}, timeout_s=30)
    assert info.value.reply.status == "runtime_error" and str(info.value) == "nope"
    with pytest.raises(WorkerError, match="malformed reply"):
        client.request({"op": "garbage"}, timeout_s=30)


def test_evaluator_without_a_gpu_says_so_in_one_line() -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    task = load_task(ROOT / "tasks" / "silu.py")
    with Evaluator(task) as evaluator, pytest.raises(NoGPUError, match="no CUDA GPU"):
        evaluator.prepare()


def test_out_of_gpu_memory_tells_the_cards_memory_from_other_failures() -> None:
    from optiml.evaluate.cudart import CudaError
    from optiml.evaluate.worker import out_of_gpu_memory

    class OutOfMemoryError(RuntimeError):  # PyTorch's type, by name: torch.OutOfMemoryError
        pass

    assert out_of_gpu_memory(OutOfMemoryError("CUDA out of memory. Tried to allocate 512.00 MiB."))
    assert out_of_gpu_memory(CudaError("cuMemCreate", 2))
    assert out_of_gpu_memory(RuntimeError("CUDA error: out of memory"))
    assert not out_of_gpu_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not out_of_gpu_memory(ValueError("bad shape"))


OOM_WORKER = r"""
import json, sys
for line in sys.stdin:
    op = json.loads(line)["op"]
    if op == "shutdown":
        break
    if op == "prepare":
        reply = {"ok": True, "result": {"reference": {}, "input_bytes": 8, "output_bytes": 8, "flops": None,
                                        "bandwidth": 1e12, "seconds": 0.0}}
    elif OUT_OF_MEMORY:
        error = "the judge ran out of GPU memory: OutOfMemoryError: CUDA out of memory."
        reply = {"ok": False, "error": error, "status": "out_of_memory", "kind": "gpu_memory", "fatal": True}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
        sys.exit(3)
    else:
        reply = {"ok": True, "result": {"evaluation": {"status": "ok", "message": "judged"}}}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""


def _evaluate_beside_a_judge_out_of_memory(times: int) -> tuple[Any, WorkerClient]:
    """Evaluate the naive silu kernel with a worker whose first ``times`` starts run out of GPU memory."""
    from optiml.evaluate.config import EvalConfig
    from optiml.kernel.source import KernelSource

    starts: list[Path] = []

    def launch(argv: list[str], workdir: Path) -> WorkerLaunch:
        starts.append(workdir)
        script = OOM_WORKER.replace("OUT_OF_MEMORY", str(len(starts) <= times))
        (workdir / "oom_worker.py").write_text(script)
        return build_worker_launch(
            [sys.executable, str(workdir / "oom_worker.py")], workdir=workdir, limits=ResourceLimits()
        )

    worker = WorkerClient(launch=launch)
    task = load_task(ROOT / "tasks" / "silu.py")
    with Evaluator(task, EvalConfig(screen=False), worker=worker, peak_flops=0) as evaluator:
        result = evaluator.evaluate(KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu"))
    return result, worker


@pytest.mark.nvcc
def test_an_evaluation_the_judge_ran_out_of_memory_for_is_asked_again_on_a_fresh_worker() -> None:
    result, worker = _evaluate_beside_a_judge_out_of_memory(times=1)
    assert result.status.value == "ok" and result.message == "judged"
    assert worker.starts == 2


@pytest.mark.nvcc
def test_a_judge_out_of_memory_twice_is_the_candidates_out_of_memory_verdict_that_says_so() -> None:
    from optiml.evaluate.evaluator import GPU_MEMORY_RETRIED

    result, worker = _evaluate_beside_a_judge_out_of_memory(times=2)
    assert result.status.value == "out_of_memory"
    assert result.message.startswith("the judge ran out of GPU memory") and GPU_MEMORY_RETRIED in result.message
    assert worker.starts == 2
