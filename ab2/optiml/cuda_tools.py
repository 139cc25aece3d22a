"""Finding CUDA command-line tools (ncu, cuobjdump, nvdisasm, …) wherever a toolkit put them."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path


def find_cuda_tool(name: str, nvcc: str | None = None) -> str | None:
    """``name`` on PATH, else beside nvcc (and its resolved location), under $CUDA_HOME / $CUDA_PATH,
    /usr/local/cuda/bin, or in the ``nvidia-cuda-*`` pip wheels; None when it is nowhere."""
    on_path = shutil.which(name)
    if on_path:
        return on_path
    folders: list[Path] = []
    if nvcc:
        folders += [Path(nvcc).parent, Path(nvcc).resolve().parent]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            folders.append(Path(os.environ[var]) / "bin")
    folders.append(Path("/usr/local/cuda/bin"))
    folders += _pip_tool_folders()
    for folder in folders:
        candidate = folder / name
        if candidate.is_file():
            return str(candidate)
    return None


def _pip_tool_folders() -> list[Path]:
    """``site-packages/nvidia/<cu13|cuda_cuobjdump|…>/bin`` folders of the nvidia-cuda-* wheels."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted(p for root in spec.submodule_search_locations for p in Path(root).glob("*/bin") if p.is_dir())
