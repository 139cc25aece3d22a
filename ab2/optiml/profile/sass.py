"""Static SASS analysis from ``cuobjdump -sass``: access widths, local memory, tensor cores, loops.

No GPU is needed, only ``cuobjdump`` and the ``nvdisasm`` it calls. They ship with the CUDA
toolkit and on PyPI (``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm``); they are looked
for on PATH, beside nvcc, under ``$CUDA_HOME/bin`` and inside those pip packages. When they
are missing the report says so and the diagnosis goes on without SASS.

Counts here are *static* (instructions in the binary), not executed instructions; a loop is a
backward branch, and the innermost loops are where a kernel spends its time.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optiml.cuda_tools import find_cuda_tool
from optiml.kernel.ptxas import demangle
from optiml.profile.results import kernel_base_name

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(?P<name>\S+)\s*$")
_INSTRUCTION = re.compile(
    r"^\s*/\*(?P<addr>[0-9a-fA-F]+)\*/\s+(?P<pred>@!?U?P[T0-9]+\s+)?(?P<op>[A-Z][A-Z0-9_.]*)(?P<rest>[^;]*);"
)
_BRANCH_TARGET = re.compile(r"0x([0-9a-fA-F]+)")

#: opcode (without modifiers) → category of the instruction mix
_CATEGORIES: dict[str, tuple[str, ...]] = {
    "global_load": ("LDG",),
    "global_store": ("STG",),
    "generic_memory": ("LD", "ST"),
    "shared_memory": ("LDS", "STS", "LDSM", "STSM"),
    "local_memory": ("LDL", "STL"),
    "atomic": ("ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDUX"),
    "async_copy": ("LDGSTS", "LDGDEPBAR", "UTMALDG", "UTMASTG", "UTMAPF", "UBLKCP", "UBLKRED"),
    "fp32": ("FFMA", "FADD", "FMUL", "FFMA2", "FADD2", "FMUL2", "FMNMX", "FSETP", "FSEL", "FCHK"),
    "fp16": ("HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSETP2"),
    "fp64": ("DFMA", "DADD", "DMUL", "DSETP", "DMNMX"),
    "special_function": ("MUFU",),
    "conversion": ("F2F", "F2I", "I2F", "I2FP", "F2FP", "FRND"),
    "shuffle": ("SHFL", "VOTE", "MATCH"),
    "barrier": ("BAR", "MEMBAR", "SYNCS", "DEPBAR", "WARPSYNC", "BSYNC", "BSSY", "ERRBAR", "CCTL"),
    "control": ("BRA", "BRX", "JMP", "CALL", "RET", "EXIT", "BREAK"),
}
_CATEGORY_OF = {op: category for category, ops in _CATEGORIES.items() for op in ops}
_WIDTH_MODIFIERS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}
_IGNORED = {"NOP"}


@dataclass(frozen=True)
class SassInstruction:
    address: int
    opcode: str  # with modifiers, e.g. "LDG.E.128"
    predicate: str = ""
    operands: str = ""

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def category(self) -> str:
        """Instruction-mix category; any ``*MMA`` opcode (HMMA, HGMMA, IMMA, DMMA, …) is tensor-core work."""
        if "MMA" in self.base:
            return "tensor"
        return _CATEGORY_OF.get(self.base, "integer_or_other")

    @property
    def width_bits(self) -> int:
        """Access width of a memory instruction (32 when no size modifier is given)."""
        for modifier in self.opcode.split(".")[1:]:
            if modifier in _WIDTH_MODIFIERS:
                return _WIDTH_MODIFIERS[modifier]
        return 32

    @property
    def branch_target(self) -> int | None:
        if self.base not in {"BRA", "JMP"}:
            return None
        match = _BRANCH_TARGET.search(self.operands)
        return int(match.group(1), 16) if match else None


@dataclass(frozen=True)
class SassLoop:
    """Instructions between a backward branch's target and the branch."""

    start: int
    end: int
    mix: dict[str, int]

    @property
    def size(self) -> int:
        return sum(self.mix.values())


@dataclass(frozen=True)
class SassKernel:
    mangled: str
    name: str
    instructions: tuple[SassInstruction, ...]

    @property
    def mix(self) -> dict[str, int]:
        return dict(Counter(i.category for i in self.instructions))

    def widths(self, category: str) -> dict[int, int]:
        """Access width in bits → static count, for ``global_load``, ``global_store``, …"""
        return dict(Counter(i.width_bits for i in self.instructions if i.category == category))

    @property
    def tensor_opcodes(self) -> tuple[str, ...]:
        return tuple(sorted({i.base for i in self.instructions if i.category == "tensor"}))

    @property
    def local_memory_ops(self) -> int:
        return sum(1 for i in self.instructions if i.category == "local_memory")

    @property
    def loops(self) -> tuple[SassLoop, ...]:
        found = []
        for instruction in self.instructions:
            target = instruction.branch_target
            # a branch to itself is the trap after EXIT, not a loop
            if target is None or target >= instruction.address:
                continue
            body = [i for i in self.instructions if target <= i.address <= instruction.address]
            found.append(SassLoop(target, instruction.address, dict(Counter(i.category for i in body))))
        return tuple(found)

    @property
    def inner_loops(self) -> tuple[SassLoop, ...]:
        """Loops that contain no other loop, largest body first (unrolled main loops before remainders)."""
        loops = self.loops
        inner = [
            loop
            for loop in loops
            if not any(o is not loop and loop.start <= o.start and o.end <= loop.end for o in loops)
        ]
        return tuple(sorted(inner, key=lambda loop: -loop.size))

    def summary(self) -> dict[str, Any]:
        inner = self.inner_loops
        return {
            "name": self.name,
            "instructions": len(self.instructions),
            "mix": self.mix,
            "global_load_widths": self.widths("global_load"),
            "global_store_widths": self.widths("global_store"),
            "local_memory_ops": self.local_memory_ops,
            "tensor_opcodes": list(self.tensor_opcodes),
            "loops": len(self.loops),
            "inner_loop_mix": inner[0].mix if inner else {},
        }


@dataclass(frozen=True)
class SassReport:
    kernels: tuple[SassKernel, ...] = ()
    error: str | None = None  # why there is no SASS (tool missing, failed)

    def find(self, base_name: str) -> SassKernel | None:
        for kernel in self.kernels:
            if kernel_base_name(kernel.name) == base_name:
                return kernel
        return None


def parse_sass(text: str, demangle_names: bool = True) -> list[SassKernel]:
    """Kernels in ``cuobjdump -sass`` output, with their instructions (padding NOPs dropped)."""
    blocks: list[tuple[str, list[SassInstruction]]] = []
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            blocks.append((m["name"], []))
            continue
        if not blocks:
            continue
        if m := _INSTRUCTION.match(line):
            opcode = m["op"]
            if opcode.split(".", 1)[0] in _IGNORED:
                continue
            blocks[-1][1].append(
                SassInstruction(
                    address=int(m["addr"], 16),
                    opcode=opcode,
                    predicate=(m["pred"] or "").strip(),
                    operands=m["rest"].strip(),
                )
            )
    names = demangle([name for name, _ in blocks]) if demangle_names else {}
    return [SassKernel(mangled=n, name=names.get(n, n), instructions=tuple(ins)) for n, ins in blocks]


def find_cuobjdump(nvcc: str | None = None) -> str | None:
    return find_cuda_tool("cuobjdump", nvcc)


def find_nvdisasm(nvcc: str | None = None) -> str | None:
    return find_cuda_tool("nvdisasm", nvcc)


def disassemble(so_path: str, nvcc: str | None = None, timeout_s: float = 60.0) -> SassReport:
    """SASS of every kernel in a shared object; a report with ``error`` set if it cannot be had."""
    tool = find_cuobjdump(nvcc)
    if tool is None:
        return SassReport(
            error="cuobjdump not found (install the CUDA toolkit or `pip install nvidia-cuda-cuobjdump "
            "nvidia-cuda-nvdisasm`)"
        )
    env = dict(os.environ)
    disasm = find_nvdisasm(nvcc)
    if disasm is not None:  # cuobjdump -sass runs nvdisasm, found via PATH or NVDISASM_PATH
        folder = str(Path(disasm).parent)
        env["NVDISASM_PATH"] = folder
        env["PATH"] = folder + os.pathsep + env.get("PATH", "")
    try:
        proc = subprocess.run([tool, "-sass", so_path], capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return SassReport(error=f"cuobjdump timed out after {timeout_s:.0f} s")
    except OSError as exc:
        return SassReport(error=f"cuobjdump could not run: {exc}")
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return SassReport(error=f"cuobjdump failed: {lines[-1] if lines else f'exit code {proc.returncode}'}")
    kernels = parse_sass(proc.stdout)
    if not kernels:
        return SassReport(error="cuobjdump found no SASS in the shared object")
    return SassReport(kernels=tuple(kernels))
