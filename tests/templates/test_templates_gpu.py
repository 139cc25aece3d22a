"""Every template variant of every suite task, verified on the GPU at every shape set.

Runs in-process (no worker) so that ``compute-sanitizer`` can watch it:
``PYTHONPATH=src compute-sanitizer python3 -m pytest -m gpu tests/templates/test_templates_gpu.py -k softmax``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tu import gpu_trial_failures

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
TASKS = sorted([*ROOT.glob("tasks/*.py"), *ROOT.glob("tasks/memory/*.py"), *ROOT.glob("tasks/compute/*.py")])
SEEDS = int(os.environ.get("OPTIML_TEMPLATE_SEEDS", "4"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def compiler(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from optiml.kernel.compiler import Compiler, CompilerConfig

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return Compiler(CompilerConfig(cache_dir=tmp_path_factory.mktemp("cache")))


@pytest.mark.parametrize("path", TASKS, ids=lambda p: p.stem)
def test_every_seed_verifies_at_every_shape_set(path: Path, compiler) -> None:  # type: ignore[no-untyped-def]
    from optiml.evaluate.runtime import TaskRuntime
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    task = load_task(path)
    kernels = template_kernels(task)
    configs = kernels.seeds(SEEDS)
    built = compiler.compile_many([kernels.render(c) for c in configs])
    runtime = TaskRuntime(task, "cuda")
    failures = []
    for config, compiled in zip(configs, built, strict=True):
        failures += gpu_trial_failures(runtime, compiled, " + ".join(c.label() for c in config))
    assert not failures, "\n".join(failures)
