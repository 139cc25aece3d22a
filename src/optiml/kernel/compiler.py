"""Build candidates with ``nvcc --shared``: content-addressed cache, parallel compiles.

A candidate is built once per (source, flags, arch, libraries, nvcc version, ABI header):
the cache key is their hash and the cache entry holds the source, the shared object and
the :class:`CompileResult` as JSON. nvcc is ~0.4 s per trivial candidate versus ~58 s for
``torch.utils.cpp_extension.load_inline`` (measured on the H200 machine), which is why
candidates use a C ABI instead of a torch extension.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from optiml.cache_dirs import user_cache_dir
from optiml.cuda_tools import find_cuda_tool
from optiml.errors import ToolchainError
from optiml.kernel.build import CompileDiagnostic, CompileResult
from optiml.kernel.ptxas import parse_diagnostics, parse_resources
from optiml.kernel.source import KernelSource

DEFAULT_ARCH = "sm_90a"  # H100/H200; used when no GPU is visible and none is configured
BASE_FLAGS = ("-O3", "-std=c++17", "-lineinfo", "-Xcompiler", "-fPIC", "-Xptxas", "-v")
SOURCE_NAME = "kernel.cu"


def include_dir() -> Path:
    """Folder holding ``optiml.h``, shipped as package data."""
    return Path(str(resources.files("optiml.kernel") / "include"))


def abi_header() -> str:
    return (include_dir() / "optiml.h").read_text(encoding="utf-8")


def gencode(arch: str) -> str:
    """Machine code for ``arch`` only (``sm_90a`` → ``-gencode=arch=compute_90a,code=sm_90a``).

    ``-arch=sm_90a`` also embeds PTX, which nothing here runs (candidates are built for the GPU
    they are timed on); leaving it out cut a template kernel's build from 2.2 s to 1.3 s (nvcc 13.0,
    2-core machine, 2026-12-01). An ``-arch``-style value that is not ``sm_NN[a]`` is passed through.
    """
    if not arch.startswith("sm_"):
        return f"-arch={arch}"
    return f"-gencode=arch=compute_{arch[3:]},code={arch}"


def find_nvcc() -> str:
    """nvcc wherever :func:`~optiml.cuda_tools.find_cuda_tool` looks; `ToolchainError` when it is nowhere."""
    path = find_cuda_tool("nvcc")
    if path is None:
        raise ToolchainError(
            "nvcc not found: install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`) and put nvcc on PATH"
        )
    return path


@lru_cache(maxsize=4)
def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolchainError(f"{nvcc} --version failed: {exc}") from exc
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else out.strip()


@lru_cache(maxsize=1)
def detect_arch() -> str | None:
    """``sm_XY`` of GPU 0 from nvidia-smi (``sm_90a`` on Hopper), or None without a GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[0].strip() if out.strip() else ""
    if "." not in first:
        return None
    major, minor = first.split(".", 1)
    arch = f"sm_{major}{minor}"
    return arch + "a" if arch == "sm_90" else arch


@dataclass(frozen=True)
class CompilerConfig:
    arch: str | None = None  # None: detect the GPU, else DEFAULT_ARCH
    cache_dir: Path = field(default_factory=lambda: user_cache_dir("kernels"))
    timeout_s: float = 180.0
    jobs: int = 0  # parallel compiles; 0 = number of CPUs
    libraries: tuple[str, ...] = ()  # -l<name> for libraries a task allows


class Compiler:
    """Compiles candidates to shared objects, caching by content."""

    def __init__(self, config: CompilerConfig | None = None) -> None:
        self.config = config or CompilerConfig()
        self.nvcc = find_nvcc()
        self.version = nvcc_version(self.nvcc)
        self.arch = self.config.arch or detect_arch() or DEFAULT_ARCH
        self._header_hash = hashlib.sha256(abi_header().encode()).hexdigest()[:12]

    def cache_key(self, kernel: KernelSource) -> str:
        parts = [
            kernel.code,
            "\0".join(kernel.flags),
            self.arch,
            self.version,
            self._header_hash,
            ",".join(self.config.libraries),
        ]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]

    def command(self, source: Path, output: Path, kernel: KernelSource) -> list[str]:
        libs = [f"-l{name}" for name in self.config.libraries]
        return [
            self.nvcc,
            "--shared",
            *BASE_FLAGS,
            gencode(self.arch),
            f"-I{include_dir()}",
            *kernel.flags,
            "-o",
            str(output),
            str(source),
            *libs,
        ]

    def compile(self, kernel: KernelSource) -> CompileResult:
        key = self.cache_key(kernel)
        entry = self.config.cache_dir / key
        cached = self._load_cached(entry)
        if cached is not None:
            return cached
        entry.parent.mkdir(parents=True, exist_ok=True)
        # Build in a private folder, then rename into place: concurrent builds never see half a file.
        work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=entry.parent))
        source, output = work / SOURCE_NAME, work / "kernel.so"
        source.write_text(kernel.code, encoding="utf-8")
        cmd = self.command(source, output, kernel)
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.config.timeout_s, cwd=work)
            log, ok = proc.stdout + proc.stderr, proc.returncode == 0 and output.is_file()
        except subprocess.TimeoutExpired:
            log, ok = f"nvcc timed out after {self.config.timeout_s:.0f} s", False
        seconds = time.perf_counter() - start
        diagnostics = parse_diagnostics(log, SOURCE_NAME)
        if not ok and not any(d.severity == "error" for d in diagnostics):
            tail = log.strip().splitlines()[-1] if log.strip() else "nvcc failed without a message"
            diagnostics.append(CompileDiagnostic(severity="error", message=tail))
        result = CompileResult(
            ok=ok,
            so_path=str(entry / "kernel.so") if ok else None,
            digest=kernel.digest,
            arch=self.arch,
            seconds=seconds,
            cached=False,
            diagnostics=tuple(diagnostics),
            resources=tuple(parse_resources(log)),
            command=tuple(cmd),
            log=log[-20000:],
        )
        (work / "result.json").write_text(json.dumps(result.to_dict()), encoding="utf-8")
        try:
            work.rename(entry)
        except OSError:  # another thread or process built the same key first: use theirs
            shutil.rmtree(work, ignore_errors=True)
        return result

    def compile_many(self, kernels: Sequence[KernelSource]) -> list[CompileResult]:
        """Compile in parallel across CPU cores; results in input order."""
        if not kernels:
            return []
        jobs = self.config.jobs or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=min(jobs, len(kernels))) as pool:
            return list(pool.map(self.compile, kernels))

    def _load_cached(self, entry: Path) -> CompileResult | None:
        meta = entry / "result.json"
        if not meta.is_file():
            return None
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            result = CompileResult.from_dict(data)
        except (OSError, ValueError, TypeError, KeyError):
            return None
        so_path = str(entry / "kernel.so") if result.ok else None
        if result.ok and not Path(str(so_path)).is_file():
            return None
        return CompileResult(**{**result.__dict__, "so_path": so_path, "cached": True, "seconds": 0.0})
