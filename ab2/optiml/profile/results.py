"""What profiling one candidate (or the reference) produced: its kernels, their metrics, errors.

A candidate may launch several kernels; each becomes a :class:`KernelProfile`, in launch
order, and :class:`Profile` adds them up. A profile that could not be taken (no ncu, no
counter permission, a crash, a timeout) is a :class:`Profile` with ``errors`` and no kernels,
never an exception. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from optiml.profile.metrics import KernelMetrics


@dataclass(frozen=True)
class KernelProfile:
    """One kernel launch of a candidate, with its counters."""

    name: str
    launch_id: int  # ncu's launch ID within the profiling run
    block: tuple[int, ...]
    grid: tuple[int, ...]
    metrics: KernelMetrics

    @property
    def short_name(self) -> str:
        """The function name without ``void``, namespaces, template arguments or parameters."""
        return kernel_base_name(self.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "launch_id": self.launch_id,
            "block": list(self.block),
            "grid": list(self.grid),
            "metrics": self.metrics.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelProfile:
        return cls(
            name=data["name"],
            launch_id=int(data["launch_id"]),
            block=tuple(data.get("block", ())),
            grid=tuple(data.get("grid", ())),
            metrics=KernelMetrics.from_dict(data.get("metrics", {})),
        )


@dataclass(frozen=True)
class ProfileTotals:
    """Sums over a candidate's kernels (``None`` when no kernel reported the figure)."""

    kernels: int
    duration_ms: float | None
    dram_bytes: float | None
    flops: float | None


@dataclass(frozen=True)
class Profile:
    """The profile of one candidate (``label`` says which) from one ncu run."""

    label: str  # "candidate 0", …, or "reference"
    kernel_digest: str = ""  # KernelSource.digest; empty for the reference
    kernels: tuple[KernelProfile, ...] = ()
    errors: tuple[str, ...] = ()
    seconds: float = 0.0  # this profile's share of the ncu run's wall time
    notes: tuple[str, ...] = field(default=())  # non-fatal remarks (e.g. ncu warnings)

    @property
    def ok(self) -> bool:
        return not self.errors and bool(self.kernels)

    @property
    def totals(self) -> ProfileTotals:
        def total(values: list[float | None]) -> float | None:
            present = [v for v in values if v is not None]
            return sum(present) if present else None

        return ProfileTotals(
            kernels=len(self.kernels),
            duration_ms=total([k.metrics.duration_ms for k in self.kernels]),
            dram_bytes=total([k.metrics.dram_bytes for k in self.kernels]),
            flops=total([k.metrics.flops for k in self.kernels]),
        )

    def time_share(self, kernel: KernelProfile) -> float:
        """Fraction of the candidate's GPU time spent in ``kernel`` (equal shares if times are unknown)."""
        total = self.totals.duration_ms
        if not total or kernel.metrics.duration_ms is None:
            return 1.0 / max(1, len(self.kernels))
        return kernel.metrics.duration_ms / total

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "kernel_digest": self.kernel_digest,
            "kernels": [k.to_dict() for k in self.kernels],
            "errors": list(self.errors),
            "seconds": self.seconds,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        return cls(
            label=data["label"],
            kernel_digest=data.get("kernel_digest", ""),
            kernels=tuple(KernelProfile.from_dict(k) for k in data.get("kernels", ())),
            errors=tuple(data.get("errors", ())),
            seconds=float(data.get("seconds", 0.0)),
            notes=tuple(data.get("notes", ())),
        )


def kernel_base_name(name: str) -> str:
    """``"void ns::foo<128>(const float *, int)"`` → ``"foo"``; matches ncu, ptxas and SASS names.

    Mangled names (``_ZN2ns3fooILi128EEvPKfi``, when c++filt is missing) give the same answer.
    """
    if name.startswith("_Z"):
        return _mangled_base_name(name)
    text = name.strip()
    for anonymous in ("(anonymous namespace)", "<unnamed>", "unnamed>"):  # ncu prints the last form
        text = text.replace(anonymous, "anonymous")
    if text.startswith("void "):
        text = text[5:]
    depth, cut = 0, len(text)
    for index, char in enumerate(text):  # the parameter list is the first "(" outside template brackets
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == "(" and depth == 0:
            cut = index
            break
    head = text[:cut]
    depth, plain = 0, []
    for char in head:  # drop template arguments
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            plain.append(char)
    return "".join(plain).rsplit("::", 1)[-1].strip()


def _mangled_base_name(name: str) -> str:
    """The innermost identifier of an Itanium-mangled function name (``_Z``, optional ``N…E``)."""
    position = 2
    nested = name[position : position + 1] == "N"
    position += int(nested)
    last = name
    while position < len(name) and name[position].isdigit():
        digits = position
        while position < len(name) and name[position].isdigit():
            position += 1
        length = int(name[digits:position])
        last = name[position : position + length]
        position += length
        if not nested:
            break
    return last
