"""Helpers of the export tests: write an export and import it as a module of its own."""

from __future__ import annotations

import importlib.util
import sys
import uuid
import warnings
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks"
STARTERS = sorted(p.name.removesuffix(".naive.cu") for p in TASKS.glob("*.naive.cu"))


def import_file(path: Path, quiet: bool = True) -> ModuleType:
    """Import ``path`` under a unique module name registered in sys.modules (so pickling finds its classes);
    ``quiet`` silences the UNVERIFIED warning of exports rendered without a store record."""
    name = f"{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with warnings.catch_warnings():
        if quiet:
            warnings.filterwarnings("ignore", message=".*exported UNVERIFIED.*")
        spec.loader.exec_module(module)
    return module


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def unique_namespace() -> str:
    """torch.library registrations are per process: every test's op gets a namespace of its own."""
    return f"optiml_test_{uuid.uuid4().hex[:10]}"
