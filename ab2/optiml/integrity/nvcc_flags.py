"""The allow-list for a candidate's extra nvcc flags.

Flags come from proposers (an LLM may suggest any string), and nvcc runs in the orchestrator,
so a flag such as ``-include /home/me/.netrc``, ``-Xlinker --wrap=…``, ``-o ~/.bashrc`` or
``-ccbin ./evil`` is as dangerous as a bad source line. Only flags that tune code generation
pass; everything else is the ``nvcc-flag`` rejection. Fast-math switches pass but are reported
as ``fast-math`` (a flag that only counts on fp32-strict tasks).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

_ALLOWED = re.compile(
    r"-O[0-3]|-g|-G|-w|-lineinfo|--?use_fast_math|--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)"
    r"|--?maxrregcount=\d+|--?extra-device-vectorization|--?restrict|-std=c\+\+(14|17|20)"
    r"|--?expt-relaxed-constexpr|--?expt-extended-lambda|--?extended-lambda|-Wno-deprecated-gpu-targets"
    r"|--?resource-usage|-D[A-Za-z_]\w*(=[\w.+\-]*)?|-U[A-Za-z_]\w*"
)
_PTXAS = re.compile(
    r"-O[0-3]|-v|--?verbose|--?warn-on-spills|--?warn-on-local-memory-usage|--?warn-on-double-precision-use"
    r"|-dlcm=c[ag]|-dscm=(wb|cg|cs|wt)|--?allow-expensive-optimizations(=(true|false))?|--?maxrregcount=\d+"
    r"|--?def-load-cache=\w+|--?def-store-cache=\w+"
)
_HOST = re.compile(r"-O[0-3]|-march=native|-funroll-loops|-fno-strict-aliasing|-Wall|-Wextra|-fPIC")
_FAST_MATH = re.compile(r"--?use_fast_math|--?ftz=true|--?prec-div=false|--?prec-sqrt=false")
_PASSTHROUGH = {"-Xptxas": _PTXAS, "--ptxas-options": _PTXAS, "-Xcompiler": _HOST, "--compiler-options": _HOST}
_WITH_VALUE = {"-maxrregcount": r"\d+", "--maxrregcount": r"\d+", "-D": r"[A-Za-z_]\w*(=[\w.+\-]*)?"}


def screen_flag_list(flags: Sequence[str]) -> Iterator[tuple[str, str]]:
    """``(rule id, flag)`` for every flag that is not allowed (``nvcc-flag``) or relaxes fp32 (``fast-math``)."""
    index = 0
    while index < len(flags):
        flag = flags[index].strip()
        value: str | None = None
        name = flag.split("=", 1)[0]
        if name in _PASSTHROUGH and "=" in flag:
            value = flag.split("=", 1)[1]
        elif flag in _PASSTHROUGH or flag in _WITH_VALUE:
            value = flags[index + 1].strip() if index + 1 < len(flags) else ""
            index += 1
        index += 1
        shown = flag if value is None or "=" in flag else f"{flag} {value}"
        if value is None:
            ok = _ALLOWED.fullmatch(flag) is not None
        elif name in _PASSTHROUGH:
            ok = all(_PASSTHROUGH[name].fullmatch(part) for part in value.split(",")) and bool(value)
        else:
            ok = re.fullmatch(_WITH_VALUE[flag], value) is not None
        if not ok:
            yield "nvcc-flag", shown
        elif value is None and _FAST_MATH.fullmatch(flag):
            yield "fast-math", shown
