"""Shared pytest setup: the `gpu` and `nvcc` markers skip cleanly where the hardware or tool is missing."""

from __future__ import annotations

import shutil
import signal
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"


@lru_cache(maxsize=1)
def gpu_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so do the
    CLIs it starts; the Ctrl-C tests need Python's own handler, as in a terminal."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    no_nvcc = pytest.mark.skip(reason="needs nvcc on PATH")
    for item in items:
        if "gpu" in item.keywords and not gpu_available():
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and shutil.which("nvcc") is None:
            item.add_marker(no_nvcc)


@pytest.fixture
def kernel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private compile cache, so tests measure real compiles and never share state."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache / "optiml" / "kernels"
