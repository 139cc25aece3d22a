"""Replay: recorded landscapes answer by configuration, run stores by digest, and a replayed search is the
recorded one; modelled look-ahead landscapes over the real template spaces; intervals of an ablation."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from optiml.errors import ConfigError
from optiml.search import Budgets, SearchConfig, run_search
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.search.replay import Measurement, RecordedLandscape, ReplayEvaluator, StoredResults, load_landscapes
from optiml.search.replay.ablation import Interval, ScoredRun, replay_search, summarise
from optiml.search.replay.evaluator import NOT_RECORDED
from optiml.search.replay.model import modelled_landscape
from optiml.search.replay.record import EXHAUSTIVE, SWEEPS, landscapes_json
from optiml.search.replay.space import enumerate_space, group_configs
from optiml.store import RunStore
from optiml.task import Task, load_task
from optiml.templates.base import GroupConfig
from optiml.templates.kernels import TemplateKernels, template_kernels
from optiml.values import EvalStatus, TimingStats

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def timing(median: float) -> TimingStats:
    return TimingStats(median, 0.99 * median, 1.01 * median, 0.98 * median, 1.05 * median, 40)


def a(variant: str, **knobs: int) -> GroupConfig:
    return GroupConfig.of(variant, **knobs)


@pytest.fixture(scope="module")
def transpose() -> tuple[Task, TemplateKernels]:
    task = load_task(TASKS / "transpose.py")
    return task, template_kernels(task)


def recorded_transpose(
    task: Task, kernels: TemplateKernels, repeats: tuple[Measurement, ...] = ()
) -> RecordedLandscape:
    """A hand-made record of transpose's six configurations: the 64-tile ones fastest, one crashes."""
    space = enumerate_space(kernels)
    measurements = []
    for i, configs in enumerate(space.configs):
        if configs[0].variant == "naive_gather" and configs[0].get("threads") == 256:
            measurements.append(Measurement(configs, EvalStatus.RUNTIME_ERROR, "illegal address"))
        else:
            fast = configs[0].get("tile") == 64
            measurements.append(Measurement(configs, EvalStatus.OK, timing=timing(1.0 - 0.3 * fast + 0.01 * i)))
    return RecordedLandscape(
        task="transpose",
        task_digest=task.digest,
        plan=kernels.describe(),
        mode=space.mode,
        default=space.default,
        seeds=(space.default,),
        measurements=tuple(measurements),
        repeats=repeats,
        reference={"eager": timing(1.2)},
    )


def test_a_space_is_enumerated_exhaustively_or_as_sweeps(transpose: tuple[Task, TemplateKernels]) -> None:
    _, kernels = transpose
    space = enumerate_space(kernels)
    assert space.mode == EXHAUSTIVE and len(space.configs) == 6 and space.configs[0] == space.default
    assert len(group_configs(kernels.spaces[0])) == 6
    cross_entropy = template_kernels(load_task(TASKS / "cross_entropy.py"))
    sweeps = enumerate_space(cross_entropy)
    sizes = [len(group_configs(s)) for s in cross_entropy.spaces]
    assert sweeps.mode == SWEEPS and len(sweeps.configs) == sum(sizes) - len(sizes) + 1  # the default once


def test_a_recorded_landscape_round_trips_through_json(tmp_path: Path, transpose: tuple[Task, TemplateKernels]) -> None:
    landscape = recorded_transpose(*transpose)
    path = tmp_path / "landscape.json"
    path.write_text(json.dumps({"landscapes": landscapes_json([landscape])}))
    [loaded] = load_landscapes(path)
    assert loaded == landscape and loaded.lookup(landscape.default) == landscape.measurements[0]
    (tmp_path / "bad.json").write_text('{"rows": []}')
    with pytest.raises(ConfigError, match="not a recorded landscape"):
        load_landscapes(tmp_path / "bad.json")


def test_the_replay_evaluator_answers_from_the_record(transpose: tuple[Task, TemplateKernels]) -> None:
    task, kernels = transpose
    landscape = recorded_transpose(task, kernels)
    evaluator = ReplayEvaluator([landscape], seed=0)
    assert evaluator.noise == 0.0  # no repeats recorded: no jitter
    for measurement in landscape.measurements:
        kernel = kernels.render(list(measurement.configs))
        result = evaluator.evaluate(kernel)
        assert result.status is measurement.status and result.timing == measurement.timing
        assert result.kernel_digest == kernel.digest and result.reference == landscape.reference
    assert evaluator.evaluate(kernels.render(list(landscape.default))).ok  # asked again: same answer
    missed = evaluator.evaluate(landscape_kernel())  # not a template kernel of this record
    assert missed.status is EvalStatus.REJECTED and missed.message == NOT_RECORDED
    assert sum(evaluator.misses.values()) == 1


def test_recorded_noise_jitters_timings_reproducibly(transpose: tuple[Task, TemplateKernels]) -> None:
    task, kernels = transpose
    plain = recorded_transpose(task, kernels)
    first = plain.measurements[0]
    assert first.timing is not None
    repeats = tuple(
        Measurement(first.configs, EvalStatus.OK, timing=timing(first.timing.median_ms * f)) for f in (1.02, 0.98)
    )
    landscape = recorded_transpose(task, kernels, repeats)
    assert landscape.run_to_run_noise() == pytest.approx(math.log(1.02) / math.sqrt(2), rel=0.02)
    kernel = kernels.render(list(landscape.default))

    def medians(seed: int) -> list[float]:
        evaluator = ReplayEvaluator([landscape], seed=seed)
        times = [evaluator.evaluate(kernel).time_ms for _ in range(3)]
        return [t for t in times if t is not None] + [evaluator.retime([kernel], 5)[0].median_ms]

    assert medians(1) == medians(1)  # the same seed replays the same draws
    assert medians(1) != medians(2) and len(set(medians(1))) == 4  # each evaluation draws anew
    assert all(abs(math.log(t / first.timing.median_ms)) < 6 * landscape.run_to_run_noise() for t in medians(3))


def test_a_sweeps_landscape_models_combinations_additively() -> None:
    default = (a("block_row", threads=512), a("split_row", threads=256))
    one, two = a("warp_row", threads=128), a("split_row", threads=512)
    crash = a("block_row", threads=128)
    landscape = RecordedLandscape(
        task="two kernels",
        task_digest="d",
        plan="reduce → reduce",
        mode=SWEEPS,
        default=default,
        seeds=(default,),
        measurements=(
            Measurement(default, EvalStatus.OK, timing=timing(1.0)),
            Measurement((one, default[1]), EvalStatus.OK, timing=timing(0.7)),
            Measurement((default[0], two), EvalStatus.OK, timing=timing(0.9)),
            Measurement((crash, default[1]), EvalStatus.TIMEOUT, "hang"),
        ),
    )
    combined = landscape.lookup((one, two))
    assert combined is not None and combined.timing is not None
    assert combined.timing.median_ms == pytest.approx(1.0 - 0.3 - 0.1)
    failed = landscape.lookup((crash, two))
    assert failed is not None and failed.status is EvalStatus.TIMEOUT
    assert landscape.lookup((a("col", threads=64), two)) is None  # a configuration never swept


def test_a_replayed_search_repeats_the_recorded_run(task: Task, tmp_path: Path) -> None:
    """A run store is a record: replaying the same seeded search over it evaluates the same kernels in
    the same order, every one answered from the store, and returns the same best kernel."""
    config = SearchConfig(parallel_evaluations=1, parallel_proposals=1, reproducible=True, budgets=Budgets(25))
    config = replace(config, retime_top_k=0)
    with RunStore(tmp_path / "recorded.db") as store:
        recorded = run_search(
            task, landscape_kernel(), LandscapeEvaluator(Landscape(seed=4)), [KnobProposer(4)], None, store, config
        )
        record = StoredResults.from_store(store, task.digest)
        order = list(store.evaluations(recorded.run_id))
    assert len(record) == 25 and record.reference
    replayer = ReplayEvaluator([record])
    with RunStore(tmp_path / "replayed.db") as store:
        replayed = run_search(task, landscape_kernel(), replayer, [KnobProposer(4)], None, store, config)
        assert list(store.evaluations(replayed.run_id)) == order
    assert not replayer.misses and replayed.best_digest == recorded.best_digest


def test_a_run_store_measures_noise_from_kernels_timed_twice(task: Task, tmp_path: Path) -> None:
    config = SearchConfig(parallel_evaluations=1, reproducible=True, budgets=Budgets(12))
    with RunStore(tmp_path / "runs.db") as store:
        run_search(
            task,
            landscape_kernel(),
            LandscapeEvaluator(Landscape(seed=1, noise=0.05)),
            [KnobProposer(1)],
            None,
            store,
            config,
        )
        record = StoredResults.from_store(store, task.digest)  # the final re-timing timed the top kernels again
        other_task = StoredResults.from_store(store, "another task")
    assert 0.0 < record.run_to_run_noise() < 0.2
    assert len(other_task) == 0


def test_a_modelled_landscape_hides_a_better_variant_behind_a_slower_switch() -> None:
    for name in ("softmax", "prefix_scan"):
        task = load_task(TASKS / f"{name}.py")
        kernels = template_kernels(task)
        landscape = modelled_landscape(name, task, kernels, seed=0, switch_cost=1.15, hidden_gain=0.6)
        root = landscape.lookup(landscape.root())
        best = landscape.best()
        assert root is not None and root.timing is not None and best is not None and best.timing is not None
        assert landscape.root() == landscape.default
        assert best.configs[0].variant != landscape.default[0].variant  # the best is another variant ...
        assert best.timing.median_ms < 0.7 * root.timing.median_ms
        hidden = best.configs[0].variant
        switch = next(m.config for m in kernels.neighbours(list(landscape.default)) if m.config.variant == hidden)
        landed = landscape.lookup((switch,))
        assert landed is not None and landed.timing is not None
        assert landed.timing.median_ms > root.timing.median_ms  # ... reached through a slower switch
        knob_steps = [m for m in kernels.neighbours(list(landscape.default)) if m.kind == "knob"]
        tuned = [landscape.lookup((m.config,)) for m in knob_steps]
        assert min(t.timing.median_ms for t in tuned if t is not None and t.timing) > best.timing.median_ms
        assert landscape.run_to_run_noise() == pytest.approx(0.01)
        assert all(landscape.lookup(m.configs) is not None for m in landscape.measurements)


def test_replay_search_scores_the_returned_kernel_by_its_recorded_time(
    transpose: tuple[Task, TemplateKernels],
) -> None:
    task, kernels = transpose
    landscape = recorded_transpose(task, kernels)
    run = replay_search(landscape, task, kernels, SearchConfig(strategy="greedy"), seed=0, evals=6)
    assert run.misses == 0 and run.evaluations == 6
    root = landscape.lookup(landscape.root())
    fastest = landscape.best()
    assert root is not None and root.timing and fastest is not None and fastest.timing
    assert run.speedup == pytest.approx(root.timing.median_ms / fastest.timing.median_ms)  # all six seen


def test_intervals_and_paired_verdicts() -> None:
    interval = Interval.of([0.1, 0.2, 0.3])
    assert interval.mean == pytest.approx(0.2) and interval.low == pytest.approx(0.2 - 4.303 * 0.1 / math.sqrt(3))
    runs = [ScoredRun("t", "mcts", s, 10, 1.5 + 0.01 * s, True, 0) for s in range(5)]
    runs += [ScoredRun("t", "greedy", s, 10, 1.2 + 0.02 * s, True, 0) for s in range(5)]
    runs += [ScoredRun("t", "best-of-n", s, 10, 1.5 + 0.01 * ((-1) ** s), True, 0) for s in range(5)]
    summary = summarise(runs, ["mcts", "greedy", "best-of-n"])
    cells = summary["landscapes"]["t"]  # type: ignore[index]
    assert cells["mcts vs greedy"]["verdict"] == "mcts ahead"
    assert cells["mcts vs best-of-n"]["verdict"] == "tie within the interval"
    assert cells["greedy vs best-of-n"]["verdict"] == "best-of-n ahead"
    assert summary["ahead_beyond_the_interval"] == {"mcts ahead of greedy": 1, "best-of-n ahead of greedy": 1}
    assert cells["mcts"]["geomean"] == pytest.approx(
        math.exp(statistics.fmean(math.log(r.speedup) for r in runs[:5])), abs=1e-4
    )
