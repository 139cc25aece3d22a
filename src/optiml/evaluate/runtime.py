"""Running a task: seeded inputs, the model, reference outputs — cached per task in the worker.

Inputs for a (seed, shape set, distribution) are the same for every candidate, so they and
the reference outputs are computed once per task and kept on the device; each trial hands
the candidate fresh clones. The cache holds as many cases as the memory plan allows
(:mod:`optiml.evaluate.memory`), least recently used first out; an evicted case is rebuilt
identically from its seed. Each case carries its tolerance (:mod:`optiml.evaluate.tolerance`):
the task's, adjusted per output where trivial outputs would pass or signed inputs cancel.
A default signed distribution on which the reference is not finite is replaced by the native
inputs, and said so in :attr:`TaskRuntime.notes`. Outputs with far fewer values than the inputs
are measured when the task is settled (:mod:`optiml.evaluate.sensitivity`), and perturbed inputs
that move them are added to the distributions verification uses. Standard library, NumPy and
torch only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optiml.errors import TaskError
from optiml.evaluate import sensitivity
from optiml.evaluate.conditioning import conditioning_notes, float64_distances
from optiml.evaluate.memory import MemoryPlan, device_bytes, peak_bytes, plan_memory, used_bytes
from optiml.evaluate.tolerance import Float64Distance, Tolerance, decide
from optiml.task import SIGNED_DISTRIBUTIONS, Task
from optiml.task_runtime import TaskRunner, runs_on_the_cpu_instead, smallest_shape_set


@dataclass
class Case:
    """Inputs and reference outputs of one (seed, shape set, distribution)."""

    seed: int
    shape_set: int
    distribution: str
    args: list[Any]  # forward() arguments: tensors on the device, or Python scalars
    params: list[torch.Tensor]  # Model.state_dict() tensors, in order
    expected: list[torch.Tensor]
    model: torch.nn.Module
    atol: tuple[float, ...] = ()  # one per output: the task's, adjusted (see optiml.evaluate.tolerance)
    rtol: float = 0.0

    @property
    def abi_inputs(self) -> list[Any]:
        """What the kernel receives: forward args, then parameters and buffers."""
        return [*self.args, *self.params]

    def input_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.abi_inputs if isinstance(t, torch.Tensor))

    def output_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.expected)

    def footprint_bytes(self) -> int:
        """Inputs + outputs + reference outputs: the task's own memory, what the plan is measured by."""
        return self.input_bytes() + 2 * self.output_bytes()


@dataclass
class Inputs:
    """The forward arguments of one (seed, shape set, distribution) alone: no model, no reference. The
    second case of a mixed pair contributes only these (its elements), so it costs no model build."""

    seed: int
    shape_set: int
    distribution: str
    args: list[Any]


class TaskRuntime(TaskRunner):
    """Builds and caches :class:`Case` objects for one task on one device.

    The model, inputs and reference come from :class:`optiml.task_runtime.TaskRunner`; this adds the
    cases, their tolerances, the usable distributions and the memory plan.

    ``timing_sets``: input sets the timing holds at once (for the memory plan).
    """

    def __init__(self, task: Task, device: str = "cuda", timing_sets: int = 2) -> None:
        super().__init__(task, device)
        self.timing_sets = timing_sets
        self.plan: MemoryPlan | None = None
        self.notes: list[str] = []  # tolerance adjustments and distribution choices, in order
        self._cases: OrderedDict[tuple[int, int, str], Case] = OrderedDict()
        self._inputs: OrderedDict[tuple[int, int, str], Inputs] = OrderedDict()  # counted with the cases
        self._tolerances: dict[tuple[int, str], Tolerance] = {}
        self._unusable: set[str] = set()  # default signed distributions the reference is not finite on
        self._perturbations: list[str] = []  # added for low-information outputs (sensitivity.py)
        self._measured: set[int] = set()  # shape sets whose low-information outputs were measured

    def case(self, seed: int, shape_set: int = 0, distribution: str = "native") -> Case:
        """The case of (seed, shape set, distribution); the native one where that distribution is unusable."""
        if distribution in self._unusable:
            distribution = "native"
        key = (seed, shape_set, distribution)
        if key in self._cases:
            self._cases.move_to_end(key)
            return self._cases[key]
        self._make_room()
        case = self._build_case(seed, shape_set, distribution)
        if self._default_signed(distribution) and self.device.type != "meta" and not self._finite_enough(case):
            self._unusable.add(distribution)
            self._note(
                f"{distribution} inputs not used: the reference is not finite on them (NaN/Inf where the native "
                "inputs give none); those trials use the native inputs"
            )
            del case
            return self.case(seed, shape_set, "native")
        self._cases[key] = case
        if self.plan is None and self.device.type == "cuda":
            self.plan = plan_memory(
                device_bytes(self.device), case.input_bytes() + case.output_bytes(), self.timing_sets
            )
        return case

    def inputs(self, seed: int, shape_set: int = 0, distribution: str = "native") -> Inputs:
        """The forward arguments of (seed, shape set, distribution), the case's where it is cached, else drawn
        and cached beside the cases (each counted as one in the memory plan); the native ones where that
        distribution is unusable."""
        if distribution in self._unusable:
            distribution = "native"
        key = (seed, shape_set, distribution)
        if key in self._cases:
            case = self._cases[key]
            return Inputs(seed, shape_set, distribution, case.args)
        if key in self._inputs:
            self._inputs.move_to_end(key)
            return self._inputs[key]
        self._make_room()
        drawn = self._inputs[key] = Inputs(seed, shape_set, distribution, self.make_args(seed, shape_set, distribution))
        return drawn

    def distributions(self) -> list[str]:
        """The task's input distributions that verification uses (usable so far), then the perturbed
        inputs added for low-information outputs."""
        own = [d for d in self.task.meta.distributions if d not in self._unusable] or ["native"]
        return own + self._perturbations

    def settle(self, base_seed: int, shape_set: int = 0) -> list[str]:
        """Build the first case of every distribution (the ones verification starts with), which
        settles which distributions are usable and their tolerances, and measure the low-information
        outputs (adding perturbed inputs where they tell an estimate from the answer); returns :attr:`notes`."""
        for index, distribution in enumerate(self.task.meta.distributions):
            self.case(base_seed + index, shape_set, distribution)
        self.measure_outputs(base_seed, shape_set)
        return list(self.notes)

    def measure_outputs(self, seed: int, shape_set: int = 0) -> list[sensitivity.Finding]:
        """How much each low-information output moves across draws and small perturbations of the native
        inputs of ``seed`` (once per shape set); useful perturbations join :meth:`distributions`."""
        if shape_set in self._measured or self.device.type == "meta":
            return []
        self._measured.add(shape_set)
        case = self.case(seed, shape_set, "native")
        if not sensitivity.low_information(case.args, case.expected):
            return []

        def reference(args: Sequence[Any]) -> list[torch.Tensor]:
            return self.run_reference(case.model, list(args))

        findings = sensitivity.measure(
            case.args,
            case.expected,
            case.atol,
            case.rtol,
            reference,
            lambda: self.make_args(seed + 1, shape_set, "native"),
            seed,
        )
        used = sensitivity.useful(findings)
        self._perturbations += [kind for kind in used if kind not in self._perturbations]
        for finding in findings:
            self._note(finding.note(f"shape set {shape_set}", used))
        return findings

    def memory_report(self) -> dict[str, Any]:
        """Peak device memory since the last reset, against the task's footprint and the plan."""
        sample = next(reversed(self._cases.values()), None)
        return {
            "peak_bytes": peak_bytes(self.device),
            "device_used_bytes": used_bytes(self.device),  # after the evaluation, every process included
            "footprint_bytes": sample.footprint_bytes() if sample is not None else 0,
            "cached_cases": len(self._cases),
            "cached_inputs": len(self._inputs),
            "plan": self.plan.to_dict() if self.plan is not None else None,
        }

    def _make_room(self) -> None:
        """Evict least recently used inputs, then cases, so that one more fits the plan."""
        if self.plan is None:
            return
        while len(self._cases) + len(self._inputs) >= self.plan.max_cases and (self._cases or self._inputs):
            (self._inputs or self._cases).popitem(last=False)

    def _default_signed(self, distribution: str) -> bool:
        return distribution in SIGNED_DISTRIBUTIONS and not self.task.meta.distributions_given

    def _finite_enough(self, case: Case) -> bool:
        """Whether the reference has no more NaN/Inf on this case than on native inputs of the same seed (the
        case's own model run on them: the same parameters, with no second model built or cached)."""
        native = self.run_reference(case.model, self.make_args(case.seed, case.shape_set, "native"))
        return all(_non_finite(a) <= _non_finite(b) for a, b in zip(case.expected, native, strict=True))

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def tolerance(
        self,
        args: Sequence[Any],
        expected: Sequence[torch.Tensor],
        shape_set: int,
        distribution: str,
        model: torch.nn.Module | None = None,
        forward_args: Sequence[Any] = (),
    ) -> Tolerance:
        """The tolerance of every case of (shape set, distribution), decided on the first one built (with its
        ``model`` and ``forward_args``, also on how far its reference is from float64)."""
        key = (shape_set, distribution)
        if self.device.type == "meta":  # shapes only (problem_bytes, meta checks): no values to size by
            return Tolerance(tuple(self.task.meta.atol for _ in expected), self.task.meta.rtol)
        if key not in self._tolerances:
            meta = self.task.meta
            where = f"shape set {shape_set}, {distribution} inputs"
            rounding = self._float64_distances(model, forward_args, expected) if model is not None else []
            decided = decide(args, expected, meta.atol, meta.rtol, distribution, where, rounding=rounding)
            self._tolerances[key] = decided
            for note in decided.notes:
                self._note(note)
        return self._tolerances[key]

    def _float64_distances(
        self, model: torch.nn.Module, args: Sequence[Any], expected: Sequence[torch.Tensor]
    ) -> list[Float64Distance | None]:
        """Per output, how far the reference is from float64; none where not measured (too large, no float64 run):
        the task's tolerance then stands."""
        distances = float64_distances(self, model, args, expected, self.task.meta.atol, self.task.meta.rtol)
        return [] if isinstance(distances, str) else distances

    def _build_case(self, seed: int, shape_set: int, distribution: str) -> Case:
        args = self.make_args(seed, shape_set, distribution)
        model = self.build_model(seed, shape_set)
        expected = self.run_reference(model, args)
        params = [t.detach() for t in model.state_dict().values()]
        tolerance = self.tolerance([*args, *params], expected, shape_set, distribution, model, args)
        return Case(seed, shape_set, distribution, args, params, expected, model, tolerance.atol, tolerance.rtol)


def _non_finite(tensor: torch.Tensor) -> int:
    if not tensor.is_floating_point():
        return 0
    flat = tensor.reshape(-1)
    step = 1 << 26
    return sum(int((~torch.isfinite(flat[lo : lo + step])).sum().item()) for lo in range(0, flat.numel(), step))


def check_task(
    task: Task, device: str = "cpu", shape_set: int | None = None, max_bytes: int | None = None
) -> list[str]:
    """Run the dynamic checks a task must pass; returns notes, raises TaskError on a defect.

    Checks that inputs are reproducible from a seed (same seed → identical inputs, another
    seed → different floating inputs), that forward returns tensors, and that it is
    deterministic on identical inputs. Runs at the smallest shape set unless one is given.

    With ``max_bytes``, a dry run on the meta device (no memory, no compute) first measures the
    shape set's inputs, parameters and outputs; above ``max_bytes`` the full-size run is skipped
    and only what the meta run shows is checked (forward runs and returns tensors: their shapes
    and dtypes), which the first note says.
    """
    runtime = TaskRuntime(task, device)
    if shape_set is None:
        shape_set = smallest_shape_set(runtime)
    if max_bytes is not None:
        dry = _meta_dry_run(task, shape_set)
        if dry is not None and dry[0] > max_bytes:
            size, outputs, reference = dry
            return [
                f"shape set {shape_set}: checked on the meta device only (shapes and dtypes; not reproducibility "
                f"or determinism): its inputs, parameters and outputs take {_gb(size)}, over the "
                f"{_gb(max_bytes)} limit (--max-bytes); the full check holds about three times that",
                *(_output_note(i, t) for i, t in enumerate(outputs)),
                *reference,  # how the reference runs (mode, precision: optiml.task_runtime)
            ]
    first = runtime.make_args(11, shape_set)
    again = runtime.make_args(11, shape_set)
    other = runtime.make_args(12, shape_set)
    for a, b in zip(first, again, strict=True):
        if isinstance(a, torch.Tensor) and not torch.equal(a, b):
            raise TaskError(f"{task.shown}: get_inputs() is not reproducible from a seed (use torch's RNG only)")
    floating = [
        (a, c) for a, c in zip(first, other, strict=True) if isinstance(a, torch.Tensor) and a.is_floating_point()
    ]
    if floating and all(torch.equal(a, c) for a, c in floating):
        raise TaskError(f"{task.shown}: get_inputs() ignores the seed: two seeds gave identical inputs")
    model = runtime.build_model(11, shape_set)
    out1 = runtime.run_reference(model, first)
    out2 = runtime.run_reference(model, again)
    notes = [f"shape set {shape_set}: {len(first)} inputs, {len(out1)} outputs"]
    for i, (a, b) in enumerate(zip(out1, out2, strict=True)):
        if a.shape != b.shape or (a.is_floating_point() and not torch.allclose(a, b, equal_nan=True)):
            raise TaskError(f"{task.shown}: Model.forward is not deterministic (output {i} differs between runs)")
        notes.append(_output_note(i, a))
    conditioning = conditioning_notes(runtime, model, first, out1)
    del first, again, other, floating, out1, out2  # the settling below holds about as much again
    runtime.plan = plan_memory(0, 0, timing_sets=1, max_cases=1)  # one cached case at a time
    runtime.settle(11, shape_set)
    used = ", ".join(runtime.distributions())
    notes.append(f"verification inputs: {used} (tolerance atol={task.meta.atol:g}, rtol={task.meta.rtol:g})")
    return notes + runtime.notes + conditioning


def _output_note(index: int, tensor: torch.Tensor) -> str:
    return f"output {index}: shape {tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"


def _gb(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 10**9 else f"{size / 1e6:.2f} MB"


def _meta_dry_run(task: Task, shape_set: int) -> tuple[int, list[torch.Tensor], list[str]] | None:
    """Bytes of a shape set's inputs, parameters and outputs, its outputs and the runner's notes, from a
    run on the meta device; None when the task cannot run there (an op without a meta kernel, data-dependent
    code)."""
    runtime = TaskRuntime(task, "meta")
    try:
        args = runtime.make_args(11, shape_set)
        model = runtime.build_model(11, shape_set)
        outputs = runtime.run_reference(model, args)
    except TaskError as exc:
        if runs_on_the_cpu_instead(exc):
            return None
        raise
    tensors = [a for a in args if isinstance(a, torch.Tensor)] + list(model.state_dict().values()) + outputs
    return sum(t.numel() * t.element_size() for t in tensors), outputs, list(runtime.notes)
