"""What proposers are told about the target GPU: probed here when one is visible, else the arch only."""

from __future__ import annotations

from optiml.propose.base import TargetGPU


def probe_target(arch: str, bandwidth_bytes_per_s: float | None = None) -> TargetGPU:
    """The GPU kernels are compiled for (``arch``), with GPU 0's properties when torch sees one.

    Probing initialises CUDA in this process; without a GPU (or without torch's CUDA) only the
    architecture is known.
    """
    try:
        import torch

        if not torch.cuda.is_available():
            return TargetGPU(arch=arch)
        props = torch.cuda.get_device_properties(0)
    except Exception:  # a broken driver or torch: the prompt simply knows less
        return TargetGPU(arch=arch)
    return TargetGPU(
        arch=arch,
        name=str(props.name),
        sm_count=int(props.multi_processor_count),
        smem_per_block_bytes=_int(getattr(props, "shared_memory_per_block_optin", None)),
        smem_per_sm_bytes=_int(getattr(props, "shared_memory_per_multiprocessor", None)),
        l2_bytes=_int(getattr(props, "L2_cache_size", None)),
        memory_bytes=_int(getattr(props, "total_memory", None)),
        bandwidth_gbs=bandwidth_bytes_per_s / 1e9 if bandwidth_bytes_per_s else None,
    )


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and value > 0 else None
