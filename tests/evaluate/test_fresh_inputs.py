"""Issue 39, classes 1, 2 and 7: nothing a candidate sees predicts a call's contents, a retried series
draws new ones, and work left after the stream's last event convicts whatever the GPU's load.

The first parts run the real judge on the CPU (host libraries, file-mapped buffers): the seeds of its
cases come from OS entropy, every trial and timed call is a fresh entropy-masked mix of two cached
cases, and a second series (the outside-stream retry) never replays the first one's inputs.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.evaluate.host_kernels import HONEST, PRELUDE, TASK, build_host_libraries

from optiml.evaluate import harness
from optiml.evaluate.arena import SharedBuffers
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.harness import (
    CaseSeeds,
    FreshInputs,
    Peaks,
    PlannedTrial,
    claimed_tail_ms,
    evaluate_candidate,
    fresh_trial,
    timing_cases,
    verification_plan,
)
from optiml.evaluate.judge import Judge
from optiml.evaluate.runtime import TaskRuntime
from optiml.task import load_task
from optiml.values import EvalStatus

CONFIG = EvalConfig(min_trials=4, max_trials=6, timing_seconds=0.1, warmup_calls=1, stream_slack_ms=5.0, timeout_s=20)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> TaskRuntime:
    path = tmp_path_factory.mktemp("task") / "axpy_fresh.py"
    path.write_text(TASK)
    return TaskRuntime(load_task(path), "cpu")


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    return build_host_libraries(tmp_path_factory.mktemp("lib"), PRELUDE, {"honest": HONEST})["honest"]


def digest(tensors: list[Any]) -> str:
    h = hashlib.sha256()
    for t in tensors:
        if isinstance(t, torch.Tensor):
            h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_case_seeds_are_drawn_from_entropy_each_on_its_own() -> None:
    first, second = CaseSeeds(), CaseSeeds()
    assert first.pair() != second.pair()  # another judge (or task preparation) draws other cases
    assert first.pair() == first.pair()  # kept while the judge holds the task: cases are cached by seed
    drawn = {first.seed("native", 0, 0), first.seed("native", 0, 1), first.seed("normal"), first.seed("native", 1)}
    assert len(drawn) == 4  # independent: none follows from another


def test_every_trial_is_a_fresh_mix_with_its_own_reference(runtime: TaskRuntime) -> None:
    seeds = CaseSeeds()
    planned = PlannedTrial(seeds.pair(), 0, "native")
    one, two = fresh_trial(runtime, planned), fresh_trial(runtime, planned)
    assert digest(one.args) != digest(two.args)
    assert one.seed != two.seed
    for case in (one, two):
        torch.testing.assert_close(case.expected[0], 2.5 * case.args[0] + case.args[1])
        cached = [runtime.case(s).args[0] for s in planned.seeds]
        from_a_or_b = (case.args[0] == cached[0]) | (case.args[0] == cached[1])
        assert bool(from_a_or_b.all())  # every value is one of the two cases': the distribution is kept


def test_the_plan_names_cached_pairs_not_fixed_seeds(runtime: TaskRuntime) -> None:
    plan_a = verification_plan(runtime, EvalConfig(), CaseSeeds())
    plan_b = verification_plan(runtime, EvalConfig(), CaseSeeds())
    assert {p.seeds for p in plan_a}.isdisjoint({p.seeds for p in plan_b})
    assert all(p.seeds[0] != EvalConfig().base_seed for p in plan_a)


def test_a_retried_series_never_replays_the_first_ones_inputs(runtime: TaskRuntime, tmp_path: Path) -> None:
    seeds = CaseSeeds()
    cases = timing_cases(runtime, seeds)
    buffers = SharedBuffers(cases[0].abi_inputs, cases[0].expected, str(tmp_path))
    first_series, retry = FreshInputs(runtime, *cases), FreshInputs(runtime, *cases)
    seen = []
    for fresh in (first_series, first_series, retry, retry):
        expected = fresh.fill(buffers)
        torch.testing.assert_close(expected[0], 2.5 * buffers.args[0] + buffers.args[1])
        seen.append(digest(buffers.args[:2]))
    assert len(set(seen)) == len(seen)


def test_two_evaluations_see_different_inputs_and_the_retry_new_ones(
    runtime: TaskRuntime, honest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the real judge: every timed call's contents are new, across evaluations and across the
    retried series that an outside-stream suspicion starts (forced here)."""
    seen: list[str] = []
    real_fill = FreshInputs.fill

    def recording_fill(self: FreshInputs, buffers: SharedBuffers) -> list[torch.Tensor]:
        expected = real_fill(self, buffers)
        seen.append(digest(buffers.args[: len(self.first.args)]))
        return expected

    monkeypatch.setattr(FreshInputs, "fill", recording_fill)
    # each evaluation's first series (several calls a window) is suspect; the retry (one a window) is clean
    monkeypatch.setattr(harness, "_outside_stream", lambda detail, config: detail["window_calls"] > 1)
    judge = Judge(torch.device("cpu"), tmp_path)
    try:
        reports = [evaluate_candidate(judge, runtime, honest, CONFIG, Peaks(), None, CaseSeeds()) for _ in range(2)]
    finally:
        judge.close()
    for judged in reports:
        assert judged.result.status is EvalStatus.OK, judged.result.message
    trial_seeds = [{t.seed for t in judged.result.verify.trials} for judged in reports]
    assert trial_seeds[0].isdisjoint(trial_seeds[1])
    assert len(seen) > 8 and len(set(seen)) == len(seen)


def test_work_after_the_streams_last_event_is_read_from_the_tail() -> None:
    def claims(tail_us: float) -> list[dict[str, Any]]:
        return [{"host_us": {"tail": tail_us, "sync": tail_us + 100.0}} for _ in range(5)]

    assert claimed_tail_ms(claims(8.0), 1) == pytest.approx(0.008)
    assert claimed_tail_ms(claims(800.0), 4) == pytest.approx(0.2)  # a window's tail, shared by its calls
    assert claimed_tail_ms([{"rc": 0}], 1) == 0.0  # a claim without it (host mode) says nothing
    honest = {"claimed_tail_ms": 0.01, "claimed_stream_ms": 0.4}
    side_stream = {"claimed_tail_ms": 0.38, "claimed_stream_ms": 0.002}
    half_off = {"claimed_tail_ms": 0.2, "claimed_stream_ms": 0.2}
    tiny = {"claimed_tail_ms": 0.03, "claimed_stream_ms": 0.0}
    assert not harness._off_stream_tail(honest)
    assert harness._off_stream_tail(side_stream) and harness._off_stream_tail(half_off)
    assert not harness._off_stream_tail(tiny)  # below the slack: host noise, not a kernel's work


def _counting_builds(runtime: TaskRuntime, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []
    real_build = TaskRuntime.build_model

    def build_model(self: TaskRuntime, seed: int, shape_set: int = 0) -> torch.nn.Module:
        built.append(seed)
        return real_build(self, seed, shape_set)

    monkeypatch.setattr(TaskRuntime, "build_model", build_model)
    return built


def test_the_second_case_of_a_pair_is_its_inputs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mix takes only the second case's elements: no model is built for it (a level-3 model's parameters
    are initialised on the CPU, seconds a build), and a signed case needs no native twin built either."""
    path = tmp_path / "axpy_builds.py"
    path.write_text(TASK)
    runtime = TaskRuntime(load_task(path), "cpu")
    built = _counting_builds(runtime, monkeypatch)
    seeds = CaseSeeds()
    first, second = timing_cases(runtime, seeds)
    assert built == [first.seed] == [seeds.pair()[0]]
    assert second.seed == seeds.pair()[1] and digest(second.args) == digest(runtime.make_args(second.seed))
    fresh_trial(runtime, PlannedTrial(seeds.pair("normal"), 0, "normal"))
    assert built == [seeds.pair()[0], seeds.pair("normal")[0]]  # the normal pair's first, once; no twin


def test_cached_inputs_count_against_the_memory_plan(tmp_path: Path) -> None:
    from optiml.evaluate.memory import MemoryPlan

    path = tmp_path / "axpy_plan.py"
    path.write_text(TASK)
    runtime = TaskRuntime(load_task(path), "cpu")
    runtime.plan = MemoryPlan(device_bytes=1, case_bytes=1, max_cases=2, timing_sets=1)
    runtime.case(1)
    for seed in (2, 3, 4):
        runtime.inputs(seed)
    report = runtime.memory_report()
    assert report["cached_cases"] + report["cached_inputs"] <= 2
    assert report["cached_cases"] == 1  # the inputs, cheaper to draw again, went first
