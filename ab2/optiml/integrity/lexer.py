"""A small C/C++/CUDA tokenizer for screening: comments gone, literals kept apart, lines kept.

It is not a compiler front end. It knows just enough to let :mod:`optiml.integrity.screen`
match names without being fooled by comments (``// no fork here``) or string contents
(``printf("system")``), while still exposing string contents where they matter (inline
``asm`` templates, ``#include`` targets). Every token carries the physical line it starts on.

Handled: ``//`` and ``/* */`` comments, backslash-newline continuations, string and
character literals with escapes and encoding prefixes (``L``, ``u``, ``U``, ``u8``), raw
strings (``R"tag(...)tag"``), pp-numbers with digit separators (``1'000``), preprocessor
directives (``#include <x>`` becomes one ``include`` token; the rest of a directive such as
a ``#define`` body is tokenized like code, so a macro cannot hide a call), and CUDA's
``<<<`` / ``>>>`` launch brackets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    IDENT = "ident"
    NUMBER = "number"
    STRING = "string"  # text is the literal's content, without prefix and quotes
    CHAR = "char"
    PUNCT = "punct"
    INCLUDE = "include"  # text is the header name; "" when computed by a macro
    DIRECTIVE = "directive"  # text is the directive's name: "define", "pragma", "embed", ...


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    line: int
    in_directive: bool = False  # part of a preprocessor line (e.g. a #define body)


_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z]|[0-9A-Za-z_.])*")
_PUNCT3 = ("<<<", ">>>", "...", "<<=", ">>=", "->*")
_PUNCT2 = ("::", "->", "##", "<<", ">>", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=")
_STRING_PREFIXES = ("u8", "u", "U", "L")
_INCLUDE_DIRECTIVES = ("include", "include_next", "import", "embed")


class _Lexer:
    def __init__(self, code: str) -> None:
        # Backslash-newline splices lines; keep a map from spliced offsets to physical lines.
        self.text, self.lines = _splice(code)
        self.pos = 0
        self.tokens: list[Token] = []
        self.at_line_start = True
        self.in_directive = False

    def line(self, pos: int | None = None) -> int:
        return self.lines[min(self.pos if pos is None else pos, len(self.lines) - 1)]

    def run(self) -> list[Token]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\n":
                self.at_line_start = True
                self.in_directive = False
                self.pos += 1
            elif char in " \t\r\f\v":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            elif char == "#" and self.at_line_start:
                self.directive()
            else:
                self.at_line_start = False
                self.token()
        return self.tokens

    def emit(self, kind: Kind, text: str, start: int) -> None:
        self.tokens.append(Token(kind, text, self.line(start), self.in_directive))

    def directive(self) -> None:
        start = self.pos
        self.in_directive = True
        self.pos += 1
        self.skip_blanks()
        match = _IDENT.match(self.text, self.pos)
        self.at_line_start = False
        if match is None:  # a null directive, or `# 12 "file"` line markers
            return
        name = match.group()
        self.pos = match.end()
        if name not in _INCLUDE_DIRECTIVES:
            self.emit(Kind.DIRECTIVE, name, start)
            return
        if name == "embed":
            self.emit(Kind.DIRECTIVE, name, start)
        self.skip_blanks()
        closer = {"<": ">", '"': '"'}.get(self.text[self.pos : self.pos + 1])
        end = self.text.find(closer, self.pos + 1) if closer else -1
        newline = self.text.find("\n", self.pos)
        if closer is None or end < 0 or (0 <= newline < end):
            self.emit(Kind.INCLUDE, "", start)  # computed include: `#include SOME_MACRO`
            return
        self.emit(Kind.INCLUDE, self.text[self.pos + 1 : end], start)
        self.pos = end + 1

    def skip_blanks(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def token(self) -> None:
        text, pos = self.text, self.pos
        literal = self.literal_start()
        if literal is not None:
            self.literal(*literal)
            return
        if (match := _IDENT.match(text, pos)) is not None:
            self.emit(Kind.IDENT, match.group(), pos)
            self.pos = match.end()
        elif (match := _NUMBER.match(text, pos)) is not None:
            self.emit(Kind.NUMBER, match.group(), pos)
            self.pos = match.end()
        else:
            for width, options in ((3, _PUNCT3), (2, _PUNCT2)):
                if text[pos : pos + width] in options:
                    self.emit(Kind.PUNCT, text[pos : pos + width], pos)
                    self.pos += width
                    return
            self.emit(Kind.PUNCT, text[pos], pos)
            self.pos += 1

    def literal_start(self) -> tuple[int, bool] | None:
        """(offset of the opening quote, raw?) when a string or character literal starts here."""
        text, pos = self.text, self.pos
        for prefix in (*_STRING_PREFIXES, ""):
            if not text.startswith(prefix, pos):
                continue
            at = pos + len(prefix)
            if text.startswith('R"', at):
                return at + 1, True
            if text[at : at + 1] in ('"', "'"):
                return at, False
        return None

    def literal(self, at: int, raw: bool) -> None:
        start, text = self.pos, self.text
        quote = text[at]
        if raw:
            open_paren = text.find("(", at + 1)
            delimiter = text[at + 1 : open_paren] if open_paren >= 0 else ""
            closing = ")" + delimiter + '"'
            end = text.find(closing, open_paren + 1) if open_paren >= 0 else -1
            stop = len(text) if end < 0 else end
            self.emit(Kind.STRING, text[open_paren + 1 : stop], start)
            self.pos = len(text) if end < 0 else end + len(closing)
            return
        index = at + 1
        while index < len(text) and text[index] != quote and text[index] != "\n":
            index += 2 if text[index] == "\\" else 1
        self.emit(Kind.STRING if quote == '"' else Kind.CHAR, text[at + 1 : min(index, len(text))], start)
        self.pos = min(index + 1, len(text))


def _splice(code: str) -> tuple[str, list[int]]:
    """Remove backslash-newlines; return the text and, per character, its physical line."""
    out: list[str] = []
    lines: list[int] = []
    line = 1
    index = 0
    while index < len(code):
        char = code[index]
        if char == "\\" and code.startswith("\n", index + 1):
            index += 2
            line += 1
            continue
        if char == "\\" and code.startswith("\r\n", index + 1):
            index += 3
            line += 1
            continue
        out.append(char)
        lines.append(line)
        if char == "\n":
            line += 1
        index += 1
    lines.append(line)  # the end-of-text position
    return "".join(out), lines


def tokenize(code: str) -> list[Token]:
    """Tokens of a C/C++/CUDA source, comments dropped, each with its physical line number."""
    return _Lexer(code).run()
