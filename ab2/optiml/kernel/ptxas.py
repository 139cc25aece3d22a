"""Parse nvcc output: ``ptxas -v`` resource reports and compiler diagnostics."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache

from optiml.values import CompileDiagnostic, KernelResources

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (?P<name>\S+)")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
_USED = re.compile(r"ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_LMEM = re.compile(r"(\d+) bytes lmem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")

# nvcc front end:  kernel.cu(12): error: identifier "foo" is undefined
_NVCC_DIAG = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|remark)[^:]*: (?P<msg>.*)$")
# host compiler:   kernel.cu:12:5: error: expected ';'
_GCC_DIAG = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?:fatal )?(?P<sev>error|warning|note): (?P<msg>.*)$"
)
# assembler (inline asm in host code):  /tmp/ccX.s:4: Error: file not found: /etc/hostname
_GAS_ERR = re.compile(r"^\S+\.s:\d+: Error: (?P<msg>.*)$")
_PTXAS_ERR = re.compile(r"^ptxas (?:fatal|error)\s*:\s*(?P<msg>.*)$")
_LINK_ERR = re.compile(r"(undefined reference to .*|cannot find -l\S+)")


def parse_resources(log: str) -> list[KernelResources]:
    """Per-kernel resources from a ``-Xptxas -v`` log, names demangled where c++filt exists."""
    found: dict[str, dict[str, int | str]] = {}
    order: list[str] = []
    current: str | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m["name"]
            if current not in found:
                order.append(current)
                found[current] = {"arch": m["arch"]}
            continue
        if m := _PROPERTIES.search(line):
            current = m["name"]
            if current not in found:
                order.append(current)
                found[current] = {"arch": ""}
            continue
        if current is None:
            continue
        entry = found[current]
        if m := _FRAME.search(line):
            entry.update(stack_bytes=int(m["stack"]), spill_stores=int(m["stores"]), spill_loads=int(m["loads"]))
        elif m := _USED.search(line):
            rest = m["rest"]
            entry["registers"] = int(m["regs"])
            if b := _BARRIERS.search(rest):
                entry["barriers"] = int(b.group(1))
            if s := _SMEM.search(rest):
                entry["shared_bytes"] = int(s.group(1))
            if lm := _LMEM.search(rest):
                entry["local_bytes"] = int(lm.group(1))
            entry["constant_bytes"] = sum(int(c) for c in _CMEM.findall(rest))
    names = demangle(order)
    results = []
    for mangled in order:
        entry = found[mangled]
        if "registers" not in entry:  # device functions have properties but no "Used" line
            continue
        arch = str(entry.pop("arch"))
        numbers = {k: int(v) for k, v in entry.items()}
        results.append(KernelResources(name=names.get(mangled, mangled), arch=arch, **numbers))
    return results


def parse_diagnostics(log: str, source_name: str = "kernel.cu") -> list[CompileDiagnostic]:
    """Errors and warnings with their line in the candidate (messages kept verbatim)."""
    diagnostics: list[CompileDiagnostic] = []
    seen: set[tuple[str, int | None, str]] = set()
    for raw in log.splitlines():
        line = raw.strip()
        diag: CompileDiagnostic | None = None
        if m := _NVCC_DIAG.match(line):
            severity = "warning" if m["sev"] == "remark" else m["sev"]
            where = int(m["line"]) if m["file"].endswith(source_name) else None
            message = m["msg"] if where is not None else f"{m['file']}({m['line']}): {m['msg']}"
            diag = CompileDiagnostic(severity=severity, message=message, line=where)
        elif m := _GCC_DIAG.match(line):
            where = int(m["line"]) if m["file"].endswith(source_name) else None
            col = int(m["col"]) if m["col"] and where is not None else None
            diag = CompileDiagnostic(severity=m["sev"], message=m["msg"], line=where, column=col)
        elif m := _GAS_ERR.match(line):
            diag = CompileDiagnostic(severity="error", message=f"assembler: {m['msg']}")
        elif m := _PTXAS_ERR.match(line):
            diag = CompileDiagnostic(severity="error", message=f"ptxas: {m['msg']}")
        elif m := _LINK_ERR.search(line):
            diag = CompileDiagnostic(severity="error", message=f"link: {m.group(1)}")
        if diag is not None:
            key = (diag.severity, diag.line, diag.message)
            if key not in seen:
                seen.add(key)
                diagnostics.append(diag)
    return diagnostics


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled → readable names via ``c++filt`` (identity when it is missing)."""
    if not names:
        return {}
    return dict(zip(names, _demangle_tuple(tuple(names)), strict=True))


@lru_cache(maxsize=256)
def _demangle_tuple(names: tuple[str, ...]) -> tuple[str, ...]:
    tool = shutil.which("c++filt")
    if tool is None:
        return names
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return names
    lines = out.stdout.splitlines()
    return tuple(lines) if len(lines) == len(names) else names
