"""Static screening of a candidate before it is compiled: reject what it must not do, flag the rest.

The policy — which names, headers, inline-asm patterns and constructs are rejected or flagged,
and why — is the table in :mod:`optiml.integrity.rules` (rendered in ``docs/integrity.md``).
In short, a candidate is **rejected** for: starting processes, exiting or aborting, signals,
raw system calls, sockets, file I/O, reading the environment, loading libraries, host
threads, creating streams or switching devices, touching CUDA events or the profiler (the
harness's timer), persisting-L2 tricks, resetting the context, defining functions named like
CUDA or C library APIs, load-time constructors, includes of arbitrary files, host system calls
in inline asm, nvcc flags outside the allow-list and — on fp32-strict tasks — half precision or
TF32. It is **flagged** (recorded as a warning, still evaluated) for launches on the default
stream, state kept across calls, allocations per call, device-wide settings, clocks, console
output, token pasting and system-path string literals.

Matching is on tokens (:mod:`optiml.integrity.lexer`), so comments and string contents never
trigger a rule (``// no fork()`` is fine) and every finding carries the offending line.
Screening is a first line of defence, not a proof: macros and pointer tricks can hide a name,
which is why the worker that runs candidates is isolated as well (:mod:`optiml.integrity.sandbox`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from optiml.integrity.lexer import Kind, Token, tokenize
from optiml.integrity.nvcc_flags import screen_flag_list
from optiml.integrity.rules import FLAG, POLICY, REJECT, RULES, Rule
from optiml.task import TaskMeta


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TEXT_WIDTH = 120
# Keywords that may directly precede an expression (so `return exit(1)` is a call).
_EXPR_KEYWORDS = _words("return else do case throw co_return co_yield co_await sizeof new delete not and or")
# Words followed by a parenthesis that are not function definitions when a brace follows.
_NOT_FUNCTIONS = _words(
    "if for while switch catch return sizeof decltype alignof alignas __launch_bounds__ "
    "__attribute__ __declspec defined static_assert noexcept requires __maxnreg__ __cluster_dims__"
)
_NULL_STREAMS = frozenset(("0", "NULL", "nullptr", "0x0", "cudaStreamLegacy", "cudaStreamPerThread"))
_NOT_MUTABLE = frozenset(("const", "constexpr", "consteval", "__constant__", "__shared__"))
_NOT_VARIABLES = _words(
    "typedef using struct class union enum template namespace static_assert friend extern return "
    "goto break continue case default"
)
_API_NAME = re.compile(
    r"cuda(Launch|Malloc|Free|Memcpy|Memset|Stream|Event|Device|Graph|Profiler|Ctx|Func|Get|Set|Host|Peek)\w*"
    r"|cu(Init|Launch|Mem|Ctx|Stream|Event|Module|Func|Device|Graph|GetProcAddress|Profiler)\w*"
    r"|(nvrtc|cublas|cublasLt|cudnn|nccl)[A-Z]\w*|pthread_\w+|dl(open|mopen|sym|vsym|close|error|info|addr)"
    r"|malloc|calloc|realloc|free|memcpy|memmove|memset|exit|_exit|abort|getenv|system|fork|ioctl|syscall"
    r"|clock_gettime|gettimeofday"
)
_LOAD_TIME_ATTRS = frozenset(("constructor", "destructor", "__constructor__", "__destructor__"))
_LOAD_TIME_SECTION = re.compile(r"\.(init_array|fini_array|preinit_array|ctors|dtors)\b")
_SYSTEM_PATH = re.compile(r"^(/(proc|etc|home|root|tmp|dev|sys|var|usr|run|mnt|opt|boot)(/|$)|~/)")


@dataclass(frozen=True)
class Finding:
    """One rule hit: the rule, what it does, where (``line`` is None for nvcc flags) and why."""

    rule: str
    action: str  # "reject" | "flag"
    line: int | None
    text: str  # the offending source line (trimmed) or flag
    reason: str

    def render(self) -> str:
        where = f"line {self.line}" if self.line is not None else "nvcc flags"
        return f"[{self.rule}] {where}: `{self.text}` — {self.reason}"


@dataclass(frozen=True)
class ScreenReport:
    """All findings for one candidate, in source order."""

    findings: tuple[Finding, ...] = ()

    @property
    def rejections(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.action == REJECT)

    @property
    def flags(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.action == FLAG)

    @property
    def rejected(self) -> bool:
        return any(f.action == REJECT for f in self.findings)

    def message(self) -> str:
        """One line: the first rejection and its line, or a pass with the flags' rule ids."""
        rejections = self.rejections
        if rejections:
            more = f" (+{len(rejections) - 1} more)" if len(rejections) > 1 else ""
            return f"rejected by screening: {rejections[0].render()}{more}"
        if self.flags:
            where = ", ".join(f"{f.rule} ({_where(f)})" for f in self.flags)
            return f"passed screening with {len(self.flags)} flag(s): {where}"
        return "passed screening"

    def warnings(self) -> list[str]:
        """One line per flag, for :attr:`optiml.values.EvalResult.warnings`."""
        return [f"screening flag {f.render()}" for f in self.flags]

    def __add__(self, other: ScreenReport) -> ScreenReport:
        return ScreenReport(self.findings + other.findings)


def is_fp32_strict(meta: TaskMeta) -> bool:
    """A float32 task whose tolerance is tighter than half precision or TF32 can meet (1e-3), and which
    has not chosen TF32 (``OPTIML['precision'] = 'tf32'``: its reference computes in TF32 itself)."""
    return meta.dtype == "float32" and meta.precision == "exact" and meta.rtol < 1e-3 and meta.atol < 1e-3


class Screened(Protocol):
    """What screening reads of a candidate: its source and its extra nvcc flags. A
    :class:`optiml.kernel.source.KernelSource` is one; integrity itself imports nothing of
    :mod:`optiml.kernel`, which builds on it (the compile sandbox)."""

    @property
    def code(self) -> str: ...

    @property
    def flags(self) -> Sequence[str]: ...


def screen_kernel(kernel: Screened, *, fp32_strict: bool) -> ScreenReport:
    """Screen a candidate's source and its extra nvcc flags."""
    return screen_source(kernel.code, fp32_strict=fp32_strict) + screen_flags(kernel.flags, fp32_strict=fp32_strict)


def screen_flags(flags: Sequence[str], *, fp32_strict: bool) -> ScreenReport:
    """Judge extra nvcc flags against the allow-list (rules ``nvcc-flag`` and ``fast-math``)."""
    findings = []
    for rule_id, flag in screen_flag_list(flags):
        rule = RULES[rule_id]
        if rule.fp32_strict_only and not fp32_strict:
            continue
        findings.append(Finding(rule.id, rule.action, None, flag, rule.reason))
    return ScreenReport(tuple(findings))


def screen_source(code: str, *, fp32_strict: bool) -> ScreenReport:
    """Apply every source rule of the policy to ``code``; one finding per rule and line."""
    scan = _Scan(tokenize(code))
    lines = code.splitlines()
    hits: dict[tuple[int, int], Finding] = {}
    for order, rule in enumerate(POLICY):
        if rule.applies_to != "source" or (rule.fp32_strict_only and not fp32_strict):
            continue
        for line in _matches(rule, scan):
            if (line, order) not in hits:
                text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
                if len(text) > _TEXT_WIDTH:
                    text = text[: _TEXT_WIDTH - 1] + "…"
                hits[(line, order)] = Finding(rule.id, rule.action, line, text, rule.reason)
    return ScreenReport(tuple(hits[key] for key in sorted(hits)))


def _where(finding: Finding) -> str:
    return f"line {finding.line}" if finding.line is not None else "flags"


@dataclass(frozen=True)
class _Name:
    """An identifier with its ``::`` qualifier (``""`` when unqualified or global)."""

    index: int
    text: str
    qualifier: str
    start: int  # index of the first token of the qualified name
    member: bool  # preceded by `.` or `->`
    line: int

    @property
    def joined(self) -> str:
        return f"{self.qualifier}::{self.text}" if self.qualifier else self.text


class _Scan:
    """Tokens of one source plus what several rules need: names, defined functions, asm templates."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.names = [_name(tokens, i) for i, t in enumerate(tokens) if t.kind is Kind.IDENT]
        self.defined = _defined_functions(tokens)
        self.asm = list(_asm_templates(tokens))
        self.qualified_cache: dict[str, re.Pattern[str]] = {}

    def qualified(self, pattern: str) -> re.Pattern[str]:
        if pattern not in self.qualified_cache:
            self.qualified_cache[pattern] = re.compile(rf"(?:^|::)(?:{pattern})$")
        return self.qualified_cache[pattern]


def _name(tokens: list[Token], index: int) -> _Name:
    parts: list[str] = []
    start = index
    while start >= 1 and _is(tokens[start - 1], "::"):
        before = tokens[start - 2] if start >= 2 else None
        if before is not None and before.kind is Kind.IDENT and before.text not in _EXPR_KEYWORDS:
            parts.append(before.text)
            start -= 2
            continue
        if before is not None and _is(before, ">"):
            parts.append("<>")  # a member of a template instance: never a C API
        start -= 1
        break
    member = start >= 1 and tokens[start - 1].kind is Kind.PUNCT and tokens[start - 1].text in (".", "->")
    token = tokens[index]
    return _Name(index, token.text, "::".join(reversed(parts)), start, member, token.line)


def _is(token: Token, text: str) -> bool:
    return token.kind is Kind.PUNCT and token.text == text


def _matches(rule: Rule, scan: _Scan) -> Iterator[int]:
    yield from _name_matches(rule, scan)
    if rule.headers is not None:
        pattern = re.compile(rule.headers)
        yield from (t.line for t in scan.tokens if t.kind is Kind.INCLUDE and pattern.fullmatch(t.text.strip()))
    if rule.asm is not None:
        pattern = re.compile(rule.asm)
        yield from (line for line, template in scan.asm if pattern.search(template))
    if rule.custom:
        yield from _DETECTORS[rule.id](scan)


def _name_matches(rule: Rule, scan: _Scan) -> Iterator[int]:
    qualified = [scan.qualified(p) for p in rule.qualified]
    return (name.line for name in scan.names if _name_hit(rule, scan, name, qualified))


def _name_hit(rule: Rule, scan: _Scan, name: _Name, qualified: list[re.Pattern[str]]) -> bool:
    if name.text in rule.anywhere:
        return True
    if name.member:
        return False
    plain = name.qualifier == ""
    return (
        ((plain or name.qualifier == "std") and name.text in rule.names)
        or (plain and bool(rule.prefixes) and name.text.startswith(rule.prefixes))
        or any(p.search(name.joined) for p in qualified)
        or (plain and name.text in rule.calls and name.text not in scan.defined and _is_call(scan.tokens, name))
    )


def _is_call(tokens: list[Token], name: _Name) -> bool:
    """``name(`` used as an expression, not declared (``int write(...)``) or defined."""
    after = name.index + 1
    if after >= len(tokens) or not _is(tokens[after], "("):
        return False
    if name.start == 0:
        return True
    before = tokens[name.start - 1]
    return not (before.kind is Kind.IDENT and before.text not in _EXPR_KEYWORDS)


def _matching(tokens: list[Token], index: int, opener: str, closer: str) -> int:
    """Index of the token closing the bracket opened at ``index`` (or the last index)."""
    depth = 0
    for position in range(index, len(tokens)):
        token = tokens[position]
        if _is(token, opener):
            depth += 1
        elif _is(token, closer):
            depth -= 1
            if depth == 0:
                return position
    return len(tokens) - 1


def _defined_functions(tokens: list[Token]) -> dict[str, int]:
    """Functions the source defines (``name(...) [qualifiers] {``) or binds to lambdas, with their lines."""
    defined: dict[str, int] = {}
    for index, token in enumerate(tokens[:-1]):
        if token.kind is not Kind.IDENT or token.text in _NOT_FUNCTIONS:
            continue
        if _is(tokens[index + 1], "=") and index + 2 < len(tokens) and _is(tokens[index + 2], "["):
            defined.setdefault(token.text, token.line)  # auto write = [&](int i) { ... };
            continue
        if not _is(tokens[index + 1], "("):
            continue
        close = _matching(tokens, index + 1, "(", ")")
        for follower in tokens[close + 1 : close + 12]:
            if follower.kind is Kind.PUNCT and follower.text in ("{", ";", "=", ",", ")", "}"):
                if follower.text == "{":
                    defined.setdefault(token.text, token.line)
                break
    return defined


def _asm_templates(tokens: list[Token]) -> Iterator[tuple[int, str]]:
    """(line, template text) of every ``asm(...)`` / ``__asm__ volatile(...)`` statement."""
    for index, token in enumerate(tokens):
        if token.kind is not Kind.IDENT or token.text not in ("asm", "__asm__", "__asm"):
            continue
        position = index + 1
        while position < len(tokens) and tokens[position].text in ("volatile", "__volatile__", "goto", "inline"):
            position += 1
        if position >= len(tokens) or not _is(tokens[position], "("):
            continue
        parts = []
        position += 1
        while position < len(tokens) and tokens[position].kind is Kind.STRING:
            parts.append(tokens[position].text)
            position += 1
        yield token.line, "".join(parts)


# -- custom detectors ------------------------------------------------------------------------------
def _api_definitions(scan: _Scan) -> Iterator[int]:
    return (line for name, line in scan.defined.items() if _API_NAME.fullmatch(name))


def _load_time_code(scan: _Scan) -> Iterator[int]:
    tokens = scan.tokens
    for index, token in enumerate(tokens):
        if token.kind is Kind.IDENT and token.text in _LOAD_TIME_ATTRS:
            window = tokens[max(0, index - 8) : index]
            if any(t.kind is Kind.IDENT and t.text in ("__attribute__", "gnu") for t in window):
                yield token.line
        elif token.kind is Kind.STRING and _LOAD_TIME_SECTION.search(token.text):
            yield token.line


def _include_paths(scan: _Scan) -> Iterator[int]:
    for token in scan.tokens:
        if token.kind is Kind.DIRECTIVE and token.text == "embed":
            yield token.line
        elif token.kind is Kind.INCLUDE:
            target = token.text.strip()
            if not target or target.startswith(("/", "~", "\\")) or ".." in target or re.match(r"[A-Za-z]:", target):
                yield token.line


def _default_stream_launches(scan: _Scan) -> Iterator[int]:
    tokens = scan.tokens
    for index, token in enumerate(tokens):
        if not _is(token, "<<<"):
            continue
        arguments = _launch_arguments(tokens, index)
        if arguments is None:
            continue
        if len(arguments) < 4 or (len(arguments[3]) == 1 and arguments[3][0].text in _NULL_STREAMS):
            yield token.line


def _launch_arguments(tokens: list[Token], index: int) -> list[list[Token]] | None:
    """The comma-separated arguments between ``<<<`` at ``index`` and its ``>>>``."""
    arguments: list[list[Token]] = [[]]
    depth = 0
    for token in tokens[index + 1 :]:
        if token.kind is Kind.PUNCT and token.text in ("(", "[", "{", "<<<"):
            depth += 1
        elif token.kind is Kind.PUNCT and token.text in (")", "]", "}"):
            depth -= 1
        elif _is(token, ">>>"):
            if depth == 0:
                return arguments
            depth -= 1
        elif _is(token, ",") and depth == 0:
            arguments.append([])
            continue
        arguments[-1].append(token)
    return None


def _persistent_state(scan: _Scan) -> Iterator[int]:
    """Mutable file-scope variables and ``static`` locals: places to keep results between calls."""
    tokens = [t for t in scan.tokens if not t.in_directive]
    statement: list[Token] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if _is(token, "{"):
            end = _matching(tokens, index, "{", "}")
            if _opens_scope(statement):  # namespace or extern "C" block: its contents are file scope
                statement = []
                index += 1
                continue
            if any(_is(t, "=") for t in statement):  # a braced initializer: the statement goes on
                index = end + 1
                continue
            yield from _static_locals(tokens[index + 1 : end])
            statement = []
            index = end + 1
            continue
        if _is(token, "}"):
            statement = []
        elif _is(token, ";"):
            if _is_mutable_variable(statement):
                yield statement[0].line
            statement = []
        else:
            statement.append(token)
        index += 1


def _opens_scope(statement: list[Token]) -> bool:
    if not statement:
        return False
    first = statement[0]
    return first.text == "namespace" or (
        first.text == "extern" and len(statement) == 2 and statement[1].kind is Kind.STRING
    )


def _static_locals(body: list[Token]) -> Iterator[int]:
    for index, token in enumerate(body):
        if token.kind is not Kind.IDENT or token.text != "static":
            continue
        declaration = []
        for follower in body[index + 1 :]:
            if follower.kind is Kind.PUNCT and follower.text in (";", "{"):
                break
            declaration.append(follower)
        if _is_mutable_variable(declaration):
            yield token.line


def _is_mutable_variable(declaration: list[Token]) -> bool:
    """A declaration of at least a type and a name, with no call parentheses and nothing const."""
    if declaration and declaration[0].text == "static":
        declaration = declaration[1:]
    if len(declaration) < 2 or declaration[0].text in _NOT_VARIABLES:
        return False
    for token in declaration:
        if _is(token, "="):
            break
        if _is(token, "(") or token.text in _NOT_MUTABLE or token.kind is Kind.STRING:
            return False
    return True


def _token_pasting(scan: _Scan) -> Iterator[int]:
    return (t.line for t in scan.tokens if _is(t, "##"))


def _path_literals(scan: _Scan) -> Iterator[int]:
    return (t.line for t in scan.tokens if t.kind is Kind.STRING and _SYSTEM_PATH.match(t.text))


_DETECTORS: dict[str, Callable[[_Scan], Iterable[int]]] = {
    "api-definition": _api_definitions,
    "load-time-code": _load_time_code,
    "include-path": _include_paths,
    "launch-default-stream": _default_stream_launches,
    "persistent-state": _persistent_state,
    "token-pasting": _token_pasting,
    "path-literal": _path_literals,
}
