"""A task's model, seeded inputs and reference outputs on one device: the task run as PyTorch code.

:class:`TaskRunner` builds what a task file describes — ``get_inputs()`` drawn from a seed (floating
inputs cast to the task's dtype, optionally redrawn from a signed distribution), ``Model`` with its
parameters, ``forward`` on them — on a GPU, the CPU or the ``meta`` device (shapes only, no memory).
The judge's :class:`optiml.evaluate.runtime.TaskRuntime` adds the cached cases, tolerances and the
memory plan on top; the skeleton (:mod:`optiml.kernel.skeleton`) and the graph tracer
(:mod:`optiml.graph.capture`) use this part alone. Imported by the GPU worker: standard library,
NumPy and torch only.

The reference runs as KernelBench runs it (``OPTIML['mode']``, :mod:`optiml.task`): ``Model`` as built,
in training mode unless the file says otherwise, so BatchNorm normalises by batch statistics. Such a
BatchNorm still writes its running statistics on every call in PyTorch, which would change the
parameters a candidate receives between trials; here it is built not to (``track_running_stats``
off on the instance: the same output, no state written), so every call gives the same answer. A
module that draws random numbers in training mode (an active Dropout, RReLU, attention dropout) is refused
unless two draws on the same inputs leave every output within :data:`SHARE_OF_TOLERANCE` of the tolerance
(:func:`moved_by_draws`: KernelBench's level 2 zeroes some dropouts' outputs, or averages them away,
before they reach the output). ``"eval"`` mode calls
``model.eval()``. The reference's arithmetic follows ``OPTIML['precision']``: exact fp32 (this
process's global settings, which :class:`TaskRunner` makes exact) or PyTorch's defaults
(:func:`torch_default_precision`, around each reference call).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from optiml.conv_arithmetic import CONVOLUTION, measure
from optiml.errors import TaskError
from optiml.task import Task

#: The backend switches that decide a reference's arithmetic: TF32 in cuBLAS and cuDNN, and the
#: reduced-precision split-K reductions of half-precision GEMMs.
PRECISION_FLAGS: tuple[tuple[Any, str], ...] = (
    (torch.backends.cuda.matmul, "allow_tf32"),
    (torch.backends.cudnn, "allow_tf32"),
    (torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
    (torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
)
#: Their values as this process found them (PyTorch's defaults: TF32 convolutions, exact fp32
#: matmuls unless the environment says otherwise), read before any TaskRunner makes them exact.
TORCH_DEFAULTS: tuple[bool, ...] = tuple(getattr(owner, name) for owner, name in PRECISION_FLAGS)
_EXACT = (False, False, False, False)
#: two draws may move an output by at most this share of the tolerance (atol + rtol·|reference|)
SHARE_OF_TOLERANCE = 0.01
#: the most inputs and parameters a task may hold for the CPU to run it twice (the check of its draws)
CHECK_BYTES = 4 << 30
#: (task file, its last change, shape set) → how far two draws moved the outputs (the CPU check runs once)
_MOVED: dict[tuple[str, int, int], float] = {}
#: the checks under way: the check's own model builds do not check again
_CHECKING: set[tuple[str, int, int]] = set()

_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


def _set_precision(values: Sequence[bool]) -> None:
    for (owner, name), value in zip(PRECISION_FLAGS, values, strict=True):
        setattr(owner, name, value)


@contextlib.contextmanager
def torch_default_precision() -> Iterator[None]:
    """PyTorch's own precision settings for the duration (:class:`TaskRunner` makes the process's
    references exact: no TF32, no reduced-precision half GEMM reductions)."""
    saved = tuple(getattr(owner, name) for owner, name in PRECISION_FLAGS)
    _set_precision(TORCH_DEFAULTS)
    try:
        yield
    finally:
        _set_precision(saved)


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


#: A model holding this many bytes of parameters and buffers, or more, is initialised on its GPU: on the CPU a
#: whole-model task's weights (8 GB in level3/2_ShallowWideMLP) take seconds to draw for every case verification
#: builds, where the GPU takes milliseconds.
DEVICE_INIT_BYTES = 1 << 30


def model_bytes(task: Task, shape_set: int = 0) -> int:
    """The bytes of ``Model``'s parameters and buffers, from a build on the meta device (0 where it fails)."""
    module = task.namespace(shape_set)
    try:
        with _task_code_on(torch.device("meta")):
            model = module.Model(*module.get_init_inputs())
        tensors = [*model.parameters(), *model.buffers()]
    except Exception:  # the real build says what is wrong, on the device it runs on
        return 0
    return sum(t.numel() * t.element_size() for t in tensors)


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
        # A task with precision "tf32" gets PyTorch's defaults around each reference call
        # (run_reference); the process's own state stays exact, which the exact `eager` timing reads.
        _set_precision(_EXACT)
        self.notes: list[str] = []  # how the reference runs (mode, precision), said once
        #: by shape set: the bytes of a model initialised on the GPU, 0 for one built on the CPU
        self._device_init_bytes: dict[int, int] = {}

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
        on_device = self._initialises_on_device(shape_set)
        try:
            # Parameters are initialised on the CPU as the task's author ran it (the same values on any
            # device), except for a meta runtime, which builds them on the meta device (no memory), and a
            # model of DEVICE_INIT_BYTES or more, built on its GPU (seeded there: other values than the CPU's).
            with _task_code_on(self.device, default_device=self.device.type == "meta" or on_device):
                init_inputs = module.get_init_inputs()
                torch.manual_seed(seed)
                model = module.Model(*init_inputs)
        except TaskError:
            raise
        except Exception as exc:
            if on_device:  # its __init__ needs the CPU (NumPy, mixed devices): built there, as for any model
                self._device_init_bytes[shape_set] = 0
                return self.build_model(seed, shape_set)
            if self.device.type == "meta" and runs_on_the_cpu_instead(exc):
                # a constructor the meta device cannot run (Swin's stochastic-depth schedule calls .item() on a
                # linspace): built on the CPU and moved, for the capture and the export's signature alike
                return TaskRunner(self.task, "cpu").build_model(seed, shape_set).to(self.device)
            raise TaskError(f"{self.task.shown}: building Model failed: {type(exc).__name__}: {exc}") from exc
        if on_device:
            self._note(
                f"Model's {self._device_init_bytes[shape_set] / 2**30:.1f} GiB of parameters and buffers are "
                "initialised on the GPU (seeded; the CPU would take seconds a case)"
            )
        if not isinstance(model, torch.nn.Module):
            raise TaskError(f"{self.task.shown}: Model is not a torch.nn.Module")
        model = model.to(self.device)
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                tensor.data = tensor.data.to(self.dtype)
        if self.task.meta.mode == "eval":
            model.eval()
        else:
            self._refuse_random_modules(model, shape_set)
            _batch_statistics_without_state(model)
        self._note(semantics_note(self.task, model))
        return model

    def _initialises_on_device(self, shape_set: int) -> bool:
        """Whether ``Model`` of ``shape_set`` is built on the GPU (decided once, from a meta build's bytes)."""
        if self.device.type != "cuda":
            return False
        if shape_set not in self._device_init_bytes:
            size = model_bytes(self.task, shape_set)
            self._device_init_bytes[shape_set] = size if size >= DEVICE_INIT_BYTES else 0
        return self._device_init_bytes[shape_set] > 0

    def run_reference(self, model: torch.nn.Module, args: Sequence[Any]) -> list[torch.Tensor]:
        with torch.no_grad(), contextlib.ExitStack() as stack:
            if self.device.type != "cuda":
                stack.enter_context(_CudaToDevice(self.device))
            if self.task.meta.precision == "tf32":
                stack.enter_context(torch_default_precision())
            try:
                out = model(*args)
            except Exception as exc:
                raise TaskError(f"{self.task.shown}: Model.forward failed: {type(exc).__name__}: {exc}") from exc
        return outputs_as_list(out, self.task)

    def convolution_arithmetic(self, model: torch.nn.Module, args: Sequence[Any]) -> dict[str, str]:
        """Each float32 convolution's arithmetic in the reference, by call signature (:mod:`optiml.conv_arithmetic`):
        measured where the reference runs at PyTorch's defaults on a GPU; empty elsewhere (exact settings, or no
        cuDNN, leave no choice) and for a task whose source names no convolution. The model runs on copies of
        ``args`` (a forward that writes its inputs leaves the case's as they were). The measurement only steers
        the planner, so it never fails the task: where it cannot run (no room for the extra forward, a forward the
        dispatch mode cannot follow) a note says so and the planner's rule stands."""
        if self.task.meta.precision != "tf32" or self.device.type != "cuda" or not CONVOLUTION.search(self.task.source):
            return {}
        try:
            copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            with torch_default_precision():
                return measure(lambda: model(*copies))
        except Exception as exc:  # advisory: the rule stands, and the note says why
            self._note(
                f"convolutions' arithmetic at PyTorch's defaults not measured ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:160] if str(exc) else 'no message'}): the planner's rule stands"
            )
            return {}

    def _refuse_random_modules(self, model: torch.nn.Module, shape_set: int) -> None:
        """A module whose training-mode output is random (an active Dropout, RReLU, attention dropout) is refused
        in one line when its draws reach the outputs: no kernel can be verified against a reference that differs
        on every call. Draws that do not reach them (a dropout whose output is zeroed, or averaged over a size-1
        dim, further on) leave a note, and the model runs as written."""
        found = ((name, _random_in_training(m)) for name, m in model.named_modules() if m.training)
        named = next((f"{name or 'Model'} = {what}" for name, what in found if what is not None), None)
        if named is None:
            return
        refused = (
            f"{self.task.shown}: {named} is random in training mode (as KernelBench runs the reference): "
            "its output differs on every call"
        )
        hint = "set OPTIML = {'mode': 'eval'} to run the reference in eval mode"
        try:
            moved = moved_by_draws(self.task, shape_set)
        except TaskError as exc:
            raise TaskError(f"{refused}, and {exc}; {hint}") from exc
        if moved > SHARE_OF_TOLERANCE:
            raise TaskError(
                f"{refused}, so no kernel can be verified against it (two draws on the same inputs "
                f"{movement(moved)}); {hint}"
            )
        self._note(
            f"{named} draws random numbers in training mode, but they do not reach the outputs (two draws on "
            f"the same inputs moved them by {moved:.2g}× the tolerance): the model runs as written"
        )

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

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


def moved_by_draws(task: Task, shape_set: int) -> float:
    """How far two draws of the model's random numbers move its outputs on the same inputs, in units of the task's
    tolerance (inf: a shape, a dtype or an integer changed): the model run twice on the CPU, once per task file
    and shape set. Raises :class:`TaskError` where its inputs and parameters are over :data:`CHECK_BYTES`."""
    key = (str(task.path), task.path.stat().st_mtime_ns, shape_set)
    if key in _CHECKING:
        return 0.0  # the check's own build of the model
    if key not in _MOVED:
        _CHECKING.add(key)
        try:
            _MOVED[key] = _moved_share(task, shape_set)
        finally:
            _CHECKING.discard(key)
    return _MOVED[key]


def movement(moved: float) -> str:
    """How far two draws moved the outputs (:func:`moved_by_draws`), as words."""
    return "changed an output's shape or integers" if math.isinf(moved) else f"moved it by {moved:.3g}× the tolerance"


def _moved_share(task: Task, shape_set: int) -> float:
    runner = TaskRunner(task, "cpu")
    runs = []
    with torch.random.fork_rng(devices=[]):  # the caller's generator is left as it was (the runner seeds it)
        size = model_bytes(task, shape_set) + _input_bytes(task, shape_set)
        if size > CHECK_BYTES:
            raise TaskError(
                f"whether its output depends on them is checked by running it twice on the CPU, and its inputs "
                f"and parameters ({size / 2**30:.1f} GiB) are over the {CHECK_BYTES / 2**30:.0f} GiB that check runs"
            )
        args = runner.make_args(0, shape_set)
        model = runner.build_model(0, shape_set)
        for seed in (1, 2):
            torch.manual_seed(seed)
            runs.append(runner.run_reference(model, args))
    worst = 0.0
    for first, second in zip(*runs, strict=True):
        if first.shape != second.shape or first.dtype != second.dtype:
            return math.inf
        if not first.is_floating_point():
            if not torch.equal(first, second):
                return math.inf
            continue
        a, b = first.double(), second.double()
        diff = (a - b).abs()
        diff[(a == b) | (a.isnan() & b.isnan())] = 0.0  # equal infinities, NaN where both are NaN
        moved = (diff / (task.meta.atol + task.meta.rtol * b.abs())).nan_to_num(nan=math.inf)
        worst = max(worst, float(moved.max()) if moved.numel() else 0.0)
    return worst


def _input_bytes(task: Task, shape_set: int) -> int:
    """The bytes of ``get_inputs()``'s tensors at ``shape_set``, drawn on the meta device (no memory)."""
    args = TaskRunner(task, "meta").make_args(0, shape_set)
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def _random_in_training(module: torch.nn.Module) -> str | None:
    """The module as written (``nn.Dropout(p=0.2)``) when it draws random numbers in training mode."""
    nn = torch.nn
    if isinstance(module, nn.modules.dropout._DropoutNd) and 0 < module.p < 1:
        return f"nn.{type(module).__name__}(p={module.p:g})"
    if isinstance(module, nn.RReLU) and module.lower != module.upper:
        return f"nn.RReLU(lower={module.lower:g}, upper={module.upper:g})"
    if isinstance(module, nn.MultiheadAttention) and module.dropout > 0:
        return f"nn.MultiheadAttention(dropout={module.dropout:g})"
    return None


def _batch_statistics_without_state(model: torch.nn.Module) -> None:
    """Training-mode BatchNorms normalise by batch statistics without writing their running ones.

    PyTorch's BatchNorm in training mode updates ``running_mean``, ``running_var`` and
    ``num_batches_tracked`` on every call; their values never reach the output (batch statistics
    do), but they are parameters a candidate receives, and a reference that rewrites them would
    hand each trial different inputs. With ``track_running_stats`` off on the instance, ``forward``
    passes no running statistics to ``F.batch_norm``: the same output, the buffers untouched and
    still in ``state_dict`` (the kernel's arguments do not change)."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.training:
            module.track_running_stats = False


def semantics_note(task: Task, model: torch.nn.Module) -> str:
    """One line on how the reference runs: its mode, what the mode changes here, and its precision."""
    groups: dict[str, list[str]] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            kind = f"BatchNorm on {'batch' if module.training else 'running'} statistics"
        elif isinstance(module, torch.nn.modules.dropout._DropoutNd):
            kind = f"Dropout p={module.p:g} in {'training' if module.training else 'eval'} mode"
        else:
            continue
        groups.setdefault(kind, []).append(name or "Model")
    modules = "; ".join(f"{kind}: {_some(names)}" for kind, names in groups.items()) or "no BatchNorm or Dropout"
    mode = "train (as KernelBench runs it)" if task.meta.mode == "train" else "eval (model.eval())"
    precision = (
        "exact (TF32 off, half GEMMs reduced in fp32)"
        if task.meta.precision == "exact"
        else "tf32 (PyTorch's defaults: cuDNN convolutions in TF32; candidates may use TF32)"
    )
    return f"reference: mode {mode}, {modules}; precision {precision}"


def _some(names: list[str], shown: int = 3) -> str:
    if len(names) <= shown:
        return ", ".join(names)
    return f"{len(names)} modules ({', '.join(names[:shown])}, …)"


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
