"""Static facts about a compiled candidate: ``ptxas -v`` resources and SASS, per kernel. No GPU needed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from optiml.profile.occupancy import SmLimits, limits_for, register_limited_warps
from optiml.profile.results import kernel_base_name
from optiml.profile.sass import SassKernel, SassReport
from optiml.values import CompileResult, KernelResources


@dataclass(frozen=True)
class StaticKernel:
    """One ``__global__`` function: its ptxas resources and its SASS, where known."""

    name: str
    resources: KernelResources | None
    sass: SassKernel | None

    @property
    def base_name(self) -> str:
        return kernel_base_name(self.name)

    @property
    def spill_bytes(self) -> int:
        if self.resources is None:
            return 0
        return self.resources.spill_stores + self.resources.spill_loads

    def request_widths(self, category: str) -> set[int]:
        """The access widths (bits) of the instructions whose requests Nsight Compute counts as ``category``
        (``global_load`` / ``global_store``): for loads, ``cp.async`` copies (LDGSTS) too, whose sectors and
        requests land in the global-load counters (a channels-last conv's 11.3 sectors a request on the H100,
        2026-12-07, is its LDGSTS.128 copies and 16-bit bias loads mixed: 11.4 by their counts)."""
        if self.sass is None:
            return set()
        widths = set(self.sass.widths(category))
        if category == "global_load":
            widths |= {i.width_bits for i in self.sass.instructions if i.base == "LDGSTS"}
        return widths

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "resources": asdict(self.resources) if self.resources else None,
            "sass": self.sass.summary() if self.sass else None,
        }


@dataclass(frozen=True)
class StaticAnalysis:
    arch: str
    kernels: tuple[StaticKernel, ...]
    sass_error: str | None = None  # why SASS is missing, if it is

    @property
    def limits(self) -> SmLimits | None:
        return limits_for(self.arch)

    def find(self, name: str) -> StaticKernel | None:
        """The kernel whose base name matches ``name`` (an ncu, ptxas or SASS spelling)."""
        base = kernel_base_name(name)
        return next((k for k in self.kernels if k.base_name == base), None)

    def register_limited_warps(self, kernel: StaticKernel) -> int | None:
        if self.limits is None or kernel.resources is None:
            return None
        return register_limited_warps(self.limits, kernel.resources.registers)

    def to_dict(self) -> dict[str, Any]:
        return {"arch": self.arch, "kernels": [k.to_dict() for k in self.kernels], "sass_error": self.sass_error}


def analyse(compiled: CompileResult, sass: SassReport) -> StaticAnalysis:
    """Pair each kernel's ptxas resources with its SASS (matched by base name)."""
    kernels: list[StaticKernel] = []
    seen: set[str] = set()
    for resources in compiled.resources:
        base = kernel_base_name(resources.name)
        seen.add(base)
        kernels.append(StaticKernel(name=resources.name, resources=resources, sass=sass.find(base)))
    for sass_kernel in sass.kernels:
        if kernel_base_name(sass_kernel.name) not in seen:
            kernels.append(StaticKernel(name=sass_kernel.name, resources=None, sass=sass_kernel))
    return StaticAnalysis(arch=compiled.arch, kernels=tuple(kernels), sass_error=sass.error)
