"""Adversarial suite: kernels that try each known exploit, and honest kernels that must pass.

Every case names its kernel (``kernels/<name>.cu``), its task (``tasks/<task>.py``), the screening
rule that refuses it before compiling (or none), and what the harness must say when it does reach
the GPU — with screening off for cases that screening would have stopped. A failure must never be
silent: each expected status comes with phrases, one of which must appear in the result's message.

CPU tests (always): the table covers every kernel, tasks load, screening verdicts, every kernel
compiles (needs nvcc), and screened cases are rejected through the real Evaluator.
GPU tests (``-m gpu``, skipped without CUDA): the end-to-end verdicts, worker recovery after a
fatal fault, and the sandbox holding against a candidate that tries to escape.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.integrity.sandbox import probe_isolation
from optiml.integrity.screen import is_fp32_strict, screen_kernel
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task
from optiml.values import CompileResult, EvalStatus

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
TASKS = HERE / "tasks"

OK = EvalStatus.OK
WRONG = EvalStatus.WRONG_ANSWER
INTEGRITY = EvalStatus.INTEGRITY
RUNTIME = EvalStatus.RUNTIME_ERROR
CRASH = EvalStatus.CRASH
TIMEOUT = EvalStatus.TIMEOUT

WRONG_PHRASES = ("wrong answer", "wrong output")
STREAM_PHRASES = ("outside the given stream", "host thread", *WRONG_PHRASES)
DEATH_PHRASES = ("exited with code", "killed by", "died")


@dataclass(frozen=True)
class Case:
    """One kernel and what must happen to it."""

    kernel: str
    task: str
    exploit: str
    screen_rule: str | None  # the rule that rejects it before compiling; None: it passes screening
    runtime: tuple[EvalStatus, ...]  # acceptable statuses on the GPU (screening off when screen_rule is set)
    phrases: tuple[str, ...] = ()  # one must appear in the message (case-insensitive); () for OK
    counted_ms: float = 0.0  # where OK is allowed for an exploit: the judge's time must show at least this

    @property
    def honest(self) -> bool:
        return self.runtime == (OK,) and self.screen_rule is None and not self.counted_ms


CASES: tuple[Case, ...] = (
    # -- honest kernels: must be accepted -------------------------------------------------------------
    Case("honest_axpy", "axpy", "none: plain elementwise kernel", None, (OK,)),
    Case("honest_axpy_vec4", "axpy", "none: vectorised, near HBM bandwidth", None, (OK,)),
    Case("honest_rowsum", "rowsum", "none: warp-per-row reduction", None, (OK,)),
    Case("honest_rowsum_split", "rowsum", "none: two passes through the workspace", None, (OK,)),
    Case("honest_axpy_half", "axpy_half", "none: half precision where the task is half", None, (OK,)),
    Case("honest_relu", "relu", "none: max(x, 0), on native and signed inputs", None, (OK,)),
    Case("honest_softmax_wide", "softmax_wide", "none: block-per-row softmax of tiny outputs", None, (OK,)),
    Case("honest_matmul", "matmul", "none: tiled SGEMM, far above the compute floor", None, (OK,)),
    # -- exploits -------------------------------------------------------------------------------------
    Case(
        "unwritten_output", "axpy", "leave the output unwritten (stale reference result)", None, (WRONG,), WRONG_PHRASES
    ),
    Case("cache_by_pointer", "axpy", "replay results cached by input address", None, (WRONG,), WRONG_PHRASES),
    Case("cache_by_shape", "rowsum", "replay results cached by shape", None, (WRONG,), WRONG_PHRASES),
    Case("call_count_switch", "axpy", "behave during checks, skip work once timing", None, (WRONG,), WRONG_PHRASES),
    Case("side_stream", "axpy", "work on a newly created stream", "streams", (INTEGRITY, WRONG), STREAM_PHRASES),
    Case(
        "host_thread", "axpy", "work deferred to a detached host thread", "threads", (INTEGRITY, WRONG), STREAM_PHRASES
    ),
    Case("modify_inputs", "axpy", "zero an input after using it", None, (INTEGRITY,), ("modified input",)),
    Case("input_as_scratch", "rowsum", "reduce in place inside the input", None, (INTEGRITY,), ("modified input",)),
    Case(
        "fp16_downgrade",
        "axpy",
        "half-precision arithmetic under an fp32 tolerance",
        "precision",
        (WRONG,),
        WRONG_PHRASES,
    ),
    Case(
        "tf32_downgrade",
        "axpy",
        "TF32 rounding (inline PTX) under an fp32 tolerance (flagged, not rejected: 3xTF32 is legitimate)",
        None,
        (WRONG,),
        WRONG_PHRASES,
    ),
    Case("shape_specialised", "rowsum", "hard-coded row length", None, (WRONG,), ("shape set 1",)),
    Case("partial_output", "rowsum", "compute only part of the output", None, (WRONG,), WRONG_PHRASES),
    Case("sampled_output", "axpy", "write every other element", None, (WRONG,), WRONG_PHRASES),
    Case(
        "persisting_l2",
        "axpy",
        "pin inputs in a persisting-L2 carve-out",
        "l2-persistence",
        (INTEGRITY,),
        ("persisting-l2", "persisting l2"),
    ),
    Case(
        "out_of_bounds",
        "axpy",
        "wild write far outside the output",
        None,
        (RUNTIME, CRASH),
        ("illegal", "cuda error", "returned", *DEATH_PHRASES),
    ),
    Case(
        "small_overrun",
        "axpy",
        "write just past the end of the output",
        None,
        (INTEGRITY, RUNTIME, CRASH),
        ("outside", "past the end", "guard", "out of bounds", "illegal", *DEATH_PHRASES),
    ),
    Case("exit_call", "axpy", "exit() inside the call", "process-exit", (CRASH,), DEATH_PHRASES),
    Case("abort_call", "axpy", "abort() inside the call", "process-exit", (CRASH,), ("SIGABRT", "134", "abort")),
    Case(
        "device_reset",
        "axpy",
        "cudaDeviceReset() destroys the context of its process (the candidate's own, not the judge's)",
        "device-control",
        (RUNTIME, CRASH, WRONG),
        ("cuda error", "returned", "context", *DEATH_PHRASES, *WRONG_PHRASES),
    ),
    Case("infinite_loop", "axpy", "a kernel that never ends", None, (TIMEOUT,), ("no answer within",)),
    # -- issue 20, classes 2, 6, 7, 8 -----------------------------------------------------------------
    Case(
        "workspace_precompute",
        "axpy",
        "compute the answer in optiml_workspace_bytes (untimed), copy it in the call",
        None,
        (WRONG, RUNTIME),
        (*WRONG_PHRASES, "returned"),
    ),
    Case(
        "replay_matmul",
        "matmul",
        "replay GEMM results by a cheap content key: copy speed, under flops / compute peak",
        None,
        (INTEGRITY, WRONG),
        ("physical floor", *WRONG_PHRASES),
    ),
    Case(
        "identity_relu", "relu", "y = x passes ReLU on torch.rand inputs (all >= 0)", None, (WRONG,), ("normal inputs",)
    ),
    Case("zero_softmax", "softmax_wide", "all zeros within atol=1e-4 of tiny outputs", None, (WRONG,), WRONG_PHRASES),
    Case("constant_softmax", "softmax_wide", "1/D everywhere, reading nothing", None, (WRONG,), WRONG_PHRASES),
    Case("timer_interpose", "axpy", "export a fake cuEventElapsedTime", "api-definition", (OK,)),
    # -- issue 20, class 1: the candidate's host code rewrites the Python of the process it runs in ------
    Case(
        "ctor_patch_verdict",
        "axpy",
        "static constructor patches the comparison and input checks; computes nothing",
        None,
        (WRONG,),
        WRONG_PHRASES,
    ),
    Case(
        "ctor_patch_timer",
        "axpy",
        "static constructor patches time.perf_counter and CUDA event timing; 3 ms of hidden spin",
        None,
        (OK,),
        counted_ms=2.5,
    ),
    Case(
        "host_patch_reply",
        "axpy",
        "host code patches the candidate process to reply before its kernel finishes",
        None,
        # its patched claim (0.001 ms on its stream) against the judge's 3.5 ms convicts it (H200, 2026-12-04);
        # a verdict of ok must still show the whole kernel's time
        (WRONG, OK, INTEGRITY),
        (*WRONG_PHRASES, "still running", "outside the given stream"),
        counted_ms=2.5,
    ),
    # -- class 3: state carried between timed calls ------------------------------------------------------
    Case("content_cache", "axpy", "replay a result cached by (sampled) input contents", None, (WRONG,), WRONG_PHRASES),
    Case("stale_workspace", "axpy", "serve the previous answer left in the workspace", None, (WRONG,), WRONG_PHRASES),
    # -- class 4: part of the work off the given stream, within the old tolerance ------------------------
    Case(
        "legacy_stream_half",
        "axpy",
        "second half of the work on the legacy default stream",
        None,
        (INTEGRITY, OK),
        STREAM_PHRASES,
        counted_ms=0.15,
    ),
    Case(
        "per_thread_stream_half",
        "axpy",
        "second half on the per-thread default stream, named by its handle value",
        None,
        (INTEGRITY, OK),
        STREAM_PHRASES,
        counted_ms=0.15,
    ),
    Case("dlopen_driver", "axpy", "dlopen the driver and call it directly", "dynamic-loading", ()),
    Case("escape_sandbox", "axpy", "read secrets, write outside, reach loopback", "environment", ()),
    # issue 39: a candidate that reaches the judge's processes and files (classes 3, 5), a scalar loss
    # estimated from a sample (class 4) and the honest loss, which must pass the perturbed inputs too
    Case("reach_judge", "axpy", "signal other pids, read /tmp, the compile cache, the judge's folder", "signals", ()),
    Case("honest_mean_loss", "mean_loss", "none: full reduction of a scalar loss", None, (OK,)),
    Case(
        "sampled_mean_loss", "mean_loss", "estimate a mean loss from every 16th element", None, (WRONG,), WRONG_PHRASES
    ),
)

BY_NAME = {case.kernel: case for case in CASES}
FATAL = ("out_of_bounds", "exit_call", "abort_call", "device_reset")  # each gets a fresh worker of its own
RUNTIME_CASES = [c for c in CASES if c.runtime and c.kernel not in (*FATAL, "infinite_loop")]
SCREENED = [c for c in CASES if c.screen_rule is not None]


def _task(name: str) -> Task:
    return load_task(TASKS / f"{name}.py")


def _kernel(case: Case, flags: tuple[str, ...] = ()) -> KernelSource:
    return KernelSource.from_file(KERNELS / f"{case.kernel}.cu", flags=flags)


def _assert_verdict(case: Case, status: EvalStatus, message: str, allowed: tuple[EvalStatus, ...]) -> None:
    shown = f"{case.kernel} ({case.exploit}): got {status.value}: {message!r}"
    assert status in allowed, f"{shown}; expected one of {[s.value for s in allowed]}"
    if status is not OK:
        assert message.strip(), f"{shown}: a rejection must carry its reason"
        assert any(p.lower() in message.lower() for p in case.phrases), f"{shown}; expected one of {case.phrases}"


# -- CPU: the table, the tasks, screening, compiling -----------------------------------------------------
def test_table_covers_every_kernel_once() -> None:
    files = sorted(p.stem for p in KERNELS.glob("*.cu"))
    assert sorted(BY_NAME) == files and len(BY_NAME) == len(CASES)
    exploits = [c for c in CASES if not c.honest]
    assert len(exploits) >= 12 and sum(c.honest for c in CASES) >= 3
    assert all(c.phrases or c.runtime in ((OK,), ()) for c in CASES)
    assert all(c.counted_ms == 0 or OK in c.runtime for c in CASES)


@pytest.mark.parametrize("name", sorted(p.stem for p in TASKS.glob("*.py")))
def test_tasks_load_with_extra_shape_sets(name: str) -> None:
    task = _task(name)
    assert task.num_shape_sets == 2
    assert task.flops(0) is not None and task.flops(1) is not None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kernel)
def test_screening_verdict(case: Case) -> None:
    task = _task(case.task)
    report = screen_kernel(_kernel(case), fp32_strict=is_fp32_strict(task.meta))
    if case.screen_rule is None:
        assert not report.rejected, report.message()
    else:
        assert report.rejected
        assert case.screen_rule in {f.rule for f in report.rejections}, report.message()
        assert "\n" not in report.message() and report.message().startswith("rejected by screening: [")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CompileResult]:
    """Every kernel built once, in parallel (as the evaluator would), into a private cache."""
    from optiml.kernel.compiler import Compiler, CompilerConfig

    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path_factory.mktemp("kernels")))
    kernels = [_kernel(c, flags=("-DESCAPE_PORT=9",) if c.kernel == "escape_sandbox" else ()) for c in CASES]
    return {c.kernel: r for c, r in zip(CASES, compiler.compile_many(kernels), strict=True)}


@pytest.mark.nvcc
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kernel)
def test_kernel_compiles(case: Case, compiled: dict[str, CompileResult]) -> None:
    result = compiled[case.kernel]
    assert result.ok, result.error_summary()


@pytest.mark.nvcc
@pytest.mark.parametrize("case", SCREENED, ids=lambda c: c.kernel)
def test_screened_cases_are_rejected_by_the_evaluator(case: Case) -> None:
    """Screening runs before compiling or touching a GPU, so this holds on any machine with nvcc."""
    with Evaluator(_task(case.task), EvalConfig()) as evaluator:
        result = evaluator.evaluate(_kernel(case))
    assert result.status is EvalStatus.REJECTED
    assert result.message.startswith("rejected by screening: [") and "\n" not in result.message
    assert result.compile is None


# -- GPU: end to end -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def honest_evaluators() -> Iterator[dict[str, Evaluator]]:
    """One Evaluator per task for the honest kernels, which leave nothing behind to share."""
    opened: dict[str, Evaluator] = {}
    yield opened
    for evaluator in opened.values():
        evaluator.close()


@pytest.mark.gpu
@pytest.mark.parametrize("case", RUNTIME_CASES, ids=lambda c: c.kernel)
def test_runtime_verdict(case: Case, honest_evaluators: dict[str, Evaluator]) -> None:
    """Exploits get a fresh worker each: a stray thread or write must not leak into another verdict."""
    if case.honest:
        if case.task not in honest_evaluators:
            honest_evaluators[case.task] = Evaluator(_task(case.task), EvalConfig())
        result = honest_evaluators[case.task].evaluate(_kernel(case))
    else:
        with Evaluator(_task(case.task), EvalConfig(screen=case.screen_rule is None)) as evaluator:
            result = evaluator.evaluate(_kernel(case))
    _assert_verdict(case, result.status, result.message, case.runtime)
    if result.ok and case.counted_ms:
        assert result.timing is not None and result.timing.median_ms >= case.counted_ms, (
            f"{case.kernel}: accepted at {result.timing.median_ms if result.timing else None} ms, "
            f"below the {case.counted_ms} ms its work costs: the hidden work went uncounted"
        )
    if result.ok:  # a "suspect" first series may occur on a shared GPU; the verdict is the re-timed one
        assert result.timing is not None and result.verify is not None and result.verify.passed
        if result.floor_ms:
            assert result.timing.median_ms >= result.floor_ms * 0.8


@pytest.mark.gpu
def test_infinite_loop_times_out_and_the_worker_recovers() -> None:
    case = BY_NAME["infinite_loop"]
    with Evaluator(_task(case.task), EvalConfig(timeout_s=30)) as evaluator:
        hung = evaluator.evaluate(_kernel(case))
        _assert_verdict(case, hung.status, hung.message, case.runtime)
        after = evaluator.evaluate(_kernel(BY_NAME["honest_axpy"]))
    assert after.ok, after.message


@pytest.mark.gpu
@pytest.mark.parametrize("fatal", FATAL)
def test_worker_is_replaced_after_a_fatal_candidate(fatal: str) -> None:
    case = BY_NAME[fatal]
    with Evaluator(_task(case.task), EvalConfig(screen=False)) as evaluator:
        bad = evaluator.evaluate(_kernel(case))
        _assert_verdict(case, bad.status, bad.message, case.runtime)
        good = evaluator.evaluate(_kernel(BY_NAME["honest_axpy"]))
    assert good.ok, good.message


@pytest.fixture
def escape_setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """Plant a key in the environment and in a decoy process, and listen on loopback."""
    secret = "sk-optiml-planted-for-the-escape-test"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=dict(os.environ))
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        decoy.kill()
        decoy.wait()
        Path(f"/tmp/optiml-escape-{port}").unlink(missing_ok=True)


@pytest.mark.gpu
def test_candidate_cannot_escape_the_worker(escape_setup: int) -> None:
    support = probe_isolation()
    if not support.filesystem:
        pytest.skip(f"this host grants no mount/pid namespaces: {support.describe()}")
    port = escape_setup
    leaks = {
        41: "saw the API key in its environment",
        42: "read another process's environment",
        43: "wrote a file outside its directory",
        44: "reached the orchestrator's loopback",
    }
    with Evaluator(_task("axpy"), EvalConfig(screen=False)) as evaluator:
        result = evaluator.evaluate(_kernel(BY_NAME["escape_sandbox"], flags=(f"-DESCAPE_PORT={port}",)))
    leak = next((text for code, text in leaks.items() if f"returned {code}" in result.message), None)
    assert leak is None, f"the candidate {leak}: {result.message}"
    assert result.ok, result.message
    assert not Path(f"/tmp/optiml-escape-{port}").exists()


@pytest.mark.gpu
def test_candidate_cannot_reach_the_judge(tmp_path: Path) -> None:
    """Issue 39, classes 3 and 5: from inside its process the candidate probes every pid, /proc, a file in
    the user's /tmp, the compile cache and the judge's folder; in its own namespaces each probe fails."""
    from optiml.cache_dirs import user_cache_dir
    from optiml.integrity.candidate_sandbox import probe_candidate_isolation

    if not probe_candidate_isolation().isolated:
        pytest.skip(probe_candidate_isolation().note)
    planted = Path("/tmp") / f"optiml-planted-{os.getpid()}"
    planted.write_text("a user's file")
    cache = user_cache_dir("kernels")
    leaks = {
        51: "signalled a process outside its namespace",
        52: "saw other processes in /proc",
        53: "read a file in the user's /tmp",
        54: "opened the compile cache",
        55: "saw the judge's files above its directory",
    }
    flags = (f'-DPLANTED_TMP="{planted}"', f'-DCOMPILE_CACHE="{cache}"')
    try:
        with Evaluator(_task("axpy"), EvalConfig(screen=False)) as evaluator:
            result = evaluator.evaluate(_kernel(BY_NAME["reach_judge"], flags=flags))
            notes = list(evaluator.facts.notes) if evaluator.facts else []
    finally:
        planted.unlink(missing_ok=True)
    leak = next((text for code, text in leaks.items() if f"returned {code}" in result.message), None)
    assert leak is None, f"the candidate {leak}: {result.message} (notes: {notes})"  # 51PPPPP: pid PPPPP
    assert result.ok, result.message
    assert any("candidate processes: own pid" in note for note in notes), notes
