"""A task's model, seeded inputs and reference outputs on one device: the task run as PyTorch code.

:class:`TaskRunner` builds what a task file describes — ``get_inputs()`` drawn from a seed (floating
inputs cast to the task's dtype, optionally redrawn from a signed distribution), ``Model`` with its
parameters, ``forward`` on them — on a GPU, the CPU or the ``meta`` device (shapes only, no memory).
The judge's :class:`optiml.evaluate.runtime.TaskRuntime` adds the cached cases, tolerances and the
memory plan on top; the skeleton (:mod:`optiml.kernel.skeleton`) and the graph tracer
(:mod:`optiml.graph.capture`) use this part alone. Imported by the GPU worker: standard library,
NumPy and torch only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from optiml.errors import TaskError
from optiml.task import Task

_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


def _is_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and device.split(":", 1)[0] == "cuda"


class _CudaToDevice(TorchFunctionMode):
    """Sends a task's own ``.cuda()``, ``.to("cuda")`` and ``device="cuda"`` to the runtime's device.

    KernelBench files often build their inputs with ``.cuda()``; on a CPU or meta runtime (task
    checks, skeletons, shape inference) that would fail with "Torch not compiled with CUDA enabled".
    """

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device = device

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0].to(self.device)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = self.device
        if func is torch.Tensor.to and len(args) > 1 and _is_cuda(args[1]):
            args = (args[0], self.device, *args[2:])
        return func(*args, **kwargs)


@contextlib.contextmanager
def _task_code_on(device: torch.device, default_device: bool = True) -> Iterator[None]:
    """Run a task's own code (get_inputs, Model(), forward) for ``device``: tensors it makes without
    a device land there (``default_device``), and off a GPU its CUDA calls are redirected."""
    with contextlib.ExitStack() as stack:
        if default_device:
            stack.enter_context(torch.device(device))
        if device.type != "cuda":
            stack.enter_context(_CudaToDevice(device))
        if device.type == "meta":
            # a distribution checks its parameters with ``bool(tensor)``, which a meta tensor cannot
            # answer (KernelBench's losses draw inputs from ``Pareto(0.01, 1.5).sample(...)``)
            stack.enter_context(_distribution_checks_off())
        yield


@contextlib.contextmanager
def _distribution_checks_off() -> Iterator[None]:
    from torch.distributions import Distribution

    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(before)


class TaskRunner:
    """Builds one task's inputs and model on one device and runs its reference."""

    def __init__(self, task: Task, device: str = "cuda") -> None:
        self.task = task
        self.device = torch.device(device)
        self.dtype = torch_dtype(task.meta.dtype)
        # References are computed in true fp32: cuDNN convolutions default to TF32, which is
        # off by ~1e-3 and would fail honest fp32 kernels (this process is a dedicated worker).
        # Likewise half-precision GEMMs: by default cuBLAS may reduce split-K partial sums in
        # bf16/fp16 (errors of several ulps at K ~ 1000); the reference accumulates in fp32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False

    def make_args(self, seed: int, shape_set: int = 0, distribution: str = "native") -> list[Any]:
        """Seeded forward() arguments on the runtime's device (floating ones cast to the task dtype)."""
        module = self.task.namespace(shape_set)
        torch.manual_seed(seed)
        try:
            with _task_code_on(self.device):
                raw = module.get_inputs()
        except Exception as exc:
            raise TaskError(f"{self.task.shown}: get_inputs() failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(raw, (list, tuple)):
            raise TaskError(f"{self.task.shown}: get_inputs() must return a list, got {type(raw).__name__}")
        generator = None
        if distribution != "native" and self.device.type != "meta":  # meta tensors hold no values to draw
            generator = torch.Generator(device=self.device).manual_seed(seed + 7919)
        return [self._prepare_arg(value, distribution, generator) for value in raw]

    def build_model(self, seed: int, shape_set: int = 0) -> torch.nn.Module:
        module = self.task.namespace(shape_set)
        try:
            # Parameters are initialised on the CPU as the task's author ran it (the same values on any
            # device), except for a meta runtime, which builds them on the meta device: no memory.
            with _task_code_on(self.device, default_device=self.device.type == "meta"):
                init_inputs = module.get_init_inputs()
                torch.manual_seed(seed)
                model = module.Model(*init_inputs)
        except TaskError:
            raise
        except Exception as exc:
            raise TaskError(f"{self.task.shown}: building Model failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(model, torch.nn.Module):
            raise TaskError(f"{self.task.shown}: Model is not a torch.nn.Module")
        model = model.to(self.device)
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                tensor.data = tensor.data.to(self.dtype)
        return model.eval()

    def run_reference(self, model: torch.nn.Module, args: Sequence[Any]) -> list[torch.Tensor]:
        with torch.no_grad(), contextlib.ExitStack() as stack:
            if self.device.type != "cuda":
                stack.enter_context(_CudaToDevice(self.device))
            try:
                out = model(*args)
            except Exception as exc:
                raise TaskError(f"{self.task.shown}: Model.forward failed: {type(exc).__name__}: {exc}") from exc
        return outputs_as_list(out, self.task)

    def _prepare_arg(self, value: Any, distribution: str, generator: torch.Generator | None) -> Any:
        if isinstance(value, torch.Tensor):
            tensor = value.to(self.device)
            if tensor.is_floating_point():
                tensor = tensor.to(self.dtype)
                if distribution == "normal":
                    tensor = torch.randn(tensor.shape, generator=generator, device=self.device, dtype=self.dtype)
                elif distribution == "uniform_pm1":
                    tensor = torch.rand(tensor.shape, generator=generator, device=self.device, dtype=self.dtype)
                    tensor = tensor * 2 - 1
            return tensor.contiguous()
        if isinstance(value, (bool, int, float)):
            return value
        raise TaskError(
            f"{self.task.shown}: get_inputs() returned a {type(value).__name__}; only tensors and int/float/bool"
        )


def outputs_as_list(out: Any, task: Task) -> list[torch.Tensor]:
    items = list(out) if isinstance(out, (list, tuple)) else [out]
    if not items:
        raise TaskError(f"{task.shown}: Model.forward returned no outputs")
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise TaskError(f"{task.shown}: Model.forward output {i} is a {type(item).__name__}, not a tensor")
    return [t.contiguous() for t in items]


def runs_on_the_cpu_instead(exc: BaseException) -> bool:
    """Whether a failure on the meta device is the meta device's (an op without a meta kernel, a
    data-dependent ``.item()``, …), so the same code may well run on the CPU; False for the task's own
    faults (an import error, a syntax error, a wrong argument), which the CPU would only repeat."""
    cause = exc.__cause__ if isinstance(exc, TaskError) else exc  # a TaskError's own text names the file
    while cause is not None:
        if isinstance(cause, NotImplementedError) or "meta" in str(cause).lower():
            return True
        cause = cause.__cause__
    return False


def smallest_shape_set(runtime: TaskRunner) -> int:
    sizes = []
    for index in range(runtime.task.num_shape_sets):
        values = runtime.task.namespace_globals(index)
        product = 1
        for value in values.values():
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                product *= value
        sizes.append((product, index))
    return min(sizes)[1]


_smallest_shape_set = smallest_shape_set  # the older name
