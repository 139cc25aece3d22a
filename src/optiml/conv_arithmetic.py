"""Which arithmetic PyTorch's default settings give each convolution of a model: measured, not guessed.

At PyTorch's defaults (``torch.backends.cudnn.allow_tf32``) cuDNN *may* multiply a float32 convolution's operands
rounded to TF32; whether it does is the choice of the algorithm its heuristics pick for the shape. On an H100
(2026-12-07) depthwise and forward 3-D convolutions stayed exact, and so did some grouped transposed ones and some
2-D ones of few channels (KernelBench level 1's 72 and 75, level 2's 21, 57, 69 and 73: their default-settings
references equal exact fp32, so a kernel rounding to TF32 missed KernelBench's 1e-4 there). A kernel meant to
match the default-settings reference must do what cuDNN did, shape by shape.

:func:`measure` runs a model once and, for every ``aten.convolution`` call, compares cuDNN's output under the
current settings with the same call in exact fp32 and with exact fp32 over operands rounded to TF32: the nearer
names the call's arithmetic. Calls are keyed by :func:`signature`, which the graph capture
(:mod:`optiml.graph.capture`) writes on its conv nodes, so a plan looks its convolutions up. Imported by the GPU
worker: standard library and torch only.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: a convolution named in a task's source: the modules, the functions and torch's own ops
CONVOLUTION = re.compile(r"\b(Conv(Transpose)?[123]d|conv(_transpose)?[123]d|convolution)\b")
#: the two arithmetics a float32 convolution takes at PyTorch's defaults
TF32, EXACT = "tf32", "exact"
#: the low mantissa bits TF32 drops (23 - 10), and the mask that keeps the rest
_DROPPED_BITS = 13
_KEPT = -(1 << _DROPPED_BITS)


def _ints(values: Any, n: int, default: int) -> tuple[int, ...]:
    """An int or a sequence of them as ``n`` ints (one value repeated; none: ``default``)."""
    if values is None or (isinstance(values, (list, tuple)) and not values):
        values = [default]
    if isinstance(values, int):
        values = [values]
    found = [int(v) for v in values]
    return tuple(found * n if len(found) == 1 else found)


def signature(
    input_shape: Sequence[int],
    weight_shape: Sequence[int],
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> str:
    """One ``aten.convolution`` call's shapes and hyper-parameters as one string: cuDNN's algorithm choice, and so
    the arithmetic, is a function of these (the bias is added apart)."""
    n = len(weight_shape) - 2
    parts = (
        f"x={list(map(int, input_shape))}",
        f"w={list(map(int, weight_shape))}",
        f"s={list(_ints(stride, n, 1))}",
        f"p={list(_ints(padding, n, 0))}",
        f"d={list(_ints(dilation, n, 1))}",
        f"t={int(bool(transposed))}",
        f"op={list(_ints(output_padding, n, 0))}",
        f"g={int(groups)}",
    )
    return "conv " + " ".join(parts)


def round_to_tf32(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` (float32) with each value rounded to TF32's 10 mantissa bits, to nearest, ties to even."""
    bits = tensor.contiguous().view(torch.int32)
    odd = (bits >> _DROPPED_BITS) & 1
    return ((bits + ((1 << (_DROPPED_BITS - 1)) - 1) + odd) & _KEPT).view(torch.float32)


def nearer(default: torch.Tensor, exact: torch.Tensor, rounded: torch.Tensor) -> str:
    """:data:`TF32` where the default-settings output is nearer (largest difference) the exact product of
    TF32-rounded operands than the exact one; :data:`EXACT` otherwise (ties too: nothing tells them apart)."""
    to_exact = (default - exact).abs().max().item() if default.numel() else 0.0
    to_rounded = (default - rounded).abs().max().item() if default.numel() else 0.0
    return TF32 if to_rounded < to_exact else EXACT


@contextlib.contextmanager
def _cudnn_exact() -> Iterator[None]:
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = saved


class _ConvolutionProbe(TorchDispatchMode):
    """Records each float32 ``aten.convolution`` call's arithmetic (see the module) as the model runs."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, str] = {}

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.convolution.default and isinstance(out, torch.Tensor):
            self._record(func, list(args), out)
        return out

    def _record(self, func: Any, args: list[Any], out: torch.Tensor) -> None:
        x, w = args[0], args[1]
        if x.dtype != torch.float32 or w.dtype != torch.float32:
            return
        key = signature(x.shape, w.shape, *args[3:9])
        if key in self.found:  # the same call is given the same algorithm
            return
        try:
            with _cudnn_exact():
                exact = func(*args)
                rounded = func(round_to_tf32(x), round_to_tf32(w), *args[2:])
            self.found[key] = nearer(out, exact, rounded)
        except RuntimeError:  # no room for the probe's copies (or cuDNN refused a setting): the planner's rule stands
            return


def measure(call: Callable[[], Any]) -> dict[str, str]:
    """Run ``call`` (a model's forward, under the settings to measure) and return each float32 convolution's
    arithmetic there by :func:`signature`: :data:`TF32` or :data:`EXACT`."""
    probe = _ConvolutionProbe()
    with torch.no_grad(), probe:
        call()
    return probe.found


def describe(found: dict[str, str]) -> str:
    """One line for a task's notes: how many convolutions cuDNN ran in each arithmetic."""
    tf32 = sum(1 for arithmetic in found.values() if arithmetic == TF32)
    return (
        f"convolutions at PyTorch's default settings, measured call by call: {tf32} of {len(found)} with operands "
        "rounded to TF32, the rest in exact fp32 (cuDNN's choice; the template kernels do the same)"
    )
