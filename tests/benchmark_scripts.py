"""The scripts under ``benchmarks/`` as modules, for tests of their pure parts (no GPU)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/NAME.py`` imported (it imports its neighbours, such as ``result_file``, by name)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def run_benchmark_script(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/NAME.py ARGS`` as a user runs it (``PYTHONPATH=src``), its output captured."""
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent / "src")}
    command = [sys.executable, str(BENCHMARKS / f"{name}.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
