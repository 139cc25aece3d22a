"""Natural language → a checked KernelBench task, with repairs; the model's file runs in a sandbox."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from generate_helpers import ScriptedModel

from llm_servers import OpenAIServer
from optiml.generate import GenerationConfig, GenerationError, GenerationStore, generate_task_from_request
from optiml.generate.task_check import validate_task_file
from optiml.llm import LLMClient
from optiml.task import load_task

GOOD = """import torch
import torch.nn as nn

M = 4096
N = 8192

OPTIML = {
    "description": "Row-wise softmax of a float32 M x N matrix.",
    "dtype": "float32",
    "shape_sets": [{"M": 7, "N": 333}],
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(M, N)]


def get_init_inputs() -> list:
    return []
"""
DOES_NOT_RUN = GOOD.replace("torch.softmax(x, dim=-1)", "softmax_rows(x)")


def python(source: str) -> str:
    return f"Softmax over each row.\n\n```python\n{source}```\n"


def test_a_reference_that_does_not_run_is_repaired(
    server: OpenAIServer, make_client: Callable[..., LLMClient], tmp_path: Path
) -> None:
    model = ScriptedModel({("task", 0): python(DOES_NOT_RUN), ("task", 1): python(GOOD)})
    server.responder = model
    out = tmp_path / "tasks" / "softmax.py"
    with GenerationStore(tmp_path / "runs.db") as store:
        written = generate_task_from_request(
            "row-wise softmax of a float32 4096×8192 matrix", make_client(server, run_id="r1"), out, store=store
        )
        (row,) = store.generations()
        drafts = store.drafts(row.id)

    assert written == out and out.read_text() == GOOD
    assert load_task(out).meta.description == "Row-wise softmax of a float32 M x N matrix."
    (repair,) = model.prompts("task", 1)
    assert "softmax.py: Model.forward failed: NameError: name 'softmax_rows' is not defined" in repair
    assert "optiml-task" not in repair  # the model is told about its file, not our scratch copy
    assert (row.kind, row.status, row.request, row.llm_run_id) == (
        "task",
        "finished",
        "row-wise softmax of a float32 4096×8192 matrix",
        "r1",
    )
    assert [(d.round, d.status) for d in drafts] == [(0, "invalid_task"), (1, "ok")]
    assert drafts[0].source == DOES_NOT_RUN and "NameError" in drafts[0].message


def test_a_task_that_never_works_keeps_its_last_draft(
    server: OpenAIServer, make_client: Callable[..., LLMClient], tmp_path: Path
) -> None:
    model = ScriptedModel({("task", 0): "Here is my plan, no code yet.", ("task", 1): python(DOES_NOT_RUN)})
    server.responder = model
    out = tmp_path / "softmax.py"
    with pytest.raises(GenerationError) as caught:
        generate_task_from_request("row softmax", make_client(server), out, GenerationConfig(task_repairs=1))

    message = str(caught.value)
    assert message.startswith("the model did not write a working task in 2 attempts; last problem: softmax.py:")
    assert message.endswith(f"the last draft is in {tmp_path / 'softmax.draft.py'}") and "\n" not in message
    assert not out.exists() and (tmp_path / "softmax.draft.py").read_text() == DOES_NOT_RUN
    assert "no ```python block" in model.prompts("task", 1)[0]


def test_bad_requests_fail_before_asking_the_model(
    server: OpenAIServer, make_client: Callable[..., LLMClient], tmp_path: Path
) -> None:
    client = make_client(server)
    existing = tmp_path / "taken.py"
    existing.write_text("# mine\n")
    with pytest.raises(GenerationError, match=r"taken\.py exists"):
        generate_task_from_request("row softmax", client, existing)
    with pytest.raises(GenerationError, match="the request is empty"):
        generate_task_from_request("  \n ", client, tmp_path / "t.py")
    with pytest.raises(GenerationError, match=r"must end in \.py"):
        generate_task_from_request("row softmax", client, tmp_path / "t.txt")
    assert server.request_count == 0 and existing.read_text() == "# mine\n"


def test_an_llm_failure_is_a_generation_error(
    server: OpenAIServer, make_client: Callable[..., LLMClient], tmp_path: Path
) -> None:
    client = make_client(server)
    server.stop()
    with pytest.raises(GenerationError, match="writing the task failed: the LLM call failed"):
        generate_task_from_request("row softmax", client, tmp_path / "t.py")


def test_validate_task_file_runs_the_dynamic_checks(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(GOOD)
    check = validate_task_file(good)
    assert check.task.name == "good"
    assert check.notes[:2] == ("shape set 1: 1 inputs, 1 outputs", "output 0: shape (7, 333) float32")
    assert check.notes[2].startswith("verification inputs: native, normal")  # the default signed distribution

    unseeded = tmp_path / "unseeded.py"
    unseeded.write_text(
        GOOD.replace("torch.randn(M, N)", "torch.randn(M, N, generator=torch.Generator().manual_seed(0))")
    )
    with pytest.raises(Exception, match=r"unseeded.py: get_inputs\(\) ignores the seed"):
        validate_task_file(unseeded)

    hangs = tmp_path / "hangs.py"
    hangs.write_text(GOOD.replace("return [torch.randn(M, N)]", "while True:\n        pass"))
    with pytest.raises(Exception, match="took longer than 2 s"):
        validate_task_file(hangs, timeout_s=2)
