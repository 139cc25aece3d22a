"""How PyTorch's default-settings convolutions round to TF32: which emulation a kernel must follow to pass
KernelBench's correctness check (1e-4) on convolution problems.

KernelBench builds its reference under PyTorch's defaults, where cuDNN convolutions run in TF32 (10-bit
mantissa operands, fp32 accumulation). An exact-fp32 kernel differs from that reference by TF32's own error
(5e-4 to 2e-3 on KernelBench's convolutional networks, ``results/kernelbench/level3_part3_*``) and fails a
check at 1e-4 that the reference itself passes. A kernel that rounds its operands the way cuDNN does and
accumulates in fp32 differs from it only by summation order. This script finds that way, per convolution
kind, on the GPU it runs on, by computing each convolution:

* ``default``: cuDNN under PyTorch's defaults (TF32 allowed), twice (how far cuDNN is from itself);
* ``exact``: TF32 off;
* ``rna``: TF32 off, on operands rounded to TF32 to nearest, ties away (``cvt.rna.tf32.f32``);
* ``truncate``: TF32 off, on operands with the 13 low mantissa bits cleared (what tensor cores do with raw fp32);

and reporting each one's largest difference from ``default`` and whether ``torch.allclose`` at KernelBench's
1e-4 holds. Where ``rna`` or ``truncate`` holds and ``exact`` does not, a 1xTF32 kernel with that rounding
passes KernelBench's check; where none holds, cuDNN computes differently (Winograd, FFT, split-K order).

    PYTHONPATH=src python3 benchmarks/tf32_rounding_probe.py --out benchmarks/results/tf32_rounding_probe.json
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

KERNELBENCH_TOLERANCE = 1e-4
LOW_BITS = 0x1FFF  # the 13 mantissa bits fp32 has beyond TF32's 10
HALF_UNIT = 0x1000  # half of TF32's last place, in fp32's bits

#: (name, module factory, input shape): KernelBench's convolution kinds at sizes that run in milliseconds.
CASES: tuple[tuple[str, Callable[[], torch.nn.Module], tuple[int, ...]], ...] = (
    ("conv2d_3x3", lambda: torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 56, 56)),
    ("conv2d_7x7_s2_rgb", lambda: torch.nn.Conv2d(3, 64, 7, stride=2, padding=3), (8, 3, 224, 224)),
    ("conv2d_1x1", lambda: torch.nn.Conv2d(256, 128, 1), (8, 256, 28, 28)),
    ("conv2d_depthwise_3x3", lambda: torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), (8, 64, 56, 56)),
    ("conv3d_3x3x3", lambda: torch.nn.Conv3d(16, 32, 3, padding=1), (4, 16, 16, 32, 32)),
    ("conv_transpose2d_4x4_s2", lambda: torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (8, 64, 28, 28)),
    ("conv1d_k5", lambda: torch.nn.Conv1d(128, 128, 5, padding=2), (16, 128, 1024)),
)


def round_nearest(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to TF32 as ``cvt.rna.tf32.f32`` does: to nearest, ties away from zero (finite values)."""
    bits = x.contiguous().view(torch.int32)
    return ((bits + HALF_UNIT) & ~LOW_BITS).view(torch.float32)


def truncate(x: torch.Tensor) -> torch.Tensor:
    """``x`` with the mantissa bits TF32 lacks cleared (toward zero)."""
    return (x.contiguous().view(torch.int32) & ~LOW_BITS).view(torch.float32)


def _set_tf32(allowed: bool) -> None:
    torch.backends.cudnn.allow_tf32 = allowed


def run_with_operands(module: torch.nn.Module, x: torch.Tensor, operand: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``module(x)`` in exact fp32 with input and weight passed through ``operand`` (the bias added as is)."""
    saved = module.weight.data.clone()
    try:
        module.weight.data.copy_(operand(saved))
        _set_tf32(False)
        return module(operand(x))
    finally:
        module.weight.data.copy_(saved)


def compare(out: torch.Tensor, reference: torch.Tensor) -> dict[str, Any]:
    """The largest difference from ``reference`` and KernelBench's verdict on it."""
    return {
        "max_abs_diff": float((out - reference).abs().max()),
        "passes_1e-4": bool(torch.allclose(out, reference, atol=KERNELBENCH_TOLERANCE, rtol=KERNELBENCH_TOLERANCE)),
    }


def probe(name: str, make: Callable[[], torch.nn.Module], shape: tuple[int, ...], device: str) -> dict[str, Any]:
    torch.manual_seed(42)
    module = make().to(device)
    x = torch.rand(shape, device=device)  # KernelBench's inputs
    with torch.no_grad():
        _set_tf32(True)
        default = module(x)
        again = module(x)
        row: dict[str, Any] = {"case": name, "input": list(shape), "max_abs_output": float(default.abs().max())}
        row["default_again"] = compare(again, default)
        row["exact"] = compare(run_with_operands(module, x, lambda t: t), default)
        row["rna"] = compare(run_with_operands(module, x, round_nearest), default)
        row["truncate"] = compare(run_with_operands(module, x, truncate), default)
    _set_tf32(True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--commit")
    args = parser.parse_args()
    from result_file import head_commit, write_result

    if not torch.cuda.is_available():
        print("tf32_rounding_probe: needs a CUDA GPU (cuDNN's TF32 is what it probes)", file=sys.stderr)
        return 2
    rows = []
    for name, make, shape in CASES:
        row = probe(name, make, shape, "cuda")
        rows.append(row)
        print(
            f"{name:26s} |out| {row['max_abs_output']:.3g}  "
            + "  ".join(
                f"{k} {row[k]['max_abs_diff']:.2e}{'*' if row[k]['passes_1e-4'] else ''}"
                for k in ("default_again", "exact", "rna", "truncate")
            ),
            flush=True,
        )
        if args.out is not None:
            write_result(args.out, "tf32_rounding_probe", head_commit(args.commit), rows=rows)
    print("* passes KernelBench's 1e-4 against the default-settings reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
