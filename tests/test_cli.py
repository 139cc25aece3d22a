"""The CLI, invoked in-process: help, task checks, skeletons, and one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from optiml.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("eval", "init-kernel", "check-task", "doctor"):
        assert command in result.output


def test_check_task_on_a_starter_task() -> None:
    result = runner.invoke(app, ["check-task", str(ROOT / "tasks" / "layernorm.py")])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "shape sets: 3" in result.output


def test_bad_task_is_one_red_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("class Model:\n  pass\n")
    result = runner.invoke(app, ["check-task", str(bad)])
    assert result.exit_code == 2
    assert "get_inputs" in result.output
    assert "Traceback" not in result.output


@pytest.mark.nvcc
def test_init_kernel_writes_a_skeleton_that_names_every_argument(tmp_path: Path) -> None:
    out = tmp_path / "k.cu"
    result = runner.invoke(app, ["init-kernel", str(ROOT / "tasks" / "layernorm.py"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "inputs[1]  parameter/buffer ln_weight" in text
    assert "optiml_forward" in text
    again = runner.invoke(app, ["init-kernel", str(ROOT / "tasks" / "layernorm.py"), "-o", str(out)])
    assert again.exit_code == 2 and "--force" in again.output


def test_eval_with_missing_kernel_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", str(ROOT / "tasks" / "silu.py"), str(tmp_path / "none.cu")])
    assert result.exit_code == 2
    assert "no such kernel file" in result.output


def test_eval_of_a_non_candidate_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.cu"
    plain.write_text("__global__ void k() {}\n")
    result = runner.invoke(app, ["eval", str(ROOT / "tasks" / "silu.py"), str(plain)])
    assert result.exit_code == 2
    assert "optiml_forward" in result.output and "init-kernel" in result.output


def test_runs_and_show_read_a_stored_search(tmp_path: Path) -> None:
    from optiml.llm import CallRecord, ChatMessage, LLMCallStore, LLMRequest, LLMResponse
    from optiml.search import Budgets, SearchConfig, run_search
    from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
    from optiml.store import RunStore, new_run_id
    from optiml.task import load_task

    task_file = tmp_path / "scale.py"
    task_file.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2.0\n"
        "def get_inputs():\n    return [torch.rand(64)]\ndef get_init_inputs():\n    return []\n"
    )
    store_path = tmp_path / "runs.db"
    config = SearchConfig(strategy="greedy", budgets=Budgets(max_evaluations=12))
    with RunStore(store_path) as store:
        outcome = run_search(
            load_task(task_file),
            landscape_kernel(),
            LandscapeEvaluator(Landscape(seed=3)),
            [KnobProposer(seed=1)],
            None,
            store,
            config,
            run_id=(run_id := new_run_id()),
        )
    assert outcome.run_id == run_id
    with LLMCallStore(store_path) as calls:  # what an LLM proposer's client records under the run id
        for i, owner in enumerate([run_id, run_id, "another-run"]):
            request = LLMRequest((ChatMessage("user", f"q{i}"),), "m", 0.7, 100, purpose="propose")
            response = LLMResponse([f"a{i}"], "m", "openai", 1000, 200, 0.25, 0.1, i == 1, ["stop"])
            calls.record(CallRecord(f"key{i}", owner, "openai", "propose", request, response, 0))
    listed = runner.invoke(app, ["runs", "--store", str(store_path)])
    assert listed.exit_code == 0, listed.output
    assert "scale" in listed.output and "greedy" in listed.output
    best = tmp_path / "best.cu"
    shown = runner.invoke(app, ["show", outcome.run_id, "--store", str(store_path), "--kernel-out", str(best)])
    assert shown.exit_code == 0, shown.output
    assert "optiml_forward" in best.read_text()
    shown_text = " ".join(shown.output.split())  # the run's answers; tokens and dollars of the network ones
    assert "LLM calls 2 (1 from the cache, free), 1,000 tokens in, 200 out, $0.25 · m" in shown_text
    missing = runner.invoke(app, ["show", "nope", "--store", str(store_path)])
    assert missing.exit_code == 2 and "nope" in missing.output


def test_runs_without_a_store_says_how_to_make_one(tmp_path: Path) -> None:
    result = runner.invoke(app, ["runs", "--store", str(tmp_path / "none.db")])
    assert result.exit_code == 2 and "optiml optimize" in result.output


SOFTMAX_TASK = """import torch
import torch.nn as nn

M = 64
N = 128

OPTIML = {"description": "Row-wise softmax.", "shape_sets": [{"M": 7, "N": 33}]}


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(M, N)]


def get_init_inputs():
    return []
"""


KERNEL_ANSWER = """Here is a kernel.

```cuda
#include "optiml.h"
__global__ void k(float* o, const float* x, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) o[i] = x[i];
}
OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                                 int n_outputs, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = optiml_numel(&inputs[0]);
  k<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>((float*)outputs[0].data, (const float*)inputs[0].data, n);
  return optiml_check_launch();
}
```
"""


def test_generate_without_a_gpu_spends_nothing_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 16 item 4: no LLM call is paid for before the GPU that verifies the answers is known to exist;
    with --no-verify every kernel the LLM wrote is saved."""
    from llm_servers import OpenAIServer, answer

    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("on a GPU machine generation would go on to verify the kernels")
    task_out = tmp_path / "softmax_task.py"
    store = str(tmp_path / "runs.db")
    with OpenAIServer() as server:
        server.script(answer(f"A softmax task.\n\n```python\n{SOFTMAX_TASK}```\n"))
        monkeypatch.setenv("OPTIML_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("OPTIML_LLM_MODEL", "test-model")
        args = ["generate", "row softmax", "--task-out", str(task_out), "--yes", "--store", store]
        refused = runner.invoke(app, args)
        assert refused.exit_code == 2 and "no CUDA GPU" in refused.output and "--no-verify" in refused.output
        assert "Traceback" not in refused.output
        assert len(server.requests) == 0 and not task_out.exists()

        server.reset()
        server.script(answer(f"A softmax task.\n\n```python\n{SOFTMAX_TASK}```\n"), *[answer(KERNEL_ANSWER)] * 8)
        written = runner.invoke(app, [*args, "--no-verify"])
    assert written.exit_code == 0, written.output
    assert task_out.read_text() == SOFTMAX_TASK
    assert "torch.softmax" in written.output  # the task was shown
    candidates = sorted((tmp_path / "softmax_task.candidates").glob("*.cu"))
    assert candidates and all("optiml_forward" in c.read_text() for c in candidates)
    assert any("compiled; not verified" in c.read_text() for c in candidates)


def test_optimize_without_a_gpu_fails_before_storing_a_run(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    store = tmp_path / "runs.db"
    result = runner.invoke(
        app, ["optimize", str(ROOT / "tasks" / "silu.py"), "--evals", "2", "--no-profile", "--store", str(store)]
    )
    assert result.exit_code == 2 and "no CUDA GPU" in result.output
    assert not store.exists()


def test_generate_without_an_llm_points_to_the_manual_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPTIML_LLM_MODEL", "OPTIML_LLM_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    task = tmp_path / "triple.py"
    task.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 3\n"
        "def get_inputs():\n    return [torch.rand(100)]\ndef get_init_inputs():\n    return []\n"
    )
    # A sentence needs the LLM to become a task: the error says how to configure one or go by hand.
    result = runner.invoke(app, ["generate", "triple it"])
    assert result.exit_code == 2
    assert "init-kernel" in result.output and "OPTIML_LLM_MODEL" in result.output
    # A reference needs no LLM (the templates serve it); without a GPU that ends at the evaluator.
    offline = runner.invoke(app, ["generate", "triple it", "--reference", str(task)])
    if not _gpu():
        assert offline.exit_code == 2
        assert "no CUDA GPU" in offline.output and "Traceback" not in offline.output


@pytest.mark.nvcc
def test_export_writes_a_kernelbench_model_new_that_builds_its_kernel(tmp_path: Path, kernel_cache: Path) -> None:
    import importlib.util

    import torch

    out = tmp_path / "layernorm_model_new.py"
    task = ROOT / "tasks" / "layernorm.py"
    naive = str(ROOT / "tasks" / "layernorm.naive.cu")
    store = ["--store", str(tmp_path / "runs.db")]
    result = runner.invoke(app, ["export", str(task), naive, "-o", str(out), *store, "--unverified"])
    assert result.exit_code == 0, result.output
    spec = importlib.util.spec_from_file_location("layernorm_model_new", out)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    reference = module.Model(*module.get_init_inputs())
    torch.manual_seed(0)
    model_new = module.ModelNew(*module.get_init_inputs())
    for ours, theirs in zip(model_new.state_dict().values(), reference.state_dict().values(), strict=True):
        assert torch.equal(ours, theirs)  # same constructor, same parameters: KernelBench compares them like this
    block = module.argument_block(model_new, torch.rand(3, 8192))
    assert block.output_specs == [((3, 8192), torch.float32)]
    library = module.build_library("sm_90a")  # builds with nvcc; running it needs a GPU
    assert hasattr(library, "optiml_forward")
    again = runner.invoke(app, ["export", str(task), naive, "-o", str(out), *store, "--unverified"])
    assert again.exit_code == 2 and "--force" in again.output


def test_optimize_rejects_a_bad_profile_margin_before_touching_the_gpu(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    args = ["optimize", str(ROOT / "tasks" / "silu.py"), "--profile-margin", "-1", "--store", str(store)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--profile-margin must be a number >= 0" in result.output
    assert not store.exists()


# --- optimize without --kernel: the root from templates, the shipped kernel and (when configured) the LLM ---


class _TimedEvaluator:
    """'Verifies' every kernel; times the shipped kernel at ``shipped_ms`` and any other at ``other_ms``."""

    def __init__(self, shipped_digest: str | None, shipped_ms: float, other_ms: float) -> None:
        self.shipped_digest, self.shipped_ms, self.other_ms = shipped_digest, shipped_ms, other_ms
        self.evaluated: list[str] = []

    def evaluate(self, kernel: Any) -> Any:
        from optiml.values import EvalResult, EvalStatus, TimingStats

        self.evaluated.append(kernel.digest)
        ms = self.shipped_ms if kernel.digest == self.shipped_digest else self.other_ms
        return EvalResult(EvalStatus.OK, "", kernel.digest, timing=TimingStats.from_samples([ms, ms, ms]))

    def evaluate_many(self, kernels: Any) -> list[Any]:
        return [self.evaluate(kernel) for kernel in kernels]


def _root_for(task_path: Path, evaluator: Any, tmp_path: Path, llm: Any = None) -> tuple[Any, str]:
    """The optimize workflow's root step (no --kernel), shown as `optiml optimize` shows it."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from optiml.cli.views.workflow import ConsoleView
    from optiml.task import load_task
    from optiml.workflow import Workflow

    buffer = io.StringIO()
    session = SimpleNamespace(task=load_task(task_path), evaluator=evaluator, costs=evaluator, llm=llm)
    view = ConsoleView(Console(file=buffer, width=200))
    root = Workflow(session, view).root(tmp_path / "runs.db")  # type: ignore[arg-type]
    return root.kernel, buffer.getvalue()


def test_choose_proposers_defaults_to_the_offline_proposer_without_an_llm() -> None:
    from optiml.errors import ConfigError
    from optiml.session import choose_proposers

    assert [p.name for p in choose_proposers("auto", None, seed=1)] == ["offline"]
    assert [p.name for p in choose_proposers("heuristic", None, seed=1)] == ["offline"]
    with pytest.raises(ConfigError, match="needs a configured LLM"):
        choose_proposers("mix", None, seed=1)
    with pytest.raises(ConfigError, match="unknown proposer 'magic'"):
        choose_proposers("magic", None, seed=1)


def test_root_without_a_template_a_shipped_kernel_or_an_llm_is_one_line(tmp_path: Path) -> None:
    from optiml.errors import OptimlError

    task = tmp_path / "sorted_rows.py"
    task.write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.sort(x, dim=-1).values\n"
        "def get_inputs():\n    return [torch.rand(4, 100)]\ndef get_init_inputs():\n    return []\n"
    )
    evaluator = _TimedEvaluator(None, 1.0, 1.0)
    with pytest.raises(OptimlError) as raised:
        _root_for(task, evaluator, tmp_path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("sorted_rows.py: no root kernel: no template for aten.sort")
    assert "OPTIML_LLM_MODEL" in message and f"optiml init-kernel {task}" in message and "--kernel" in message
    assert message.count("configure an LLM") == 1  # the template error's own advice is not repeated
    assert evaluator.evaluated == []  # nothing to evaluate


@pytest.mark.parametrize(("shipped_ms", "template_ms", "chosen"), [(1.0, 0.5, "template"), (0.5, 1.0, "shipped")])
def test_root_is_the_fastest_of_the_templates_and_the_shipped_kernel(
    tmp_path: Path, shipped_ms: float, template_ms: float, chosen: str
) -> None:
    from optiml.kernel.source import KernelSource

    naive = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu")
    evaluator = _TimedEvaluator(naive.digest, shipped_ms, template_ms)
    root, output = _root_for(ROOT / "tasks" / "silu.py", evaluator, tmp_path)
    assert naive.digest in evaluator.evaluated and len(evaluator.evaluated) >= 2  # the shipped kernel and templates
    assert (root.digest == naive.digest) == (chosen == "shipped")
    assert "root candidates" in output and ("root: shipped kernel" in output) == (chosen == "shipped")


@pytest.mark.parametrize("llm_ms", [0.25, None])
def test_an_llm_root_competes_with_the_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_ms: float | None
) -> None:
    import optiml.generate.root
    from optiml.generate import GenerationError, GenerationOutcome
    from optiml.kernel.source import KernelSource
    from optiml.values import EvalResult, EvalStatus, TimingStats

    llm_kernel = KernelSource.from_file(ROOT / "tasks" / "silu.naive.cu").with_code("// written by the LLM\n")

    def fake_generate_root(task: Any, client: Any, evaluator: Any, config: Any, store: Any = None) -> Any:
        if llm_ms is None:
            raise GenerationError("the LLM is out of budget")
        result = EvalResult(EvalStatus.OK, "", llm_kernel.digest, timing=TimingStats.from_samples([llm_ms] * 3))
        return GenerationOutcome(
            id="g1",
            kind="root",
            task_name=task.name,
            thoughts=(),
            winner="direct",
            best_kernel=llm_kernel,
            best_result=result,
            reason="fastest verified",
            seconds=1.0,
            cost_usd=0.0,
            notes=(),
        )

    monkeypatch.setattr(optiml.generate.root, "generate_root", fake_generate_root)
    evaluator = _TimedEvaluator(None, 1.0, 1.0)
    root, output = _root_for(ROOT / "tasks" / "silu.py", evaluator, tmp_path, llm=object())
    if llm_ms is None:  # generation failed: said so, and a template is the root
        assert "LLM generation failed" in output and "out of budget" in output
        assert root.digest != llm_kernel.digest
    else:
        assert root.digest == llm_kernel.digest and "root: the LLM's kernel" in output
        assert llm_kernel.digest not in evaluator.evaluated  # its generation already timed it


def _gpu() -> bool:
    import torch

    return bool(torch.cuda.is_available())
