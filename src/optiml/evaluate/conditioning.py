"""How far the task's own reference is from the exact answer: the fp32 (or half) reference against float64.

KernelBench accepts a kernel whose outputs are within ``atol = rtol`` of the reference's (1e-4 in fp32, 1e-2 in
fp16/bf16). A deep model's reference can itself be that far from the exact answer — rounding grows through
dozens of layers, normalisations divide by small variances — and then another correct implementation, which
rounds differently, may land as far on the other side: no kernel can be sure to pass. Measured on the CPU at
KernelBench's sizes (``docs/bench.md``), level3/24_EfficientNetB2 and 45_UNetSoftmax sit 13-510× outside that
tolerance. :func:`conditioning_notes` runs the reference once more in float64 and says, per output, how many of
KernelBench's tolerances the task's reference is from it, so ``optiml check-task`` explains such a failure
before it happens.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from optiml.errors import TaskError
from optiml.evaluate.tolerance import ILL_CONDITIONED, Float64Distance
from optiml.task_runtime import TaskRunner

#: KernelBench's ``atol = rtol`` per precision; ``optiml.bench.user_clock_child.TOLERANCES`` holds the same (that
#: script imports nothing of OptiML's, and the evaluation layer imports nothing of the bench's)
KERNELBENCH_TOLERANCES = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
#: above this many bytes of inputs and outputs the float64 run (twice the memory, several times the time on
#: a CPU) is skipped: deep models, where conditioning matters, have small inputs
MAX_PROBE_BYTES = 1 << 28


def float64_distances(
    runtime: TaskRunner,
    model: torch.nn.Module,
    args: Sequence[Any],
    outputs: Sequence[torch.Tensor],
    atol: float,
    rtol: float,
) -> list[Float64Distance | None] | str:
    """Per output, the reference's distance from the same model run in float64 on the same inputs (None for a
    non-floating output); a one-line reason instead where it is not measured (too large, or the model does not
    run in float64)."""
    size = sum(t.numel() * t.element_size() for t in [*args, *outputs] if isinstance(t, torch.Tensor))
    if size > MAX_PROBE_BYTES:
        return f"inputs and outputs take {size / 1e6:.0f} MB; the float64 run is skipped"
    try:
        exact = runtime.run_reference(copy.deepcopy(model).double(), [_double(a) for a in args])
    except (TaskError, RuntimeError, TypeError) as exc:
        cause = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        return f"the reference does not run in float64: {cause}"
    found: list[Float64Distance | None] = []
    for given, wide in zip(outputs, exact, strict=False):
        if not given.is_floating_point() or given.shape != wide.shape:
            found.append(None)
            continue
        difference = (given.double() - wide).abs()
        finite = torch.isfinite(difference)
        if not bool(finite.any()):
            found.append(None)
            continue
        worst = float((difference / (atol + rtol * wide.abs()))[finite].max())
        found.append(Float64Distance(float(difference[finite].max()), worst))
    return found


def conditioning_notes(
    runtime: TaskRunner, model: torch.nn.Module, args: Sequence[Any], outputs: Sequence[torch.Tensor]
) -> list[str]:
    """One note per floating output: the task's reference against a float64 run of the same model and inputs."""
    precision = str(runtime.dtype).removeprefix("torch.")
    tolerance = KERNELBENCH_TOLERANCES.get(precision)
    if tolerance is None or not any(o.is_floating_point() for o in outputs):
        return []
    distances = float64_distances(runtime, model, args, outputs, tolerance, tolerance)
    if isinstance(distances, str):
        return [f"conditioning: not measured ({distances})"]
    notes = []
    for index, distance in enumerate(distances):
        if distance is None:
            continue
        note = (
            f"output {index}: the {precision} reference is {distance.max_abs:.3g} from float64 at "
            f"most, {distance.worst:.2g}× KernelBench's tolerance (atol = rtol = {tolerance:g})"
        )
        if distance.worst > ILL_CONDITIONED:
            note += ": ill-conditioned — a kernel as accurate as the reference can still fail KernelBench's check"
        notes.append(note)
    return notes


def _double(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    return value
