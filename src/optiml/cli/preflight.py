"""Checks that cost nothing, made before a command loads a task, imports torch or starts a process.

A command answers bad input at once: a flag value outside its choices, a file that is not there or
is the wrong kind (a kernel given where the task goes), no GPU for a command that runs kernels, no
nvcc for one that compiles. Loading a task imports torch (seconds) and an evaluator starts a worker
(more seconds), so these checks come first. The flags' choices are spelled here, where they cost no
import; ``tests/cli/test_preflight.py`` holds them equal to the library's own lists.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from optiml.errors import ConfigError, NoGPUError, OptimlError, StoreError

#: ``optimize`` / ``resume`` --proposer (``optiml.session.PROPOSER_CHOICES``)
SEARCH_PROPOSERS = ("auto", "heuristic", "llm", "mix")
#: ``propose`` --proposer (``optiml.propose.factory.make_proposer``'s kinds)
PROPOSE_KINDS = ("heuristic", "structural", "offline", "llm")
#: ``optimize`` --strategy (``optiml.search.config.STRATEGIES``)
STRATEGIES = ("mcts", "greedy", "best-of-n")


def require_choice(option: str, value: str, choices: Sequence[str]) -> None:
    """A flag value outside ``choices`` is one line naming the flag and the choices."""
    if value not in choices:
        raise ConfigError(f"{option} {value!r}: choose one of {', '.join(choices)}")


def require_task_file(path: Path) -> None:
    """The task argument names a readable file, not a CUDA kernel."""
    _require_file(path, "task")
    if path.suffix == ".cu":
        raise OptimlError(f"{path}: a CUDA file where the task goes; the task is a KernelBench .py file")


def require_task_and_kernel(task: Path, kernel: Path) -> None:
    """TASK then KERNEL, both readable; the two given the other way round is one line saying the order."""
    if task.suffix == ".cu" and kernel.suffix == ".py":
        raise OptimlError(
            f"the task and the kernel are swapped: the task comes first, then the kernel "
            f"(`{task.name}` is a kernel, `{kernel.name}` a task): give {kernel} {task}"
        )
    require_task_file(task)
    _require_file(kernel, "kernel")
    if kernel.suffix == ".py":
        raise OptimlError(f"{kernel}: a Python file where the kernel goes; the kernel is a .cu file in the OptiML ABI")


def _require_file(path: Path, what: str) -> None:
    if not path.exists():
        raise OptimlError(f"{path}: no such {what} file")
    if path.is_dir():
        raise OptimlError(f"{path}: is a folder; give the {what} file")
    if not os.access(path, os.R_OK):
        raise OptimlError(f"{path}: cannot read the {what} file (permission denied)")


def gpu_missing() -> str | None:
    """Why no CUDA GPU can be visible to this process, found without CUDA (None: one may be).

    ``CUDA_VISIBLE_DEVICES`` set to nothing (or ``-1``) hides every GPU; a machine with no NVIDIA device
    node (``/dev/nvidia0`` …, or WSL's ``/dev/dxg``) has none. Where a node exists, the GPU worker finds
    out the rest (a driver mismatch, say) and says so."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    if not glob.glob("/dev/nvidia[0-9]*") and not os.path.exists("/dev/dxg"):
        return "this machine has no NVIDIA GPU device: no /dev/nvidia*"
    return None


def require_gpu(needs: str, instead: str = "") -> None:
    """:class:`NoGPUError` now, before anything is loaded, where no GPU can be visible. ``needs`` says what
    needs one ("evaluation"), ``instead`` what works without one."""
    why = gpu_missing()
    if why is not None:
        hint = f"; {instead}" if instead else "; `optiml doctor` shows what this machine offers"
        raise NoGPUError(f"no CUDA GPU is visible ({why}): {needs} needs one{hint}")


def require_nvcc() -> None:
    """:class:`~optiml.errors.ToolchainError` now where nvcc is nowhere (PATH, $CUDA_HOME, the wheels)."""
    from optiml.kernel.compiler import find_nvcc  # light: no torch

    find_nvcc()


def require_store_file(store: Path) -> None:
    """``--store`` names a file (the SQLite run store), or where one will be made; not a folder."""
    if store.is_dir():
        raise StoreError(f"{store}: is a folder, not a run store file (SQLite; default .optiml/runs.db)")
