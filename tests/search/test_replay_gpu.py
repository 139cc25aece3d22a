"""On a GPU: record transpose's whole template space with the real evaluator (what
benchmarks/record_landscape.py does per task), then replay a search on the record."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.search import SearchConfig
from optiml.search.replay import Measurement, RecordedLandscape
from optiml.search.replay.ablation import replay_search
from optiml.search.replay.space import enumerate_space
from optiml.task import load_task
from optiml.templates.kernels import template_kernels

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def test_a_recorded_transpose_landscape_replays_without_misses(kernel_cache: Path) -> None:
    task = load_task(TASKS / "transpose.py")
    kernels = template_kernels(task)
    space = enumerate_space(kernels)
    compiler = Compiler(CompilerConfig(cache_dir=kernel_cache))
    with Evaluator(task, EvalConfig(timing_seconds=0.2, max_trials=30), compiler=compiler) as evaluator:
        evaluator.prepare()
        results = evaluator.evaluate_many([kernels.render(list(c)) for c in space.configs])
        reference = dict(evaluator.reference)
    measurements = tuple(
        Measurement(tuple(c), r.status, r.message, r.timing, r.floor_ms)
        for c, r in zip(space.configs, results, strict=True)
    )
    assert all(m.ok for m in measurements), [m.message for m in measurements if not m.ok]
    landscape = RecordedLandscape(
        task="transpose",
        task_digest=task.digest,
        plan=kernels.describe(),
        mode=space.mode,
        default=space.default,
        seeds=tuple(tuple(s) for s in kernels.seeds()),
        measurements=measurements,
        reference=reference,
    )
    run = replay_search(landscape, task, kernels, SearchConfig(strategy="greedy"), seed=0, evals=len(measurements))
    assert run.misses == 0 and run.speedup >= 1.0
