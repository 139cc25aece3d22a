"""What the model is told: the task, the ABI, the arguments, the approach; and what repairs send."""

from __future__ import annotations

from pathlib import Path

from optiml.generate.prompts import (
    TaskBrief,
    VerifiedCandidate,
    adapt_conversation,
    aggregate_conversation,
    describe_shapes,
    kernel_conversation,
    repair_conversation,
    task_conversation,
    task_repair_conversation,
)
from optiml.generate.thoughts import BUILTIN_THOUGHTS, Thought, parse_thought
from optiml.task import Task, load_task

ROOT = Path(__file__).resolve().parents[2]


def test_a_thought_prompt_carries_task_abi_arguments_and_strategy(silu_task: Task) -> None:
    brief = TaskBrief.of(silu_task)
    memory_first = BUILTIN_THOUGHTS[1]
    system, user = kernel_conversation(brief, memory_first)

    assert system.role == "system" and user.role == "user"
    assert "atol=0.0001 and rtol=0.0001" in system.content and "no fp16, bf16 or TF32" in system.content
    assert "no libraries beyond the CUDA runtime" in system.content
    assert silu_task.source.strip() in user.content  # the reference, verbatim
    assert "OPTIML_EXPORT int optiml_forward" in user.content  # the ABI header
    assert "//   inputs[0]  x: float32 [8192, 8192] (contiguous)" in user.content  # the skeleton's arguments
    assert "- default: M=8192, N=8192\n- also verified at: M=1000, N=3001\n- also verified at: M=1, N=7" in user.content
    assert user.content.rstrip().endswith("Write the complete kernel for this task following this approach.")
    assert f"## Your approach: memory_first\n{memory_first.strategy}" in user.content


def test_allowed_libraries_are_named(tmp_path: Path) -> None:
    source = (ROOT / "tasks" / "matmul.py").read_text()
    assert "OPTIML = {" in source
    file = tmp_path / "mm.py"
    file.write_text(source.replace("OPTIML = {", 'OPTIML = {\n    "libraries": ["cublas"],', 1))
    system, _ = kernel_conversation(TaskBrief.of(load_task(file)), BUILTIN_THOUGHTS[0])
    assert "the only libraries you may use are: cublas" in system.content


def test_a_user_template_is_rendered_with_the_task_and_thought(silu_task: Task, tmp_path: Path) -> None:
    (tmp_path / "mine.j2").write_text(
        '{% include "task_context_v1.j2" %}\nAPPROACH {{ thought.name }}: {{ thought.strategy }}'
    )
    thought = parse_thought({"name": "mine", "strategy": "Be bold.", "template": "mine.j2"}, "test", tmp_path)
    _, user = kernel_conversation(TaskBrief.of(silu_task), thought)
    assert user.content.endswith("APPROACH mine: Be bold.") and "# Task `silu`" in user.content


def test_repair_keeps_the_first_request_and_the_latest_answer_only(silu_task: Task) -> None:
    base = kernel_conversation(TaskBrief.of(silu_task), Thought("t", "s"))
    repair = repair_conversation(base, "ANSWER", "compile error:\nerror: line 3: expected a ';'")
    assert [m.role for m in repair] == ["system", "user", "assistant", "user"]
    assert repair[:2] == base and repair[2].content == "ANSWER"
    assert (
        "That kernel did not pass.\n\ncompile error:\nerror: line 3: expected a ';'\n\nFind the cause"
        in repair[3].content
    )


def test_aggregation_and_adaptation_prompts(silu_task: Task) -> None:
    brief = TaskBrief.of(silu_task)
    candidates = [
        VerifiedCandidate("direct", "Simple.", "CODE_A"),
        VerifiedCandidate("fusion_first", "Fuse.", "CODE_B"),
    ]
    _, user = aggregate_conversation(brief, candidates)
    assert "### Candidate 1 (direct): Simple.\n```cuda\nCODE_A\n```" in user.content
    assert "### Candidate 2 (fusion_first): Fuse.\n```cuda\nCODE_B\n```" in user.content
    assert "Combine the strongest ideas" in user.content

    _, adapt = adapt_conversation(brief, "int main() { return 0; }\n")
    assert "```cuda\nint main() { return 0; }\n```" in adapt.content and "remove `main()`" in adapt.content


def test_task_prompts(silu_task: Task) -> None:
    system, user = task_conversation("  row softmax of a float32 4096x8192 matrix ")
    assert "problems in the KernelBench format" in system.content and "at least one small shape set" in system.content
    assert (
        user.content == "Write the KernelBench problem for this request:\n\nrow softmax of a float32 4096x8192 matrix"
    )
    repair = task_repair_conversation([system, user], "ANSWER", "t.py: get_inputs() failed: NameError: x")
    assert repair[-1].content.startswith("That file does not pass the checks:\n\nt.py: get_inputs() failed")


def test_describe_shapes_without_extra_shape_sets(tmp_path: Path) -> None:
    file = tmp_path / "t.py"
    file.write_text(
        "K = 3\nSCALE = 0.5\nclass Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    )
    assert describe_shapes(load_task(file)) == "- default: K=3"
