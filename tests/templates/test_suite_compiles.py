"""Every suite task's planned kernel, in its default configuration, compiles with nvcc (no GPU needed).

One build per task, compiled in parallel; the GPU test (test_templates_gpu.py) verifies every seed
configuration numerically. Template sources read their sizes at run time, so one build serves every
shape set of a task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITES = ("tasks/*.py", "tasks/memory/*.py", "tasks/compute/*.py")


@pytest.mark.nvcc
def test_every_suite_task_compiles(tmp_path: Path) -> None:
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    paths = sorted(p for pattern in SUITES for p in ROOT.glob(pattern))  # every suite task plans
    assert len(paths) >= 75
    sources = []
    for path in paths:
        kernels = template_kernels(load_task(path))
        sources.append(kernels.render(kernels.default()))
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    results = compiler.compile_many(sources)
    failed = [f"{p.stem}: {r.error_summary(3)}" for p, r in zip(paths, results, strict=True) if not r.ok]
    assert not failed, "\n".join(failed)
    assert all(r.resources for r in results), "ptxas reported no kernel resources"


def test_an_unplannable_task_says_which_op(tmp_path: Path) -> None:
    from optiml.errors import OptimlError
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    path = tmp_path / "sort_rows.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return torch.sort(x, dim=1).values\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 5)]\n\n\ndef get_init_inputs():\n    return []\n",
        encoding="utf-8",
    )
    with pytest.raises(OptimlError) as info:
        template_kernels(load_task(path))
    message = str(info.value)
    assert "no template for aten.sort" in message and "\n" not in message
