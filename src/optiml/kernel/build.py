"""What a compile produced: diagnostics, per-kernel resources, the shared object. Stdlib only."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class CompileDiagnostic:
    """One compiler message, located in the candidate's source where nvcc says so."""

    severity: str  # "error" | "warning" | "note"
    message: str
    line: int | None = None
    column: int | None = None

    def render(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{self.severity}: {where}{self.message}"


@dataclass(frozen=True)
class KernelResources:
    """``ptxas -v`` figures for one ``__global__`` function."""

    name: str
    arch: str
    registers: int = 0
    shared_bytes: int = 0  # static shared memory (smem)
    constant_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    local_bytes: int = 0  # lmem
    barriers: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


@dataclass(frozen=True)
class CompileResult:
    """Outcome of building one candidate with ``nvcc --shared``."""

    ok: bool
    so_path: str | None
    digest: str
    arch: str
    seconds: float
    cached: bool
    diagnostics: tuple[CompileDiagnostic, ...] = ()
    resources: tuple[KernelResources, ...] = ()
    command: tuple[str, ...] = ()
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: what the build does (device + host code, see optiml.kernel.identity); "" when unknown
    binary_digest: str = ""
    sandbox: str = ""  # the isolation nvcc ran under ("unshare+jail", "bwrap", "none"); "" for old entries

    @property
    def errors(self) -> list[CompileDiagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def error_summary(self, limit: int = 10) -> str:
        """Compiler errors as lines, for a user or an LLM (never swallowed)."""
        errors = self.errors or list(self.diagnostics)
        lines = [d.render() for d in errors[:limit]]
        if not lines and self.log:
            lines = self.log.strip().splitlines()[-limit:]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileResult:
        data = dict(data)
        data["diagnostics"] = tuple(CompileDiagnostic(**d) for d in data.get("diagnostics", ()))
        data["resources"] = tuple(KernelResources(**r) for r in data.get("resources", ()))
        data["command"] = tuple(data.get("command", ()))
        return cls(**data)
