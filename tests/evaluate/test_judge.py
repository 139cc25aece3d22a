"""The judge and its candidate process, end to end on the CPU.

Without a GPU the judge lends its buffers as file mappings instead of CUDA IPC blocks and the
candidate is a host library with the same ABI (built with gcc here); everything else is the real
protocol: the real candidate process, the real harness (trials, fresh inputs per timed call,
checks, the judge's clock, calibration). The candidates below misbehave the way GPU candidates
would — and one rewrites the candidate process's own Python from a static constructor.
"""

from __future__ import annotations

import dataclasses
import shutil
import time

import pytest
import torch
from tests.evaluate.host_kernels import HONEST, PRELUDE, TASK, build_host_libraries

from optiml.evaluate import harness
from optiml.evaluate.candidate_link import CandidateProcess
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.harness import (
    MAX_WINDOW_CALLS,
    CaseSeeds,
    Judged,
    Peaks,
    evaluate_candidate,
    hidden_work_ms,
    window_width,
)
from optiml.evaluate.judge import Calibration, Judge
from optiml.evaluate.runtime import TaskRuntime
from optiml.task import load_task
from optiml.values import EvalStatus

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

KERNELS = {
    "honest": HONEST,
    # optiml_workspace_bytes must see shapes only: 64 bytes if every data pointer is null, else a tell-tale size
    "shapes_only": """
        size_t optiml_workspace_bytes(const optiml_tensor* in, int ni) {
          for (int i = 0; i < ni; ++i) if (in[i].data) return 12345;
          return 64;
        }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          if (wb != 64 || !ws) return 5;
          memset(ws, 0, wb); axpy(in, out); return 0;
        }""",
    # class 1: a static constructor rewrites the candidate process's Python so calls "succeed" without running
    "patch_shim": """
        int PyGILState_Ensure(void); void PyGILState_Release(int); int PyRun_SimpleString(const char*);
        __attribute__((constructor)) static void patch(void) {
          int g = PyGILState_Ensure();
          PyRun_SimpleString("import __main__\\n"
                             "__main__.Runner.call = lambda self, r: "
                             "{'rc': 0, 'sync': 0, 'inner_ms': 1e-6, 'l2': 0}\\n");
          PyGILState_Release(g);
        }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          return 0;
        }""",
    # class 1: honest but slow (20 ms); the constructor stops the candidate process's clock
    "patch_clock": """
        int PyGILState_Ensure(void); void PyGILState_Release(int); int PyRun_SimpleString(const char*);
        __attribute__((constructor)) static void patch(void) {
          int g = PyGILState_Ensure();
          PyRun_SimpleString("import time\\ntime.perf_counter = lambda: 0.0\\n");
          PyGILState_Release(g);
        }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          usleep(20000); axpy(in, out); return 0;
        }""",
    "slow_honest": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws,"
    " size_t wb, void* s) { usleep(2000); axpy(in, out); return 0; }",
    # class 3: a cache keyed on the first input element (cheap content key)
    "content_cache": """
        static float key_x = -1.f, key_y = -1.f; static float* saved = 0; static int64_t saved_n = 0;
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          int64_t n = numel(&in[0]); float x0 = ((float*)in[0].data)[0], y0 = ((float*)in[1].data)[0];
          if (saved && saved_n == n && x0 == key_x && y0 == key_y) { memcpy(out[0].data, saved, n * 4); return 0; }
          axpy(in, out);
          if (saved_n != n) { free(saved); saved = (float*)malloc(n * 4); saved_n = n; }
          memcpy(saved, out[0].data, n * 4); key_x = x0; key_y = y0; return 0;
        }""",
    # class 3: keeps its last answer in the workspace and serves it when the same buffer comes back (a tag on
    # a sampled value too hit only by chance once every call's contents were an entropy mix: issue 39)
    "stale_workspace": """
        size_t optiml_workspace_bytes(const optiml_tensor* in, int ni) { return (size_t)numel(&in[0]) * 4; }
        static const void* tag = 0;
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          int64_t n = numel(&in[0]);
          if (tag == in[0].data) { memcpy(out[0].data, ws, n * 4); return 0; }
          axpy(in, out); memcpy(ws, out[0].data, n * 4); tag = in[0].data;
          return 0;
        }""",
    # a window's later calls come back to back: this one works only on a call that follows a pause
    "lazy_in_window": """
        #include <time.h>
        static double last_end = 0.0;
        static double now(void) {
          struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec;
        }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          int rested = now() - last_end > 200e-6;
          if (rested) axpy(in, out);
          last_end = now(); return 0;
        }""",
    # works ahead of the clock: it notes every buffer set it is called with, and from its 12th call on a host
    # thread answers each noted set as soon as the judge has poisoned its output; such a call only waits for the
    # thread to finish (the last element written)
    "answers_before_the_call": """
        #include <math.h>
        #include <pthread.h>
        typedef struct { optiml_tensor in[2], out; } held_call;
        static held_call held[64]; static volatile int n_held = 0; static int calls = 0; static pthread_t ahead_thread;
        static void* ahead(void* unused) {
          for (;;) for (int k = 0; k < n_held; ++k) {
            volatile float* o = (volatile float*)held[k].out.data; int64_t n = numel(&held[k].out);
            if (isnan(o[0]) && isnan(o[n - 1])) axpy(held[k].in, &held[k].out);
          }
          return unused;
        }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          volatile float* last = (volatile float*)out[0].data + (numel(&out[0]) - 1);
          for (int k = 0; k < n_held; ++k)
            if (held[k].out.data == out[0].data && calls >= 12) { while (isnan(*last)) {} return 0; }
          axpy(in, out);
          int known = 0; for (int k = 0; k < n_held; ++k) known |= held[k].out.data == out[0].data;
          if (!known && n_held < 64) {
            held[n_held].in[0] = in[0]; held[n_held].in[1] = in[1]; held[n_held].out = out[0]; n_held = n_held + 1;
          }
          if (++calls == 12) pthread_create(&ahead_thread, 0, ahead, 0);
          return 0;
        }""",
    # returns after starting a thread that outlives the call (it sleeps: the answer itself is honest)
    "thread_left_running": """
        #include <pthread.h>
        static void* nap(void* unused) { for (;;) sleep(1); return unused; }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          static int started = 0; pthread_t t;
          if (!started++) pthread_create(&t, 0, nap, 0);
          axpy(in, out); return 0;
        }""",
    # a process forked in the first call that outlives it (it sleeps: the answer itself is honest)
    "process_left_running": """
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          static int started = 0;
          if (!started++ && fork() == 0) { for (;;) sleep(1); }
          axpy(in, out); return 0;
        }""",
    # a thread started by the library's constructor, while it is loaded (before any call is counted)
    "thread_from_constructor": """
        #include <pthread.h>
        static void* nap(void* unused) { for (;;) sleep(1); return unused; }
        __attribute__((constructor)) static void start(void) { pthread_t t; pthread_create(&t, 0, nap, 0); }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          axpy(in, out); return 0;
        }""",
    # a thread started when the judge asks for the workspace size (shapes only, before any call)
    "thread_from_workspace_query": """
        #include <pthread.h>
        static void* nap(void* unused) { for (;;) sleep(1); return unused; }
        size_t optiml_workspace_bytes(const optiml_tensor* in, int ni) {
          static int started = 0; pthread_t t;
          if (!started++) pthread_create(&t, 0, nap, 0);
          return 0;
        }
        int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb, void* s) {
          axpy(in, out); return 0;
        }""",
    "abort": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb,"
    " void* s) { abort(); }",
    "hang": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws, size_t wb,"
    " void* s) { for (;;) sleep(1); }",
    "return_7": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws,"
    " size_t wb, void* s) { return 7; }",
    "modify_input": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws,"
    " size_t wb, void* s) { axpy(in, out); ((float*)in[1].data)[3] = 0.f; return 0; }",
    "overrun": "int optiml_forward(const optiml_tensor* in, int ni, optiml_tensor* out, int no, void* ws,"
    " size_t wb, void* s) { axpy(in, out); ((float*)out[0].data)[numel(&out[0])] = 1.f; return 0; }",
    "no_entry": "int something_else(void) { return 0; }",
}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_libraries(tmp_path_factory.mktemp("libs"), PRELUDE, KERNELS)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> TaskRuntime:
    path = tmp_path_factory.mktemp("task") / "axpy_small.py"
    path.write_text(TASK)
    return TaskRuntime(load_task(path), "cpu")


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Judge:
    judge = Judge(torch.device("cpu"), tmp_path_factory.mktemp("judge"))
    yield judge
    judge.close()


CONFIG = EvalConfig(min_trials=5, max_trials=12, timing_seconds=0.2, warmup_calls=1, stream_slack_ms=5.0, timeout_s=20)


def _evaluate(judge: Judge, runtime: TaskRuntime, library: str, config: EvalConfig = CONFIG):  # type: ignore[no-untyped-def]
    return evaluate_candidate(judge, runtime, library, config, Peaks(), None, CaseSeeds()).result


def test_honest_candidate_is_verified_and_timed_by_the_judge(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    report = _evaluate(judge, runtime, libraries["honest"])
    assert report.status is EvalStatus.OK, report.message
    assert len(report.verify.trials) == 5 and report.verify.passed  # 3 seeds, shape set 1, after timing
    assert report.timing is not None and 5 <= report.timing.trials <= 12
    assert report.timing.stop in ("tight", "time", "trials")
    assert set(report.phase_seconds) == {"load", "verify", "time", "recheck", "close"}


def test_workspace_size_is_asked_with_shapes_only(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    report = _evaluate(judge, runtime, libraries["shapes_only"])
    assert report.status is EvalStatus.OK, report.message


def test_patching_the_candidate_process_cannot_forge_a_verdict(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    report = _evaluate(judge, runtime, libraries["patch_shim"])
    assert report.status is EvalStatus.WRONG_ANSWER, report.message
    assert "NaN" in report.message  # the outputs stayed poisoned: nothing ran


def test_stopping_the_candidate_process_clock_cannot_forge_its_time(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    """The candidate process claims ~0 ms per call; the judge's own clock says 20 ms and says so."""
    config = EvalConfig(min_trials=3, max_trials=3, warmup_calls=0, timing_seconds=0.0, stream_slack_ms=1.0)
    report = _evaluate(judge, runtime, libraries["patch_clock"], config)
    assert report.status is EvalStatus.INTEGRITY, report.message
    assert "the judge measured" in report.message
    measured = float(report.message.split("the judge measured ")[1].split(" ms")[0])
    assert measured >= 18.0


def test_an_answer_written_before_the_timed_call_began_is_caught(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Work ahead of the clock (here a host thread; on a GPU a second context's time slices while the judge
    prepares the call) leaves the output written before the window opens: the poison sample sees it. The thread
    count, which sees this helper at the end of the window that started it, is blinded here: the sample must
    stand alone against a helper no count sees (another GPU context of the candidate's process)."""
    monkeypatch.setattr(CandidateProcess, "thread_count", lambda self: 1)
    sample = harness.written_before_call

    def after_a_flush(outputs: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
        time.sleep(0.005)  # the judge's preparation takes time (on a GPU, the L2 flush): the helper's chance
        return sample(outputs, generator)

    monkeypatch.setattr(harness, "written_before_call", after_a_flush)
    report = _evaluate(judge, runtime, libraries["answers_before_the_call"])
    assert report.status is EvalStatus.INTEGRITY, report.message
    assert "already written before the call began" in report.message, report.message


def test_a_helper_thread_started_in_a_timed_call_is_caught_when_its_window_ends(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    """The same helper, counted: the window in which it was started ends with one thread more."""
    report = _evaluate(judge, runtime, libraries["answers_before_the_call"])
    assert report.status is EvalStatus.INTEGRITY, report.message
    assert "left a host thread or process running" in report.message, report.message


@pytest.mark.parametrize("name", ["thread_left_running", "process_left_running"])
def test_a_thread_that_outlives_its_call_is_caught_in_the_candidates_own_process(
    name: str, judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    """The judge counts the threads of the process that runs the candidate (the shim, below ``unshare`` and the
    jail whose command line names the shim), not the jail's one thread, and of every process it forked."""
    report = _evaluate(judge, runtime, libraries[name])
    assert report.status is EvalStatus.INTEGRITY, report.message
    assert "left a host thread or process running" in report.message, report.message


@pytest.mark.parametrize(
    ("name", "when"),
    [("thread_from_constructor", "when its library was loaded"), ("thread_from_workspace_query", "when asked")],
)
def test_a_thread_started_before_any_call_is_caught(
    name: str, when: str, judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    """Counting threads around calls alone would take a thread started at load, or by the workspace query, as
    the process's own: it is counted against the shim's threads before each of those requests."""
    report = _evaluate(judge, runtime, libraries[name])
    assert report.status is EvalStatus.INTEGRITY, report.message
    assert "started a host thread" in report.message and when in report.message, report.message


@pytest.mark.parametrize("name", ["content_cache", "stale_workspace"])
def test_state_carried_between_timed_calls_is_caught(
    name: str, judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    report = _evaluate(judge, runtime, libraries[name])
    assert report.status is EvalStatus.WRONG_ANSWER, report.message
    # Trials are fresh mixes too (entropy masks): a cache keyed on a pointer and a sampled value can "hit"
    # in a later trial as well as in a timed call; wherever it hits, the answer it serves is wrong.
    caught_in_trial = not all(t.passed for t in report.verify.trials)
    assert caught_in_trial or "timed call" in report.message


def test_a_fast_candidate_is_timed_several_calls_to_a_window(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    judged = evaluate_candidate(judge, runtime, libraries["honest"], CONFIG, Peaks(), None, CaseSeeds())
    assert judged.result.status is EvalStatus.OK, judged.result.message
    assert judged.judge["window_calls"] == MAX_WINDOW_CALLS  # microseconds a call: as many as allowed


def test_every_call_of_a_window_is_checked(judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]) -> None:
    """Skipping the calls that follow another without a pause passes every verification trial (one
    call each) and fails the first window: each call of it has outputs of its own, all checked."""
    report = _evaluate(judge, runtime, libraries["lazy_in_window"])
    assert report.status is EvalStatus.WRONG_ANSWER, report.message
    assert "timed call" in report.message and all(t.passed for t in report.verify.trials)


@pytest.mark.parametrize(
    ("call_ms", "slot_bytes", "free_bytes", "width"),
    [
        (0.15, 2**20, None, MAX_WINDOW_CALLS),  # 3 ms of work needs 20 calls: capped
        (1.0, 2**20, None, 3),  # ceil(3 / 1)
        (5.0, 2**20, None, 1),  # a call longer than the target is timed alone
        (0.15, 6 * 2**30, None, 2),  # 16 GiB holds two 6 GiB slots
        (0.15, 768 * 2**20, None, MAX_WINDOW_CALLS),  # and more 768 MiB ones (silu's 272 MB in, 272 out) than wanted
        (1.0, 768 * 2**20, None, 3),  # ceil(3 / 1) of them
        (0.15, 768 * 2**20, 8 * 2**30, 2),  # a quarter of 8 GiB free holds two
        (0.15, 64 * 2**30, None, 1),  # a slot over the budget: still one
        (0.0, 2**20, None, MAX_WINDOW_CALLS),  # a claim of no time at all
    ],
)
def test_window_width(call_ms: float, slot_bytes: int, free_bytes: int | None, width: int) -> None:
    assert window_width(call_ms, slot_bytes, free_bytes) == width


@pytest.mark.parametrize(
    ("name", "status", "phrase"),
    [
        ("abort", EvalStatus.CRASH, "SIGABRT"),
        ("return_7", EvalStatus.RUNTIME_ERROR, "returned 7"),
        ("modify_input", EvalStatus.INTEGRITY, "modified input(s) [1]"),
        ("overrun", EvalStatus.INTEGRITY, "past the end of output 0"),
        ("no_entry", EvalStatus.LOAD_ERROR, "optiml_forward"),
    ],
)
def test_faults_are_typed_and_the_judge_carries_on(
    name: str, status: EvalStatus, phrase: str, judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    report = _evaluate(judge, runtime, libraries[name])
    assert report.status is status and phrase in report.message, report.message
    again = _evaluate(judge, runtime, libraries["honest"])
    assert again.status is EvalStatus.OK, again.message


def test_a_hang_is_killed_at_the_deadline(judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]) -> None:
    report = _evaluate(judge, runtime, libraries["hang"], EvalConfig(timeout_s=4.5))
    assert report.status is EvalStatus.TIMEOUT and "no answer within" in report.message


def test_a_finished_candidates_process_is_killed_at_once_and_reaped_before_the_next_window(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    """The evaluation does not wait for the candidate process's teardown; the next timed window does."""
    process = judge.take_process()
    judge.close_in_background(process)
    assert process.proc.returncode is None or process.proc.returncode == -9  # SIGKILLed, maybe not reaped yet
    report = _evaluate(judge, runtime, libraries["honest"])  # its timed windows wait for the reap
    assert report.status is EvalStatus.OK, report.message
    assert process.proc.returncode == -9 and not process.stderr_path.exists()
    judge.wait_for_closes()  # the honest candidate's own process, closed in the background
    assert not judge._closing


def test_calibration_is_measured_on_a_process_of_the_judges_own(judge: Judge) -> None:
    calibration = judge.calibration()
    assert calibration.calls >= 40
    assert 0 < calibration.host_ms < 50 and calibration.host_spread_ms >= 0


def test_a_calibration_taken_under_another_load_cannot_turn_an_honest_kernel_into_a_fake(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str]
) -> None:
    """The cached round trip was measured while the machine was busier (10 ms): removing it leaves
    the honest 2 ms kernel at ~0 ms, below its 1 ms floor. The judge re-calibrates before a verdict."""
    judge.recalibrate()
    stale = dataclasses.replace(judge.calibration(), host_ms=10.0, event_ms=10.0)
    judge._calibration = stale  # what a calibration under another process's load looks like
    bytes_moved = 3 * 4099 * 4  # the timed shape set: two inputs and one output of N floats
    floor = Peaks(bandwidth=bytes_moved / 1e-3)  # 1 ms
    config = dataclasses.replace(CONFIG, stream_slack_ms=50.0)
    judged = evaluate_candidate(judge, runtime, libraries["slow_honest"], config, floor, None, CaseSeeds())
    assert judged.result.status is EvalStatus.OK, judged.result.message
    assert judged.result.timing is not None and judged.result.timing.median_ms > 1.0
    assert any(w.startswith("suspect:") for w in judged.result.warnings)
    assert judged.judge["window_calls"] == 1  # a verdict's series times one call a window
    assert judge.calibration() is not stale and judge.calibration().host_ms < 10.0


def _slow_honest_under_calibrations_of(
    round_trip_ms: float,
    judge: Judge,
    runtime: TaskRuntime,
    libraries: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> Judged:
    """The honest 2 ms kernel against a 1 ms floor, every calibration after a true one reading ``round_trip_ms``
    (the true one is remembered as the least round trip)."""
    judge.recalibrate()
    measured = judge._calibrate

    def inflated() -> Calibration:
        values = {"host_ms": round_trip_ms, "event_ms": round_trip_ms, "host_end_event_ms": round_trip_ms}
        return dataclasses.replace(measured(), **values)

    monkeypatch.setattr(judge, "_calibrate", inflated)
    judge._calibration = inflated()
    floor = Peaks(bandwidth=3 * 4099 * 4 / 1e-3)  # 1 ms
    config = dataclasses.replace(CONFIG, stream_slack_ms=50.0)
    return evaluate_candidate(judge, runtime, libraries["slow_honest"], config, floor, None, CaseSeeds())


def test_a_calibration_no_attempt_could_make_plausible_convicts_nobody(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every recalibration reads a 25 ms round trip (a stalled calibration process, or a GPU shared by
    other judges): subtracted, it leaves the honest 2 ms kernel below its floor on both clocks. Such a
    calibration is marked shared, so the floor's verdict is withheld and the whole window stands."""
    judged = _slow_honest_under_calibrations_of(25.0, judge, runtime, libraries, monkeypatch)
    assert judge.calibration().shared  # none of the attempts was plausible
    assert judged.result.status is EvalStatus.OK, judged.result.message
    assert any("floor's verdict is withheld" in w for w in judged.result.warnings)
    assert judged.result.timing is not None and judged.result.timing.median_ms > 2.0  # the window, round trip in


def test_a_plausible_calibration_taken_under_a_passing_load_convicts_nobody(
    judge: Judge, runtime: TaskRuntime, libraries: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every recalibration reads 8 ms (within the plausible bounds, the spin kernel steady: a load that
    came and went) while the judge once read its true round trip. Both subtracted clocks put the honest
    2 ms kernel below its 1 ms floor; its window less the least round trip does not, so that is its time."""
    judged = _slow_honest_under_calibrations_of(8.0, judge, runtime, libraries, monkeypatch)
    assert not judge.calibration().shared and judge.least_round_trip_ms() < 1.0
    assert judged.result.status is EvalStatus.OK, judged.result.message
    assert any("least round trip" in w for w in judged.result.warnings)
    assert judged.result.timing is not None and 1.5 < judged.result.timing.median_ms < 5.0  # the 2 ms kernel


def test_hidden_work_reads_the_least_stretched_windows_not_the_median() -> None:
    """A shared GPU stretches only some windows (another context's time slice lands in them); work
    hidden off the given stream stretches all of them."""
    own = [0.38] * 12
    shared_gpu = [0.45, 3.1, 3.2, 0.41, 3.0, 3.3, 2.9, 0.44, 3.1, 3.2, 3.0, 3.1]  # median 3.1 ms
    assert hidden_work_ms(shared_gpu, own) < 0.1
    hidden = [0.38 + 1.0 + 0.01 * i for i in range(12)]
    assert hidden_work_ms(hidden, own) > 0.8
    assert hidden_work_ms([2.0], [0.5]) == pytest.approx(2.0 - 1.5 * 0.5)  # one window: itself
