"""The ``--gpus`` option: which CUDA devices a command uses."""

from __future__ import annotations

from optiml.cli.preflight import gpu_missing
from optiml.errors import NoGPUError, OptimlError

GPUS_HELP = "GPUs to use: 'all', or indices like 0,1."


def parse_gpus(spec: str) -> tuple[int, ...]:
    """``"all"`` (every visible device), or comma-separated indices such as ``0,1``; one line on bad input."""
    if spec == "all":
        missing = gpu_missing()
        if missing is not None:
            raise NoGPUError(f"no CUDA GPU is visible ({missing}): --gpus all needs one (`optiml doctor` checks)")
        import torch

        count = torch.cuda.device_count()
        if count == 0:
            raise NoGPUError("no CUDA GPU is visible: --gpus all needs one (run `optiml doctor`)")
        return tuple(range(count))
    try:
        indices = tuple(int(part) for part in spec.split(",") if part.strip())
    except ValueError:
        raise OptimlError(f"--gpus {spec!r}: give 'all' or comma-separated indices such as 0,1") from None
    if not indices or any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise OptimlError(f"--gpus {spec!r}: give 'all' or distinct comma-separated indices such as 0,1")
    return indices
