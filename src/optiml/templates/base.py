"""What every kernel template shares: typed configurations, parameter spaces, rendered code.

A template turns one planned kernel (a :class:`~optiml.templates.plan.Group` of graph nodes)
plus a :class:`GroupConfig` — a *variant* (the structural choice: warp-per-row, block-per-row,
split-row, …) and *knobs* (threads, vector width, elements per thread, …) — into CUDA C++:
device code and the host statements that launch it. The same (plan, configs) always renders
the same source, so a configuration is the replayable identity of a template kernel
(tinygrad's actions, Kernel Tuner's ``tune_params``). Sizes are never baked in: host code reads
them from the ABI tensors at run time through C expressions the planner derived
(:class:`RenderContext`), so one kernel serves every shape set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from optiml.errors import TemplateError  # defined low so the op graph raises it too (optiml.graph.sizes)

if TYPE_CHECKING:
    from optiml.templates.group import Group


@dataclass(frozen=True)
class GroupConfig:
    """A template's structural choice and knob values for one planned kernel."""

    variant: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, variant: str, **params: Any) -> GroupConfig:
        return cls(variant=variant, params=tuple(sorted(params.items())))

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.params:
            if key == name:
                return value
        return default

    def with_params(self, **changes: Any) -> GroupConfig:
        merged = dict(self.params)
        merged.update(changes)
        return GroupConfig.of(self.variant, **merged)

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupConfig:
        return cls.of(str(data["variant"]), **dict(data.get("params", {})))

    def label(self) -> str:
        knobs = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.variant}({knobs})"


@dataclass(frozen=True)
class Space:
    """The legal configurations of one template for one planned kernel.

    ``knobs[variant]`` maps each knob to its allowed values; ``check`` (optional) rejects
    combinations the template cannot render before nvcc runs (returns a reason, or None).
    """

    knobs: Mapping[str, Mapping[str, tuple[Any, ...]]]
    check: Callable[[GroupConfig], str | None] | None = None
    #: per variant, knobs a configuration may leave out and the value they then take: knobs added after
    #: configurations were recorded, so a recorded configuration keeps its label and renders the same kernel
    implied: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def variants(self) -> tuple[str, ...]:
        return tuple(self.knobs)

    def value(self, config: GroupConfig, knob: str) -> Any:
        """The knob's value in ``config``, the implied one where ``config`` leaves it out."""
        return config.get(knob, self.implied.get(config.variant, {}).get(knob))

    def normalized(self, config: GroupConfig) -> GroupConfig:
        """``config`` without the knobs set to their implied values (one label for one kernel)."""
        implied = self.implied.get(config.variant, {})
        kept = tuple((k, v) for k, v in config.params if k not in implied or implied[k] != v)
        return GroupConfig(config.variant, kept)

    def reason_invalid(self, config: GroupConfig) -> str | None:
        if config.variant not in self.knobs:
            return f"unknown variant {config.variant!r} (have {', '.join(self.knobs)})"
        allowed = self.knobs[config.variant]
        for key, value in config.params:
            if key not in allowed:
                return f"{config.variant} has no knob {key!r}"
            if value not in allowed[key]:
                return f"{config.variant}: {key}={value!r} not in {list(allowed[key])}"
        missing = set(allowed) - {k for k, _ in config.params} - set(self.implied.get(config.variant, {}))
        if missing:
            return f"{config.variant}: knobs {sorted(missing)} not set"
        return self.check(config) if self.check is not None else None


@dataclass(frozen=True)
class DeviceFacts:
    """What templates size themselves by. Defaults are an H200's (used when no GPU is visible)."""

    sm_count: int = 132
    max_threads_per_sm: int = 2048
    smem_per_block_optin: int = 227 * 1024
    smem_per_sm: int = 228 * 1024
    l2_bytes: int = 60 * 1024 * 1024
    arch: str = "sm_90a"
    #: the task chose PyTorch's default precision (``OPTIML["precision"] = "tf32"``, float32): convolutions
    #: multiply operands rounded to TF32 (to nearest, as cuDNN does there; depthwise ones, exact in cuDNN, stay
    #: exact) and accumulate in fp32, so they match that reference to summation order
    tf32_convolutions: bool = False
    #: each convolution's arithmetic at PyTorch's defaults as the judge measured it, by call signature
    #: (:mod:`optiml.conv_arithmetic`): ``(signature, "tf32" | "exact")`` pairs; unmeasured ones follow a rule
    convolution_arithmetic: tuple[tuple[str, str], ...] = ()

    def measured_arithmetic(self, signature: str) -> str | None:
        """The measured arithmetic of the convolution call ``signature``; None where it was not measured."""
        return dict(self.convolution_arithmetic).get(signature) if signature else None

    def resident_blocks(self, threads: int) -> int:
        """Blocks of ``threads`` the whole GPU holds at once by its thread limit (one round of a grid)."""
        return self.sm_count * max(1, self.max_threads_per_sm // threads)


@dataclass(frozen=True)
class KernelCode:
    """What a template renders: device code, host launch statements, scratch it needs.

    ``host`` runs inside ``optiml_forward`` with ``stream`` in scope; it returns a nonzero
    code on failure (``return OPTIML_ERR;``) and otherwise falls through. ``workspace_bytes``
    is a C expression (over the ABI ``inputs``) of the scratch bytes the host code uses at
    ``ctx.workspace``; "0" when none.
    """

    device: str
    host: str
    workspace_bytes: str = "0"
    includes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operand:
    """A tensor a kernel reads or writes, as C code: typed device pointer and element type."""

    ptr: str
    ctype: str


@dataclass
class RenderContext:
    """What a template may ask about the kernel it renders, all answered as C expressions.

    ``inp(k)`` / ``out(k)``: typed pointers of the group's k-th tensor input / output (contiguous).
    ``dim(vid, d)``: run-time size of dim ``d`` of graph value ``vid`` (an int64_t expression).
    ``workspace``: a ``char*`` expression of this group's scratch region.
    ``prefix``: prepend it to every symbol the template defines (several kernels share one file).
    ``load(k, idx)`` / ``store(k, idx, v)``: read input k / write output k at a linear index; they
    may apply fused element-wise prologues and epilogues, so prefer them to raw pointers.
    """

    prefix: str
    inputs: list[Operand]
    outputs: list[Operand]
    dims: Callable[[int, int], str]
    compute_type: str = "float"  # accumulate in this type ("double" for float64 tasks)
    workspace: str = "((char*)workspace)"
    facts: DeviceFacts = field(default_factory=DeviceFacts)
    loaders: list[Callable[[str], str]] | None = None
    storers: list[Callable[[str, str], str]] | None = None

    def inp(self, k: int) -> Operand:
        return self.inputs[k]

    def out(self, k: int) -> Operand:
        return self.outputs[k]

    def dim(self, vid: int, d: int) -> str:
        return self.dims(vid, d)

    def load(self, k: int, idx: str) -> str:
        if self.loaders is not None:
            return self.loaders[k](idx)
        return f"(({self.compute_type}){self.inputs[k].ptr}[{idx}])"

    def store(self, k: int, idx: str, value: str) -> str:
        if self.storers is not None:
            return self.storers[k](idx, value)
        out = self.outputs[k]
        return f"{out.ptr}[{idx}] = ({out.ctype})({value});"


class Template(Protocol):
    """One family of kernels (reduce, pointwise, scan, pool, permute)."""

    name: str

    def space(self, group: Group, facts: DeviceFacts) -> Space: ...

    def default(self, group: Group, facts: DeviceFacts) -> GroupConfig:
        """The planner's rule-based first choice (documented in the template)."""
        ...

    def seeds(self, group: Group, facts: DeviceFacts) -> list[GroupConfig]:
        """A few diverse configurations for generation (the default first)."""
        ...

    def render(self, group: Group, config: GroupConfig, ctx: RenderContext) -> KernelCode: ...


def configs_to_json(configs: list[GroupConfig]) -> str:
    return json.dumps([c.to_dict() for c in configs], sort_keys=True, separators=(",", ":"))


def configs_from_json(text: str) -> list[GroupConfig]:
    return [GroupConfig.from_dict(d) for d in json.loads(text)]


C_TYPES = {
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "float64": "double",
    "int64": "int64_t",
    "int32": "int32_t",
    "int16": "int16_t",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "bool": "bool",
}


def ceil_pow2(n: int) -> int:
    """The least power of two that is at least ``n`` (1 for ``n <= 1``)."""
    p = 1
    while p < n:
        p *= 2
    return p


def c_type(dtype: str) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError as exc:
        raise TemplateError(f"no C type for dtype {dtype}") from exc


def compute_type(dtype: str) -> str:
    """Arithmetic type for a storage dtype: half types compute in float, float64 in double."""
    return "double" if dtype == "float64" else "float"


def arithmetic_type(dtype: str) -> str:
    """What a dedicated template computes in: its main input's arithmetic type (an integer cumsum or
    permute stays integral; half types compute in float)."""
    if dtype.startswith("float") or dtype == "bfloat16":
        return compute_type(dtype)
    return "int64_t"


def to_compute(expr: str, dtype: str) -> str:
    """C expression converting a loaded element of ``dtype`` to arithmetic (half types → float)."""
    if dtype == "float16":
        return f"__half2float({expr})"
    if dtype == "bfloat16":
        return f"__bfloat162float({expr})"
    if dtype in ("float32", "float64"):
        return f"(({compute_type(dtype)}){expr})"
    return f"({expr})"


def from_compute(expr: str, dtype: str) -> str:
    """C expression converting a compute value to storage ``dtype``."""
    if dtype == "float16":
        return f"__float2half_rn({expr})"
    if dtype == "bfloat16":
        return f"__float2bfloat16_rn({expr})"
    return f"(({c_type(dtype)})({expr}))"
