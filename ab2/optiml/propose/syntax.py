"""Just enough CUDA C++ scanning for safe textual edits: functions, parameters, launches, constants.

This is not a parser. Every scan runs over a *masked* copy of the source (comments and string
literals blanked to spaces, same length, newlines kept), so offsets found there index the original
text, and a ``//`` comment or a string can never be mistaken for code. Shapes the scanner does not
recognise are simply not reported, which makes every transformation built on it skip them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass

_INT_LITERAL = r"(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*"
_INT_RE = re.compile(rf"^{_INT_LITERAL}$")
_DEVICE_HEAD = re.compile(
    r"\b(__global__|__device__)\b"
    r"(?P<between>(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)|[^;{}()=])*?)"
    r"\b(?!__launch_bounds__\b)(?P<name>[A-Za-z_]\w*)\s*\(",
    re.DOTALL,
)
_LAUNCH = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*(?:<[^<>;{}]*>\s*)?<<<(?P<config>.*?)>>>\s*\(", re.DOTALL)
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(")
_OPEN_TO_CLOSE = {"(": ")", "[": "]", "{": "}"}


def mask(code: str) -> str:
    """``code`` with comments and string/char literals replaced by spaces (newlines kept)."""
    out = list(code)
    i, n = 0, len(code)
    while i < n:
        two = code[i : i + 2]
        if two == "//":
            end = code.find("\n", i)
            end = n if end < 0 else end
        elif two == "/*":
            end = code.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif code[i] in "\"'":
            end = _literal_end(code, i)
        else:
            i += 1
            continue
        for j in range(i, end):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out)


def _literal_end(code: str, start: int) -> int:
    quote, i = code[start], start + 1
    while i < len(code) and code[i] != quote and code[i] != "\n":
        i += 2 if code[i] == "\\" else 1
    return min(i + 1, len(code))


def matching(masked: str, open_index: int) -> int:
    """Index of the bracket closing the one at ``open_index`` (``len`` when unbalanced)."""
    opener = masked[open_index]
    closer = _OPEN_TO_CLOSE[opener]
    depth = 0
    for i in range(open_index, len(masked)):
        ch = masked[i]
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
    return len(masked)


def split_top_level(text: str, start: int = 0) -> list[tuple[int, int]]:
    """Spans (offset by ``start``) of the comma-separated items of ``text`` at bracket depth 0."""
    spans: list[tuple[int, int]] = []
    depth, begin = 0, 0
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            spans.append((start + begin, start + i))
            begin = i + 1
    if text[begin:].strip() or spans:
        spans.append((start + begin, start + len(text)))
    return spans


@dataclass(frozen=True)
class DeviceFunction:
    """A ``__global__`` or ``__device__`` function (definition or declaration)."""

    name: str
    qualifier: str  # "__global__" or "__device__"
    head: tuple[int, int]  # from the qualifier to the name's end
    params: tuple[int, int]  # inside the parentheses
    body: tuple[int, int] | None  # inside the braces; None for a declaration
    launch_bounds: str | None  # the __launch_bounds__ argument text, when present


def device_functions(code: str, masked: str | None = None) -> list[DeviceFunction]:
    masked = mask(code) if masked is None else masked
    found: list[DeviceFunction] = []
    for match in _DEVICE_HEAD.finditer(masked):
        name = match.group("name")
        open_paren = match.end() - 1
        close_paren = matching(masked, open_paren)
        rest = masked[close_paren + 1 :]
        stripped = rest.lstrip()
        body: tuple[int, int] | None = None
        if stripped.startswith("{"):
            open_brace = close_paren + 1 + (len(rest) - len(stripped))
            body = (open_brace + 1, matching(masked, open_brace))
        elif not stripped.startswith(";"):
            continue  # a __device__ variable or something else that is not a function
        bounds_match = _LAUNCH_BOUNDS.search(masked, match.start(), match.start("name"))
        bounds = None
        if bounds_match:
            close = matching(masked, bounds_match.end() - 1)
            bounds = code[bounds_match.end() : close].strip()
        found.append(
            DeviceFunction(
                name=name,
                qualifier=match.group(1),
                head=(match.start(), match.end("name")),
                params=(open_paren + 1, close_paren),
                body=body,
                launch_bounds=bounds,
            )
        )
    return found


def device_ranges(code: str, masked: str | None = None) -> list[tuple[int, int]]:
    """Spans of every device function body (where device code lives)."""
    return [f.body for f in device_functions(code, masked) if f.body is not None]


@dataclass(frozen=True)
class Launch:
    """A ``kernel<<<grid, block, smem, stream>>>(args)`` launch."""

    kernel: str
    config: tuple[str, ...]  # stripped texts of grid, block, [smem, [stream]]
    args: tuple[str, ...]  # stripped call arguments
    span: tuple[int, int]  # from the kernel name to the closing parenthesis of the call

    @property
    def block(self) -> str:
        return self.config[1] if len(self.config) > 1 else ""


def launches(code: str, masked: str | None = None) -> list[Launch]:
    masked = mask(code) if masked is None else masked
    found: list[Launch] = []
    for match in _LAUNCH.finditer(masked):
        cfg_start = match.start("config")
        config = tuple(code[a:b].strip() for a, b in split_top_level(match.group("config"), cfg_start))
        open_paren = match.end() - 1
        close_paren = matching(masked, open_paren)
        inner = masked[open_paren + 1 : close_paren]
        args = tuple(code[a:b].strip() for a, b in split_top_level(inner, open_paren + 1))
        found.append(Launch(match.group("name"), config, args, (match.start(), close_paren + 1)))
    return found


def enclosing_block(masked: str, index: int) -> tuple[int, int] | None:
    """Span inside the outermost ``{...}`` that contains ``index`` (a top-level function body)."""
    depth, start = 0, -1
    for i, ch in enumerate(masked):
        if i == index:
            break
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
    if depth == 0 or start < 0:
        return None
    return start + 1, matching(masked, start)


def parse_int(text: str) -> int | None:
    """Value of a C integer literal (``256``, ``0x100``, ``256u``), else None."""
    text = text.strip()
    if not _INT_RE.match(text):
        return None
    return int(text.rstrip("uUlL"), 0)


def const_eval(expr: str, env: Mapping[str, int]) -> int | None:
    """Value of an integer constant expression over literals and ``env`` names, else None.

    Handles ``+ - * / % << >>``, parentheses and unary minus (``/`` truncates like C for the
    non-negative values that sizes are); anything else (casts, calls, ``sizeof``) gives None.
    """
    text = re.sub(rf"\b{_INT_LITERAL}\b", lambda m: str(parse_int(m.group(0))), expr.strip())
    text = text.replace("/", "//")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    return _eval_node(tree.body, env)


def _eval_node(node: ast.AST, env: Mapping[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval_node(node.operand, env)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BinOp):
        left, right = _eval_node(node.left, env), _eval_node(node.right, env)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right != 0:
            return left // right if isinstance(node.op, ast.FloorDiv) else left % right
        if isinstance(node.op, ast.LShift) and 0 <= right < 64:
            return left << right
        if isinstance(node.op, ast.RShift) and 0 <= right < 64:
            return left >> right
    return None


def line_of(code: str, index: int) -> int:
    """1-based line number of an offset."""
    return code.count("\n", 0, index) + 1
