"""A GPU's peaks: its copy bandwidth and compute rates, measured once per GPU and cached, or datasheet.

Both the evaluator's physics floor (:mod:`optiml.evaluate.roofs`) and the profiler's roofline
(:mod:`optiml.profile.roofline`) stand on these figures, so they live below both. :func:`find_peaks`
is the lookup they share: configured peaks, else the ones cached for this GPU, else measured now by
:mod:`optiml.peaks.probe` in the worker's sandbox (and cached as JSON under
``~/.cache/optiml/roofline/<gpu-name>.json``), else the datasheet figures (labelled, with why).
Without a visible GPU the project's target machine (:data:`ASSUMED_GPU`) is assumed.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from optiml.cache_dirs import user_cache_dir
from optiml.integrity import process
from optiml.integrity.process import LaunchBuilder, sandbox_launch
from optiml.kernel.source import KernelSource


@dataclass(frozen=True)
class Peaks:
    """Device ceilings in bytes/s and flop/s (0 = unknown) and where they came from."""

    gpu: str
    dram_bandwidth: float
    fp32_flops: float
    fp16_tensor_flops: float = 0.0
    bf16_tensor_flops: float = 0.0
    fp64_flops: float = 0.0
    source: str = "datasheet"  # "measured …" or "datasheet …"

    def compute_peak(self, dtype: str) -> float:
        """The compute roof that applies to a task of ``dtype`` (flop/s). float32: the faster of the FMA
        rate and three TF32 tensor-core products per product (3xTF32, fp32 accuracy: a sixth of the
        half-precision tensor rate), which the GEMM template's ``tf32x3_tma`` kernel runs."""
        if dtype == "float16":
            return self.fp16_tensor_flops or self.fp32_flops
        if dtype == "bfloat16":
            return self.bf16_tensor_flops or self.fp16_tensor_flops or self.fp32_flops
        if dtype == "float64":
            return self.fp64_flops or self.fp32_flops / 2
        return max(self.fp32_flops, self.fp16_tensor_flops / 6)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peaks:
        return cls(
            gpu=str(data["gpu"]),
            dram_bandwidth=float(data["dram_bandwidth"]),
            fp32_flops=float(data["fp32_flops"]),
            fp16_tensor_flops=float(data.get("fp16_tensor_flops", 0.0)),
            bf16_tensor_flops=float(data.get("bf16_tensor_flops", 0.0)),
            fp64_flops=float(data.get("fp64_flops", 0.0)),
            source=str(data.get("source", "datasheet")),
        )


TB, TFLOP = 1e12, 1e12

#: (name pattern, peaks) — dense (no sparsity) figures from NVIDIA's datasheets; first match wins.
DATASHEET: tuple[tuple[str, Peaks], ...] = (
    ("H200", Peaks("NVIDIA H200", 4.8 * TB, 67 * TFLOP, 989 * TFLOP, 989 * TFLOP, 67 * TFLOP)),
    ("H100.*PCIe", Peaks("NVIDIA H100 PCIe", 2.0 * TB, 51 * TFLOP, 756 * TFLOP, 756 * TFLOP, 51 * TFLOP)),
    ("H100", Peaks("NVIDIA H100 SXM", 3.35 * TB, 67 * TFLOP, 989 * TFLOP, 989 * TFLOP, 67 * TFLOP)),
    ("A100.*80GB", Peaks("NVIDIA A100 80GB", 2.039 * TB, 19.5 * TFLOP, 312 * TFLOP, 312 * TFLOP, 19.5 * TFLOP)),
    ("A100", Peaks("NVIDIA A100 40GB", 1.555 * TB, 19.5 * TFLOP, 312 * TFLOP, 312 * TFLOP, 19.5 * TFLOP)),
)

#: The GPU assumed when none is visible and none is configured: the project's target machine.
ASSUMED_GPU = "NVIDIA H200"


def datasheet_peaks(gpu: str) -> Peaks | None:
    """Datasheet peaks for a GPU name (``source`` says they are datasheet figures), or None."""
    for pattern, peaks in DATASHEET:
        if re.search(pattern, gpu, re.IGNORECASE):
            return Peaks(**{**asdict(peaks), "gpu": gpu, "source": f"datasheet ({peaks.gpu})"})
    return None


def cache_path(cache_dir: Path, gpu: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", gpu).strip("_") or "gpu"
    return cache_dir / f"{safe}.json"


def load_cached(cache_dir: Path, gpu: str) -> Peaks | None:
    path = cache_path(cache_dir, gpu)
    try:
        return Peaks.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_cached(cache_dir: Path, peaks: Peaks) -> Path:
    path = cache_path(cache_dir, peaks.gpu)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(peaks.to_dict(), indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def default_cache_dir() -> Path:
    """Where measured peaks are cached, one JSON file per GPU name."""
    return user_cache_dir("roofline")


def gpu_name(index: int | None = None) -> str | None:
    """Name of GPU ``index`` (default 0) from nvidia-smi, or None without a visible GPU."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader", "-i", str(index or 0)],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


class _Compiles(Protocol):
    def compile(self, kernel: KernelSource) -> Any: ...


def find_peaks(
    compiler: _Compiles,
    *,
    configured: Peaks | None = None,
    gpu: int | None = None,
    cache_dir: Path | None = None,
    measure: bool = True,
    timeout_s: float = 300.0,
    launch: LaunchBuilder | None = None,
    gpu_lock: threading.Lock | None = None,
) -> Peaks:
    """Configured peaks, else cached for this GPU, else measured now (and cached), else datasheet.

    ``gpu``: the CUDA device index (``CUDA_VISIBLE_DEVICES`` of the probe); ``launch``: the sandbox
    the probe runs in (the worker's, read-only filesystem included, by default); ``gpu_lock``: held
    while the probe measures (an evaluator's, so no timing runs beside it).
    """
    if configured is not None:
        return configured
    cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
    name = gpu_name(gpu)
    if name is None:
        fallback = datasheet_peaks(ASSUMED_GPU)
        assert fallback is not None
        source = f"{fallback.source}; no GPU visible, {ASSUMED_GPU} assumed"
        return Peaks(**{**fallback.to_dict(), "source": source})
    cached = load_cached(cache_dir, name)
    if cached is not None:
        return cached
    failure = "measurement disabled"
    if measure:
        launch = launch or sandbox_launch(isolate_filesystem=True)
        with gpu_lock if gpu_lock is not None else contextlib.nullcontext():
            measured = measure_peaks(compiler, launch, timeout_s, gpu)
        if isinstance(measured, Peaks):
            save_cached(cache_dir, measured)
            return measured
        failure = measured
    sheet = datasheet_peaks(name) or datasheet_peaks(ASSUMED_GPU)
    assert sheet is not None
    note = "" if datasheet_peaks(name) else f"; unknown GPU {name}, {ASSUMED_GPU} figures"
    return Peaks(**{**sheet.to_dict(), "gpu": name, "source": f"{sheet.source}{note}; {failure}"})


def measure_peaks(compiler: _Compiles, launch: LaunchBuilder, timeout_s: float, gpu: int | None = None) -> Peaks | str:
    """Run the peaks probe in the worker setup; a one-line reason on failure."""
    from optiml.peaks.probe import FMA_PROBE_SOURCE  # not at the top: ``-m optiml.peaks.probe`` imports this package

    fma = compiler.compile(KernelSource(code=FMA_PROBE_SOURCE))
    with tempfile.TemporaryDirectory(prefix="optiml-peaks-") as tmp:
        workdir = Path(tmp)
        out = workdir / "peaks.json"
        argv = [sys.executable, "-m", "optiml.peaks.probe", "--out", str(out)]
        if fma.ok and fma.so_path:
            argv += ["--fma-so", fma.so_path]
        extra_env = {"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else {}
        outcome = process.run(argv, launch, workdir, timeout_s, extra_env)
        if outcome.timed_out:
            return f"peak measurement timed out after {timeout_s:.0f} s"
        try:
            return Peaks.from_dict(json.loads(out.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            detail = process.last_line(outcome.stderr) or outcome.start_error or "no result"
            return f"peak measurement failed: {detail}"
