"""The screening tokenizer: comments gone, literals kept apart, physical line numbers kept."""

from __future__ import annotations

from optiml.integrity.lexer import Kind, tokenize


def _texts(code: str, kind: Kind) -> list[str]:
    return [t.text for t in tokenize(code) if t.kind is kind]


def test_comments_are_dropped_and_lines_kept() -> None:
    code = "/* fork()\n   still a comment */ int a; // system()\nint b;"
    tokens = tokenize(code)
    assert "fork" not in {t.text for t in tokens} and "system" not in {t.text for t in tokens}
    assert [(t.text, t.line) for t in tokens if t.kind is Kind.IDENT] == [("int", 2), ("a", 2), ("int", 3), ("b", 3)]


def test_string_and_char_literals_keep_content_apart() -> None:
    code = r"""const char* s = "a \"quoted\" fork()"; char c = '\''; auto w = L"wide"; auto u = u8"utf";"""
    assert _texts(code, Kind.STRING) == [r"a \"quoted\" fork()", "wide", "utf"]
    assert _texts(code, Kind.CHAR) == [r"\'"]
    assert "fork" not in _texts(code, Kind.IDENT)


def test_raw_strings() -> None:
    code = 'auto r = R"tag(system(") )" still raw)tag"; int after;'
    assert _texts(code, Kind.STRING) == ['system(") )" still raw']
    assert _texts(code, Kind.IDENT) == ["auto", "r", "int", "after"]


def test_includes_and_computed_includes() -> None:
    code = '#include <cstdio>\n  #  include "optiml.h"\n#include HEADER\n#include_next <x.h>'
    tokens = [t for t in tokenize(code) if t.kind is Kind.INCLUDE]
    assert [(t.text, t.line) for t in tokens] == [("cstdio", 1), ("optiml.h", 2), ("", 3), ("x.h", 4)]


def test_directive_bodies_are_tokens_marked_as_directive() -> None:
    code = "#define RUN(x) \\\n   system(x)\nint y;"
    tokens = tokenize(code)
    system = next(t for t in tokens if t.text == "system")
    assert system.line == 2 and system.in_directive
    assert not next(t for t in tokens if t.text == "y").in_directive
    assert [t.text for t in tokens if t.kind is Kind.DIRECTIVE] == ["define"]


def test_hash_inside_a_line_is_not_a_directive() -> None:
    tokens = tokenize("#define S(x) #x\nint a = b # c;")
    assert [t.text for t in tokens if t.kind is Kind.DIRECTIVE] == ["define"]


def test_numbers_with_separators_and_exponents() -> None:
    assert _texts("int n = 1'000'000; float f = 1.5e-3f; x = 0x1Fu;", Kind.NUMBER) == ["1'000'000", "1.5e-3f", "0x1Fu"]


def test_launch_brackets_and_scope_tokens() -> None:
    punct = _texts("k<<<g, b, 0, s>>>(p); std::exit(1); a->b;", Kind.PUNCT)
    assert "<<<" in punct and ">>>" in punct and "::" in punct and "->" in punct


def test_unterminated_literal_and_comment_do_not_hang() -> None:
    tokens = tokenize('char* s = "open\nint x; /* never closed')
    assert [t.text for t in tokens][-3:] == ["int", "x", ";"] and tokens[-1].line == 2
