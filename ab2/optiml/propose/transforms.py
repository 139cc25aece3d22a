"""Safe source transformations: rewrites that keep a kernel's meaning and may make it faster.

Each finder returns :class:`Rewrite` values, one per kernel (or launch) it applies to:

- ``restrict``: ``__restrict__`` on a kernel's pointer parameters, when every launch in the file
  passes distinct buffers (no in-place call), so the compiler may reorder and cache loads.
- ``const``: ``const`` on pointer parameters the kernel only ever reads through ``p[i]``, which
  lets the loads use the read-only data path.
- ``launch_bounds``: ``__launch_bounds__(B)`` where every launch of the kernel uses the same
  compile-time block size ``B`` (the knob's *name* is used, so retuning the knob keeps it right),
  and a variant with a minimum of resident blocks that caps registers for occupancy.
- ``unroll``: ``#pragma unroll`` on loops whose trip count is a compile-time constant, and
  ``#pragma unroll 4`` on innermost loops with a run-time trip count.
- ``launch``: retune a literal block size (``<<<(n + 255) / 256, 256>>>``) by rewriting that
  literal and its ``- 1`` companion in the launching function, when device code does not use it.

Anything the scanner in :mod:`optiml.propose.syntax` does not recognise is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from optiml.propose.knobs import check_limits, find_knobs, integer_constants
from optiml.propose.syntax import (
    DeviceFunction,
    Launch,
    const_eval,
    device_functions,
    enclosing_block,
    launches,
    mask,
    matching,
    parse_int,
    split_top_level,
)

_POINTER_PARAM = re.compile(
    r"^(?P<head>[^*&\[\]]*?\*)\s*(?P<restrict>__restrict__\s*)?(?P<name>[A-Za-z_]\w*)$", re.DOTALL
)
_WRITE_AFTER = re.compile(r"\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--|\.|->|\[)")
_FOR = re.compile(r"\bfor\s*\(")
_PRAGMA_UNROLL = re.compile(r"^\s*#\s*pragma\s+unroll\b")
_INIT = re.compile(r"^(?:[\w:]+\s+)*(?P<var>[A-Za-z_]\w*)\s*=\s*(?P<value>.+)$", re.DOTALL)
_CONDITION = re.compile(r"^(?P<var>[A-Za-z_]\w*)\s*(?:<=?|>=?|!=)\s*(?P<bound>.+)$", re.DOTALL)
RUNTIME_UNROLL = 4


@dataclass(frozen=True)
class Rewrite:
    """A transformation that applies to a kernel: the new source and why it may help."""

    key: str  # stable identity, e.g. "restrict:silu_kernel"
    category: str
    rationale: str
    code: str
    signals: frozenset[str]  # bottleneck kinds it addresses: memory, occupancy, compute, latency


def source_rewrites(code: str) -> list[Rewrite]:
    """Every applicable rewrite of ``code`` that still fits the hardware limits, in a stable order."""
    finders: tuple[Callable[[str], list[Rewrite]], ...] = (
        add_restrict,
        add_const,
        add_launch_bounds,
        unroll_fixed_loops,
        unroll_runtime_loops,
        retune_literal_launches,
    )
    rewrites = [rewrite for finder in finders for rewrite in finder(code)]
    return [r for r in rewrites if r.code != code and check_limits(r.code) is None]


@dataclass(frozen=True)
class _Param:
    name: str
    span: tuple[int, int]  # in the source
    head: str  # everything up to and including the '*'
    restrict: bool

    @property
    def const(self) -> bool:
        return bool(re.search(r"\bconst\b", self.head))


def _pointer_params(code: str, function: DeviceFunction) -> list[_Param]:
    params = []
    start, end = function.params
    for a, b in split_top_level(code[start:end], start):
        text = code[a:b]
        lead = len(text) - len(text.lstrip())
        match = _POINTER_PARAM.match(text.strip())
        if match:
            head = match.group("head")
            params.append(
                _Param(
                    match.group("name"), (a + lead, a + lead + len(text.strip())), head, bool(match.group("restrict"))
                )
            )
    return params


def _kernels(code: str, masked: str) -> list[DeviceFunction]:
    """``__global__`` definitions declared exactly once (a separate prototype would stop matching)."""
    functions = device_functions(code, masked)
    names = [f.name for f in functions]
    return [f for f in functions if f.qualifier == "__global__" and f.body is not None and names.count(f.name) == 1]


def _splice(code: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        code = code[:start] + text + code[end:]
    return code


def add_restrict(code: str) -> list[Rewrite]:
    masked = mask(code)
    found = []
    for kernel in _kernels(code, masked):
        params = _pointer_params(code, kernel)
        missing = [p for p in params if not p.restrict]
        calls = [launch for launch in launches(code, masked) if launch.kernel == kernel.name]
        if not missing or not calls or not all(_distinct_pointer_args(code, kernel, call) for call in calls):
            continue
        edits = [(p.span[0] + len(p.head), p.span[0] + len(p.head), " __restrict__") for p in missing]
        names = ", ".join(p.name for p in missing)
        found.append(
            Rewrite(
                key=f"restrict:{kernel.name}",
                category="qualifiers",
                rationale=f"Mark pointer parameters {names} of {kernel.name} __restrict__: every launch passes "
                "distinct buffers, and without aliasing the compiler may keep values in registers, reorder "
                "loads and stores, and use the read-only cache for inputs.",
                code=_splice(code, edits),
                signals=frozenset({"memory"}),
            )
        )
    return found


def _distinct_pointer_args(code: str, kernel: DeviceFunction, call: Launch) -> bool:
    start, end = kernel.params
    pointer_positions = [i for i, (a, b) in enumerate(split_top_level(code[start:end], start)) if "*" in code[a:b]]
    if len(call.args) <= max(pointer_positions, default=-1):
        return False
    texts = [_buffer_of(call.args[i]) for i in pointer_positions]
    return len(set(texts)) == len(texts)


def _buffer_of(arg: str) -> str:
    """An argument's buffer expression without casts or spaces, for telling buffers apart."""
    text = re.sub(r"\s+", "", arg)
    text = re.sub(r"^(?:\((?:const)?[\w:]+(?:const)?\*+\))+", "", text)
    text = re.sub(r"^(?:reinterpret_cast|static_cast|const_cast)<[^<>]*>\((.*)\)$", r"\1", text)
    return text


def add_const(code: str) -> list[Rewrite]:
    masked = mask(code)
    found = []
    for kernel in _kernels(code, masked):
        assert kernel.body is not None
        body = masked[kernel.body[0] : kernel.body[1]]
        readonly = [p for p in _pointer_params(code, kernel) if not p.const and _only_indexed_reads(body, p.name)]
        if not readonly:
            continue
        edits = [(p.span[0], p.span[0], "const ") for p in readonly]
        names = ", ".join(p.name for p in readonly)
        found.append(
            Rewrite(
                key=f"const:{kernel.name}",
                category="qualifiers",
                rationale=f"Make {names} of {kernel.name} point to const data: the kernel only reads through them, "
                "and const (with __restrict__) lets the compiler route the loads through the read-only "
                "data cache (LDG.CONSTANT / ld.global.nc).",
                code=_splice(code, edits),
                signals=frozenset({"memory"}),
            )
        )
    return found


def _only_indexed_reads(body: str, name: str) -> bool:
    """True when every use of ``name`` is a plain ``name[...]`` read: not assigned, incremented,
    addressed, or followed by a member access or a second subscript (which could be a write)."""
    uses = list(re.finditer(rf"(?<![\w.>])\b{name}\b", body))
    if not uses:
        return False
    for use in uses:
        before = body[: use.start()].rstrip()
        if before.endswith(("&", "++", "--")) and not before.endswith("&&"):
            return False
        after = use.end() + len(body[use.end() :]) - len(body[use.end() :].lstrip())
        if after >= len(body) or body[after] != "[":
            return False
        close = matching(body, after)
        if _WRITE_AFTER.match(body, close + 1):
            return False
    return True


def add_launch_bounds(code: str) -> list[Rewrite]:
    masked = mask(code)
    compile_time = _compile_time_constants(code)
    found = []
    for kernel in _kernels(code, masked):
        if kernel.launch_bounds is not None:
            continue
        blocks = {
            _block_expression(code, masked, call) for call in launches(code, masked) if call.kernel == kernel.name
        }
        if len(blocks) != 1:
            continue
        expression = blocks.pop()
        threads = const_eval(expression, compile_time) if expression else None
        if expression is None or threads is None or not 0 < threads <= 1024:
            continue
        at = kernel.head[1] - len(kernel.name)
        found.append(
            Rewrite(
                key=f"launch_bounds:{kernel.name}",
                category="occupancy",
                rationale=f"Add __launch_bounds__({expression}) to {kernel.name}: it is always launched with "
                f"{threads} threads per block, so ptxas can budget registers for that block size instead of "
                "the worst case.",
                code=code[:at] + f"__launch_bounds__({expression}) " + code[at:],
                signals=frozenset({"occupancy"}),
            )
        )
        min_blocks = 1024 // threads
        if min_blocks >= 2:  # an expression over a knob follows the knob when it is retuned
            literal = parse_int(expression) is not None
            bounds = f"{expression}, {min_blocks}" if literal else f"{expression}, 1024 / ({expression})"
            found.append(
                Rewrite(
                    key=f"launch_bounds_min:{kernel.name}",
                    category="occupancy",
                    rationale=f"Add __launch_bounds__({bounds}) to {kernel.name}: asking for {min_blocks} "
                    f"resident blocks of {threads} threads (1024 threads per SM) caps registers at "
                    f"{65536 // (min_blocks * threads)} per thread, for at least 50% occupancy.",
                    code=code[:at] + f"__launch_bounds__({bounds}) " + code[at:],
                    signals=frozenset({"occupancy", "latency"}),
                )
            )
    return found


def _compile_time_constants(code: str) -> dict[str, int]:
    """Constants device code can see: ``#define`` and ``constexpr``/namespace-scope ``const`` values."""
    local = {k.name for k in find_knobs(code) if not k.compile_time}
    return {name: value for name, value in integer_constants(code).items() if name not in local}


def _block_expression(code: str, masked: str, call: Launch) -> str | None:
    """A launch's block size as an expression (``BLOCK_X * BLOCK_Y`` for a dim3), or None."""
    block = call.block
    inline = re.fullmatch(r"dim3\s*\((.*)\)", block, re.DOTALL)
    if inline:
        return " * ".join(p.strip() for p in inline.group(1).split(","))
    if not re.fullmatch(r"[A-Za-z_]\w*", block):
        return block or None
    declared = re.search(rf"\bdim3\s+{block}\s*\((?P<dims>[^;()]*)\)\s*;", masked)
    if declared:
        dims = code[declared.start("dims") : declared.end("dims")]
        return " * ".join(p.strip() for p in dims.split(","))
    return block


def unroll_fixed_loops(code: str) -> list[Rewrite]:
    compile_time = _compile_time_constants(code)
    return _unroll(code, "unroll", lambda header: _fixed_trip(header, compile_time), "#pragma unroll")


def unroll_runtime_loops(code: str) -> list[Rewrite]:
    compile_time = _compile_time_constants(code)
    return _unroll(
        code,
        "unroll_runtime",
        lambda header: not _fixed_trip(header, compile_time),
        f"#pragma unroll {RUNTIME_UNROLL}",
        innermost_only=True,
    )


def _unroll(
    code: str, key: str, wanted: Callable[[str], bool], pragma: str, innermost_only: bool = False
) -> list[Rewrite]:
    masked = mask(code)
    found = []
    for kernel in device_functions(code, masked):
        if kernel.body is None:
            continue
        inserts = []
        for match in _FOR.finditer(masked, kernel.body[0], kernel.body[1]):
            close = matching(masked, match.end() - 1)
            header = masked[match.end() : close]
            if not wanted(header) or (innermost_only and not _innermost(masked, close)):
                continue
            line_start = masked.rfind("\n", 0, match.start()) + 1
            indent = masked[line_start : match.start()]
            if indent.strip() or not _statement_boundary(masked, line_start):
                continue  # `for` not first on its line, or the body of an unbraced if/else
            previous = code[:line_start].rstrip().rsplit("\n", 1)[-1]
            if _PRAGMA_UNROLL.match(previous):
                continue
            inserts.append((line_start, line_start, f"{indent}{pragma}\n"))
        if inserts:
            what = "its fixed-trip loops" if pragma == "#pragma unroll" else "its innermost run-time loops"
            found.append(
                Rewrite(
                    key=f"{key}:{kernel.name}",
                    category="unrolling",
                    rationale=f"Put `{pragma}` on {what} in {kernel.name} ({len(inserts)} loop(s)): fewer branches "
                    "and index updates, and independent iterations the scheduler can overlap (more loads in "
                    "flight).",
                    code=_splice(code, inserts),
                    signals=frozenset({"compute", "latency"} if key == "unroll" else {"latency", "memory"}),
                )
            )
    return found


def _fixed_trip(header: str, constants: dict[str, int]) -> bool:
    parts = [p.strip() for p in header.split(";")]
    if len(parts) != 3:
        return False
    init, condition, step = parts
    init_match, cond_match = _INIT.match(init), _CONDITION.match(condition)
    if not init_match or not cond_match or init_match.group("var") != cond_match.group("var"):
        return False
    var = init_match.group("var")
    if const_eval(init_match.group("value"), constants) is None:
        return False
    if const_eval(cond_match.group("bound"), constants) is None:
        return False
    step_match = re.fullmatch(rf"(?:\+\+|--){var}|{var}(?:\+\+|--)|{var}\s*(?:[-+*/]|<<|>>)=\s*(?P<by>.+)", step)
    if step_match is None:
        return False
    return step_match.group("by") is None or const_eval(step_match.group("by"), constants) is not None


def _innermost(masked: str, header_close: int) -> bool:
    rest = masked[header_close + 1 :].lstrip()
    start = header_close + 1 + (len(masked) - header_close - 1 - len(rest))
    if rest.startswith("{"):
        body = masked[start : matching(masked, start)]
    else:
        end = masked.find(";", start)
        body = masked[start:end]
    return not re.search(r"\b(for|while|do)\b", body)


def _statement_boundary(masked: str, line_start: int) -> bool:
    """True when the code before ``line_start`` ends a statement or opens/closes a block."""
    before = masked[:line_start].rstrip()
    return not before or before[-1] in ";{}" or before.endswith(":")


def retune_literal_launches(code: str) -> list[Rewrite]:
    masked = mask(code)
    device_text = " ".join(masked[f.body[0] : f.body[1]] for f in device_functions(code, masked) if f.body)
    found = []
    for call in launches(code, masked):
        size = parse_int(call.block)
        host = enclosing_block(masked, call.span[0])
        if size is None or size < 32 or host is None or re.search(rf"\b{size}\b", device_text):
            continue
        region = masked[host[0] : host[1]]
        uses = [m.span() for m in re.finditer(rf"\b({size}|{size - 1})\b", region)]
        if len(uses) > 4:
            continue  # the number is used for other things too: leave it alone
        for new in (size // 2, size * 2):
            if not 32 <= new <= 1024:
                continue
            edits = [(host[0] + a, host[0] + b, str(new if region[a:b] == str(size) else new - 1)) for a, b in uses]
            found.append(
                Rewrite(
                    key=f"launch:{call.kernel}={new}",
                    category="launch_config",
                    rationale=f"Launch {call.kernel} with {new} threads per block instead of {size} (grid size "
                    "follows): trades occupancy and latency hiding against per-block overhead and tail effects.",
                    code=_splice(code, edits),
                    signals=frozenset({"occupancy", "memory"}),
                )
            )
    return found
