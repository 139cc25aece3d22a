"""Natural language → a KernelBench task file, written by the model and checked before anyone uses it.

The model writes the file (reference ``Model``, seeded ``get_inputs``, ``OPTIML`` metadata with a
small shape set); it is checked statically and then run on the CPU in a sandbox
(:mod:`optiml.generate.task_check`). A file that fails goes back to the model with the one-line
error, at most ``task_repairs`` times. Only a file that passes is written to the output path —
and it must then be shown to the user (the CLI's :func:`optiml.cli.views.confirm.confirm_task`)
before anything is optimized against it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from optiml.errors import TaskError
from optiml.generate.answers import NoCodeError, extract_python
from optiml.generate.config import GenerationConfig
from optiml.generate.errors import GenerationError
from optiml.generate.outcome import LLM_ERROR, NO_CODE
from optiml.generate.prompts import PROMPT_VERSION, task_conversation, task_repair_conversation
from optiml.generate.store import STATUS_FAILED, STATUS_FINISHED, GenerationStore, TaskDraft
from optiml.generate.task_check import validate_task_file
from optiml.llm.client import LLMClient
from optiml.llm.errors import LLMError
from optiml.llm.types import ChatMessage

INVALID_TASK = "invalid_task"


def generate_task_from_request(
    request: str,
    client: LLMClient,
    out_path: str | Path,
    config: GenerationConfig | None = None,
    store: GenerationStore | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Have the model write a task for ``request``; returns ``out_path`` once the file passes every check.

    Raises :class:`GenerationError` for an empty request, an existing ``out_path`` (unless
    ``overwrite``), an LLM failure, or a task that still fails after the repairs — then the last
    draft is kept beside ``out_path`` as ``<stem>.draft.py`` for the user to inspect or fix.
    """
    request = " ".join(request.split())
    if not request:
        raise GenerationError(
            "the request is empty: describe the computation, e.g. 'row softmax of a 4096x8192 matrix'"
        )
    out = Path(out_path)
    if out.suffix != ".py":
        raise GenerationError(f"{out}: a task file must end in .py")
    if out.exists() and not overwrite:
        raise GenerationError(f"{out} exists; choose another path or allow overwriting it")
    config = config or GenerationConfig()
    started = time.perf_counter()
    cost_before = client.usage.cost_usd
    generation_id = (
        store.start(
            kind="task",
            task_name=out.stem,
            config_json=config.to_json(),
            prompt_version=PROMPT_VERSION,
            request=request,
            llm_run_id=client.run_id,
        )
        if store is not None
        else ""
    )

    def finish(status: str, reason: str) -> None:
        if store is not None:
            spent = client.usage.cost_usd - cost_before
            store.close_generation(generation_id, status, reason, time.perf_counter() - started, spent)

    def record(draft: TaskDraft) -> None:
        if store is not None:
            store.add_draft(generation_id, draft)

    base = task_conversation(request)
    conversation: list[ChatMessage] = base
    last_error, last_source = "", ""
    for round_ in range(config.task_repairs + 1):
        try:
            response = client.complete(
                conversation,
                purpose="generate.task",
                temperature=config.temperature,
                max_tokens=config.max_tokens,
            )
        except LLMError as exc:
            record(TaskDraft(round_, LLM_ERROR, str(exc), ""))
            finish(STATUS_FAILED, f"LLM error: {exc}")
            raise GenerationError(f"writing the task failed: the LLM call failed: {exc}") from exc
        answer = response.text
        try:
            source = extract_python(answer)
        except NoCodeError as exc:
            record(TaskDraft(round_, NO_CODE, str(exc), ""))
            last_error = str(exc)
        else:
            last_source = source
            try:
                _check_in_scratch(source, out.name, config.task_check_timeout_s)
            except TaskError as exc:
                last_error = str(exc)
                record(TaskDraft(round_, INVALID_TASK, last_error, source))
            else:
                record(TaskDraft(round_, "ok", "passed the static and CPU checks", source))
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(source, encoding="utf-8")
                finish(STATUS_FINISHED, f"wrote {out}")
                return out
        conversation = task_repair_conversation(base, answer, last_error)

    attempts = config.task_repairs + 1
    message = f"the model did not write a working task in {attempts} attempt{'s' if attempts > 1 else ''}"
    message += f"; last problem: {last_error}"
    if last_source:
        draft = out.with_name(out.stem + ".draft.py")
        draft.parent.mkdir(parents=True, exist_ok=True)
        draft.write_text(last_source, encoding="utf-8")
        message += f"; the last draft is in {draft}"
    finish(STATUS_FAILED, message)
    raise GenerationError(message)


def _check_in_scratch(source: str, name: str, timeout_s: float) -> None:
    """Check ``source`` as a file called ``name`` (the task's name is its file's stem)."""
    with tempfile.TemporaryDirectory(prefix="optiml-task-draft-") as tmp:
        draft = Path(tmp) / name
        draft.write_text(source, encoding="utf-8")
        try:
            validate_task_file(draft, timeout_s)
        except TaskError as exc:
            raise TaskError(str(exc).replace(str(draft), name)) from exc
