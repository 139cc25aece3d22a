"""Check a task file before anything is generated or optimized against it.

:func:`validate_task_file` runs the static checks (:func:`optiml.task.load_task`) here, then the
dynamic ones (:func:`optiml.evaluate.runtime.check_task`: inputs reproducible from a seed, tensor
outputs, a deterministic forward) on the CPU at the task's smallest shape set, in a separate
process started through the worker sandbox (:mod:`optiml.integrity.sandbox`): a task the model
wrote is untrusted code, so it gets no API keys, no network where the host allows it, resource
limits and a wall-clock timeout. Every failure is a one-line :class:`~optiml.errors.TaskError`
naming the file, which is also what a repair prompt sends back to the model.

Run as ``python -m optiml.generate.task_check FILE [MAX_BYTES]``, the module is that separate
process: it prints one JSON line, ``{"ok": true, "notes": [...]}`` or ``{"ok": false, "error": "..."}``.
``optiml check-task`` uses the same process (for its timeout), with ``MAX_BYTES`` for huge tasks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import optiml
from optiml.errors import TaskError
from optiml.integrity import children
from optiml.integrity.sandbox import ResourceLimits, build_worker_launch, kill_group
from optiml.task import Task, load_task

#: the most memory one GPU holds today (B300, 288 GB): a task whose one case needs more runs on none
GPU_MEMORY_BOUND = 288 * 10**9
#: what the allocators say when they run out (torch's CPU allocator, a CUDA one)
_OUT_OF_MEMORY = ("can't allocate memory", "out of memory", "DefaultCPUAllocator")


@dataclass(frozen=True)
class TaskCheck:
    """A task that passed every check, and what the dynamic check saw (shapes, dtypes). ``full``: the
    check ran at full size on the CPU (False: on the meta device only, the task being over ``max_bytes``);
    ``case_bytes``: one case's inputs, parameters and outputs at the smallest shape set (None: unknown)."""

    task: Task
    notes: tuple[str, ...]
    full: bool = True
    case_bytes: int | None = None


def validate_task_file(path: str | Path, timeout_s: float = 300.0, max_bytes: int | None = None) -> TaskCheck:
    """Static and dynamic checks of a task file; :class:`TaskError` with a one-line cause otherwise.
    ``max_bytes``: above it, the dynamic check runs on the meta device only (see ``check_task``)."""
    task = load_task(path)
    with tempfile.TemporaryDirectory(prefix="optiml-task-check-") as tmp:
        workdir = Path(tmp)
        copy = workdir / task.path.name  # the sandbox may see nothing outside its own directory
        copy.write_text(task.source, encoding="utf-8")
        limit = [str(max_bytes)] if max_bytes is not None else []
        launch = build_worker_launch(
            [sys.executable, "-c", _ENTRY, copy.name, *limit],
            workdir=workdir,
            limits=ResourceLimits(cpu_seconds=int(timeout_s) * 4 + 30),  # torch uses several threads
            extra_env={"PYTHONPATH": str(Path(optiml.__file__).resolve().parent.parent), "CUDA_VISIBLE_DEVICES": ""},
        )
        with children.launching():
            proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise TaskError(
                f"{task.shown}: checking the task on the CPU took longer than {timeout_s:.0f} s "
                "(does its smallest shape set need too much work, or does it never finish?)"
            ) from None
        except BaseException:  # Ctrl-C: the check leads its own process group, so it must be stopped here
            kill_group(proc)
            raise
        reply = _last_json_line(out.decode(errors="replace"))
        if reply is None:
            tail = " | ".join(err.decode(errors="replace").strip().splitlines()[-4:])
            cause = launch.describe_exit(proc.returncode)
            verb = "was " if cause.startswith("killed") else ""
            raise TaskError(
                f"{task.shown}: checking the task failed: the check process {verb}{cause} before it replied "
                "(does the task crash the interpreter or exhaust memory?)" + (f": {tail}" if tail else "")
            )
    if not reply.get("ok"):
        message = str(reply.get("error", "the check failed without a message"))
        raise TaskError(_relocate(message, copy, Path(task.shown)))
    notes = reply.get("notes")
    size = reply.get("case_bytes")
    return TaskCheck(
        task=task,
        notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
        full=bool(reply.get("full", True)),
        case_bytes=size if isinstance(size, int) else None,
    )


#: The check process's entry: ``-m optiml.generate.task_check`` would work too, but as the package
#: imports this module first, runpy warns on stderr, and that warning became the message of a check
#: that died without a reply.
_ENTRY = "import sys; from optiml.generate.task_check import main; main(sys.argv[1:])"


def _relocate(message: str, copy: Path, original: Path) -> str:
    """The check's message about its private copy, told about the user's file instead."""
    for shown in (str(copy.resolve()), str(copy)):
        message = message.replace(shown, str(original))
    prefix = f"{copy.name}:"
    return f"{original}:{message[len(prefix) :]}" if message.startswith(prefix) else message


def _last_json_line(text: str) -> dict[str, object] | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _check(path: str, max_bytes: int | None = None) -> dict[str, object]:
    from optiml.evaluate.runtime import check_task

    size: int | None = None
    try:
        task = load_task(path)
        size = case_bytes(task)
        if size is not None and size > GPU_MEMORY_BOUND:
            return {
                "ok": False,
                "error": f"{path}: one case of its smallest shape set takes {size / 1e9:,.0f} GB (inputs, parameters "
                f"and outputs), more than any GPU holds ({GPU_MEMORY_BOUND / 1e9:.0f} GB): are its sizes right?",
            }
        notes = check_task(task, device="cpu", max_bytes=max_bytes)
    except (TaskError, MemoryError) as exc:
        if _out_of_memory(exc):
            needs = f" (one case takes {(size or 0) / 1e9:.2f} GB; the full check holds about three times that)"
            needs = needs if size else ""
            return {
                "ok": False,
                "error": f"{path}: this machine ran out of memory checking the task at full size on the CPU{needs}; "
                "a smaller --max-bytes checks it on the meta device instead",
            }
        return {"ok": False, "error": " ".join(str(exc).split())}
    except Exception as exc:  # the task's own code misbehaved in a way check_task did not anticipate
        return {"ok": False, "error": f"{path}: {type(exc).__name__}: {' '.join(str(exc).split())}"}
    except SystemExit as exc:  # the task called sys.exit() or exit(): a task must not end its process
        return {"ok": False, "error": f"{path}: the task called sys.exit({exc.code!r}) while it was checked"}
    full = size is None or max_bytes is None or size <= max_bytes
    if not full:
        notes.append(
            "tolerances: whether atol must be tightened (where an all-zero or constant output would pass the task's "
            "atol, as in KernelBench's 23_Softmax) is decided from the reference's outputs, which a meta-device check "
            "does not compute: `optiml eval` reports it, or check at full size with a larger --max-bytes"
        )
    return {"ok": True, "notes": notes, "full": full, "case_bytes": size}


def case_bytes(task: Task) -> int | None:
    """Bytes of one case's inputs, parameters and outputs at the task's smallest shape set, from a run on the
    meta device (no memory, no compute); None where the task cannot run there."""
    import torch

    from optiml.evaluate.runtime import TaskRuntime, runs_on_the_cpu_instead, smallest_shape_set

    runner = TaskRuntime(task, "meta")
    shape_set = smallest_shape_set(runner)
    try:
        args = runner.make_args(11, shape_set)
        model = runner.build_model(11, shape_set)
        outputs = runner.run_reference(model, args)
    except TaskError as exc:
        if runs_on_the_cpu_instead(exc):
            return None
        raise
    tensors = [a for a in args if isinstance(a, torch.Tensor)] + list(model.state_dict().values()) + outputs
    return sum(t.numel() * t.element_size() for t in tensors)


def _out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is an allocator that ran out of memory."""
    while exc is not None:
        if isinstance(exc, MemoryError) or any(text in str(exc) for text in _OUT_OF_MEMORY):
            return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


def main(argv: list[str]) -> None:
    """The check process: one JSON line on stdout (see the module docstring)."""
    if len(argv) not in (1, 2) or (len(argv) == 2 and not argv[1].isdigit()):
        sys.stderr.write("usage: python -m optiml.generate.task_check TASK_FILE [MAX_BYTES]\n")
        raise SystemExit(2)
    sys.stdout.write(json.dumps(_check(argv[0], int(argv[1]) if len(argv) == 2 else None)) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
