"""Tunable knobs: compile-time constants and launch constants that a kernel's speed depends on.

A knob is an integer constant defined exactly once whose *name* says what it tunes::

    #define BLOCK_SIZE 256                 // form "define"
    constexpr int TILE = 16;               // form "constexpr" (also `static const int ...`)
    const int threads = 256;               // form "local": a host-side launch constant

Names are matched by role (block size, block dimension, tile, unroll factor, vector width, items
per thread, warps), so problem sizes (``N``), limits (``kMaxGridX``) and epsilons are never
touched. New values walk a power-of-two ladder outward from the current one, and
:func:`check_limits` rejects a kernel that would break a hardware limit the compiler or the
launch would trip over (more than 1024 threads per block, more than 48 KiB of static shared
memory, a launch larger than its ``__launch_bounds__``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optiml.propose.errors import EditApplyError
from optiml.propose.syntax import (
    const_eval,
    device_functions,
    device_ranges,
    launches,
    line_of,
    mask,
    parse_int,
)

MAX_THREADS_PER_BLOCK = 1024
MAX_STATIC_SHARED_BYTES = 48 * 1024

_LITERAL = r"(?P<value>(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*)"
_DEFINE = re.compile(
    rf"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]+\(?[ \t]*{_LITERAL}[ \t]*\)?[ \t]*$", re.MULTILINE
)
_INT_TYPE = r"(?:unsigned[ \t]+int|unsigned[ \t]+long|unsigned|int|long|size_t|u?int(?:32|64)_t)"
_DECLARATION = re.compile(
    rf"(?P<quals>(?:\b(?:static|constexpr|const|inline)\b[ \t]+)*){_INT_TYPE}[ \t]+"
    rf"(?P<name>[A-Za-z_]\w*)[ \t]*=[ \t]*{_LITERAL}[ \t]*;"
)

#: role -> (name patterns on the UPPER_SNAKE form of the name, value ladder)
_ROLES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("block_dim", r"(BLOCK|BLK|BDIM|THREADS)_?(DIM_)?[XYZ]|BLOCK_ROWS|BLOCK_COLS", (1, 2, 4, 8, 16, 32, 64, 128, 256)),
    ("tile", r"TILE(_(SIZE|DIM|WIDTH|[MNK]))?|B[MNK]|T[MNK]|BLOCK_[MNK]|BLOCK_TILE_[MNK]", (4, 8, 16, 32, 64, 128)),
    (
        "block_size",
        r"(\w+_)?(BLOCK(_SIZE|_DIM|SIZE)?|BS|(NUM_|N)?THREADS(_PER_BLOCK)?|BLOCK_THREADS)",
        (32, 64, 128, 256, 512, 1024),
    ),
    ("warps", r"(NUM_|N_)?WARPS(_PER_BLOCK)?", (1, 2, 4, 8, 16, 32)),
    ("unroll", r"UNROLL(_FACTOR)?", (1, 2, 4, 8, 16)),
    ("vector_width", r"VEC(TOR)?(_SIZE|_WIDTH|_LEN)?|PACK(_SIZE)?", (1, 2, 4, 8)),
    (
        "items_per_thread",
        r"(ITEMS|ELEMS|ELEMENTS|WORK|ROWS|COLS)_PER_(THREAD|BLOCK|WARP)|EPT|IPT|COARSEN(ING)?(_FACTOR)?",
        (1, 2, 4, 8, 16),
    ),
)

#: what a role tunes, for rationales
ROLE_PURPOSE = {
    "block_size": "threads per block (occupancy, latency hiding and per-block overheads)",
    "block_dim": "one dimension of the thread block (access pattern and occupancy)",
    "tile": "the tile size (data reuse from shared memory/registers versus occupancy)",
    "warps": "warps per block (occupancy and per-block parallelism)",
    "unroll": "the unroll factor (instruction-level parallelism versus registers)",
    "vector_width": "elements per vector load/store (fewer, wider memory instructions)",
    "items_per_thread": "work per thread (memory-level parallelism and amortised index math)",
}

_TYPE_BYTES = {
    "char": 1,
    "bool": 1,
    "int8_t": 1,
    "uint8_t": 1,
    "half": 2,
    "__half": 2,
    "__nv_bfloat16": 2,
    "short": 2,
    "int16_t": 2,
    "float": 4,
    "int": 4,
    "unsigned": 4,
    "int32_t": 4,
    "uint32_t": 4,
    "half2": 4,
    "__half2": 4,
    "double": 8,
    "long": 8,
    "int64_t": 8,
    "uint64_t": 8,
    "size_t": 8,
    "float2": 8,
    "int2": 8,
    "float4": 16,
    "int4": 16,
    "double2": 16,
    "uint4": 16,
}
_SHARED = re.compile(
    r"__shared__\s+(?:alignas\s*\([^)]*\)\s*)?(?:(?:volatile|const|unsigned|signed)\s+)*(?P<type>long\s+long|\w+)"
    r"\s+\w+\s*(?P<dims>(?:\[[^\]]*\]\s*)+)"
)


@dataclass(frozen=True)
class Knob:
    name: str
    value: int
    role: str
    form: str  # "define" | "constexpr" | "local"
    line: int

    @property
    def compile_time(self) -> bool:
        """True when device code and attributes such as ``__launch_bounds__`` may use the name."""
        return self.form in ("define", "constexpr")

    @property
    def purpose(self) -> str:
        return ROLE_PURPOSE[self.role]


@dataclass(frozen=True)
class _Definition:
    name: str
    value: int
    form: str
    value_span: tuple[int, int]


def role_of(name: str) -> str | None:
    """The knob role a constant's name announces, or None for a constant that is not a knob."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()
    snake = re.sub(r"^K_", "", snake)
    for role, pattern, _ladder in _ROLES:
        if re.fullmatch(pattern, snake):
            return role
    return None


def _definitions(code: str, masked: str) -> list[_Definition]:
    found = [
        _Definition(m.group("name"), int(parse_int(m.group("value")) or 0), "define", m.span("value"))
        for m in _DEFINE.finditer(masked)
    ]
    device = device_ranges(code, masked)
    for m in _DECLARATION.finditer(masked):
        if any(a <= m.start() < b for a, b in device):
            continue  # a constant inside device code is not a launch knob
        constant = {"const", "constexpr"} & set(m.group("quals").split())
        top_level = masked.count("{", 0, m.start()) == masked.count("}", 0, m.start())
        if constant and top_level:
            form = "constexpr"
        elif constant or (not top_level and not _reassigned(masked, m.group("name"))):
            form = "local"
        else:
            continue
        found.append(_Definition(m.group("name"), int(parse_int(m.group("value")) or 0), form, m.span("value")))
    return found


def _reassigned(masked: str, name: str) -> bool:
    writes = re.findall(
        rf"(?:\+\+|--)\s*\b{name}\b|\b{name}\b\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|\b{name}\b\s*(?:\+\+|--)", masked
    )
    return len(writes) > 1  # the declaration itself is one


def integer_constants(code: str) -> dict[str, int]:
    """Every integer constant defined exactly once (knob or not), for evaluating sizes."""
    definitions = _definitions(code, mask(code))
    counts: dict[str, int] = {}
    for d in definitions:
        counts[d.name] = counts.get(d.name, 0) + 1
    return {d.name: d.value for d in definitions if counts[d.name] == 1}


def find_knobs(code: str) -> list[Knob]:
    """The kernel's knobs in source order (constants defined more than once are skipped as ambiguous)."""
    definitions = _definitions(code, mask(code))
    counts: dict[str, int] = {}
    for d in definitions:
        counts[d.name] = counts.get(d.name, 0) + 1
    knobs = []
    for d in sorted(definitions, key=lambda d: d.value_span):
        role = role_of(d.name)
        if role is not None and counts[d.name] == 1 and d.value > 0:
            knobs.append(Knob(d.name, d.value, role, d.form, line_of(code, d.value_span[0])))
    return knobs


def set_knob(code: str, name: str, value: int) -> str:
    """``code`` with knob ``name`` set to ``value``; :class:`EditApplyError` if there is no such knob."""
    matches = [d for d in _definitions(code, mask(code)) if d.name == name]
    if len(matches) != 1:
        names = ", ".join(k.name for k in find_knobs(code)) or "none"
        why = "is defined more than once" if matches else "is not defined"
        raise EditApplyError(f"knob {name} {why} in this kernel (its knobs: {names})")
    start, end = matches[0].value_span
    suffix = code[start:end].lstrip("0123456789abcdefABCDEFxX")  # keep a u/l suffix
    return code[:start] + str(value) + suffix + code[end:]


def parse_knob_payload(payload: str) -> tuple[str, int]:
    """``"NAME=value"`` (the payload of a ``knob`` Edit) as a pair."""
    name, sep, raw = payload.partition("=")
    value = parse_int(raw) if sep else None
    if not re.fullmatch(r"[A-Za-z_]\w*", name.strip()) or value is None:
        raise EditApplyError(f"knob edit payload must be NAME=integer, got {payload!r}")
    return name.strip(), value


def candidate_values(knob: Knob) -> list[int]:
    """New values for a knob from its role's ladder, nearest (in powers of two) first, halving before doubling."""
    ladder = next(ladder for role, _pattern, ladder in _ROLES if role == knob.role)
    values = [v for v in ladder if v != knob.value]
    return sorted(values, key=lambda v: (abs(v.bit_length() - knob.value.bit_length()), v > knob.value))


def check_limits(code: str) -> str | None:
    """Why this kernel would fail to build or launch with its constants, or None when it fits.

    Checks the launches whose block size is a constant expression (at most 1024 threads, and no
    more than a ``__launch_bounds__`` on the launched kernel allows) and the static shared memory
    of each kernel (at most 48 KiB, past which ptxas refuses to compile).
    """
    masked = mask(code)
    env = integer_constants(code)
    bounds = {}
    for function in device_functions(code, masked):
        if function.launch_bounds:
            limit = const_eval(function.launch_bounds.split(",")[0], env)
            if limit is not None:
                bounds[function.name] = limit
    for launch in launches(code, masked):
        threads = _block_threads(code, masked, launch.block, env)
        if threads is None:
            continue
        if threads > MAX_THREADS_PER_BLOCK:
            return f"launch of {launch.kernel} uses {threads} threads per block (limit {MAX_THREADS_PER_BLOCK})"
        if launch.kernel in bounds and threads > bounds[launch.kernel]:
            return (
                f"launch of {launch.kernel} uses {threads} threads but __launch_bounds__ allows {bounds[launch.kernel]}"
            )
    for function in device_functions(code, masked):
        if function.body is None:
            continue
        shared = _static_shared_bytes(masked[function.body[0] : function.body[1]], env)
        if shared > MAX_STATIC_SHARED_BYTES:
            return f"{function.name} declares {shared} bytes of static shared memory (limit {MAX_STATIC_SHARED_BYTES})"
    return None


def _block_threads(code: str, masked: str, block: str, env: dict[str, int]) -> int | None:
    """Threads per block of a launch's block argument when it is a constant (a name, literal or dim3)."""
    value = const_eval(block, env)
    if value is not None:
        return value
    dims_text = None
    inline = re.fullmatch(r"dim3\s*\((.*)\)", block, re.DOTALL)
    if inline:
        dims_text = inline.group(1)
    elif re.fullmatch(r"[A-Za-z_]\w*", block):
        declared = re.search(rf"\bdim3\s+{block}\s*(?:\(|=\s*dim3\s*\(|\{{)(?P<dims>[^;]*?)[)}}]\s*;", masked)
        if declared:
            dims_text = code[declared.start("dims") : declared.end("dims")]
    if dims_text is None:
        return None
    product = 1
    for part in dims_text.split(","):
        dim = const_eval(part, env)
        if dim is None:
            return None
        product *= dim
    return product


def _static_shared_bytes(body: str, env: dict[str, int]) -> int:
    total = 0
    for match in _SHARED.finditer(body):
        size = _TYPE_BYTES.get(match.group("type").replace("long long", "int64_t"), 4)
        for dim in re.findall(r"\[([^\]]*)\]", match.group("dims")):
            value = const_eval(dim, env)
            if value is None:
                size = 0  # an unsized (extern) or non-constant array: dynamic, not counted
                break
            size *= value
        total += size
    return total
