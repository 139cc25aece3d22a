"""SEARCH/REPLACE parsing and applying, diff_blocks, and apply_edit for every edit kind."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from propose_helpers import DATA_KERNELS, SUITE_KERNELS

from optiml.kernel.source import KernelSource
from optiml.propose.edits import (
    SearchReplace,
    apply_blocks,
    apply_edit,
    diff_blocks,
    has_blocks,
    parse_blocks,
    render_blocks,
)
from optiml.propose.errors import EditApplyError, EditParseError
from optiml.values import Edit

SOURCE = """#include "optiml.h"

#define BLOCK_SIZE 256

__global__ void scale(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = 2.0f * x[i];
  }
}
"""


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def test_parse_plain_block() -> None:
    [only] = parse_blocks(block("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 512"))
    assert only.search_lines == ["#define BLOCK_SIZE 256"]
    assert only.replace_lines == ["#define BLOCK_SIZE 512"]


def test_parse_tolerates_fences_crlf_and_marker_lengths() -> None:
    text = (
        "Here is the change:\r\n```cuda\r\n<<<<<<<< SEARCH\r\n#define BLOCK_SIZE 256\r\n=========\r\n"
        "#define BLOCK_SIZE 512\r\n>>>>>>>> REPLACE\r\n```\r\n\r\n```\r\n<<<<<<<SEARCH\r\n```cpp\r\n"
        "    y[i] = 2.0f * x[i];\r\n=======\r\n    y[i] = x[i] + x[i];\r\n```\r\n>>>>>>> REPLACE\r\n```\r\n"
    )
    blocks = parse_blocks(text)
    assert [b.search_lines for b in blocks] == [["#define BLOCK_SIZE 256"], ["    y[i] = 2.0f * x[i];"]]
    assert blocks[1].replace_lines == ["    y[i] = x[i] + x[i];"]
    applied = apply_blocks(SOURCE, blocks)
    assert "#define BLOCK_SIZE 512" in applied and "y[i] = x[i] + x[i];" in applied


def test_empty_replace_deletes_lines() -> None:
    text = "<<<<<<< SEARCH\n  if (i < n) {\n    y[i] = 2.0f * x[i];\n  }\n=======\n>>>>>>> REPLACE\n"
    assert "y[i]" not in apply_blocks(SOURCE, parse_blocks(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<<<<<<< SEARCH\nfoo\n=======\nbar\n", "block 1 is incomplete (no '>>>>>>> REPLACE' line"),
        ("<<<<<<< SEARCH\nfoo\n", "block 1 is incomplete (no '=======' line"),
        (block("a", "b") + "<<<<<<< SEARCH\nfoo\n>>>>>>> REPLACE\n", "block 2 has no '=======' line"),
        (
            "<<<<<<< SEARCH\nfoo\n<<<<<<< SEARCH\nbar\n=======\nbaz\n>>>>>>> REPLACE\n",
            "block 1 has no '>>>>>>> REPLACE'",
        ),
        (block("", "something"), "block 1 has an empty SEARCH section"),
    ],
)
def test_malformed_blocks_name_the_block(text: str, message: str) -> None:
    with pytest.raises(EditParseError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_blocks(text)


def test_has_blocks() -> None:
    assert has_blocks("text\n<<<<<<< SEARCH\nx\n")
    assert not has_blocks("```cuda\nint x;\n```")


def test_apply_ignores_trailing_whitespace_and_indentation() -> None:
    trailing = SearchReplace("    y[i] = 2.0f * x[i];   \n", "    y[i] = 3.0f * x[i];\n")
    assert "y[i] = 3.0f * x[i];" in apply_blocks(SOURCE, [trailing])
    # quoted without indentation: matched ignoring it, the replacement is re-indented to the kernel's
    unindented = SearchReplace("if (i < n) {\n  y[i] = 2.0f * x[i];\n}\n", "if (i < n) {\n  y[i] = 4.0f * x[i];\n}\n")
    applied = apply_blocks(SOURCE, [unindented])
    assert "  if (i < n) {\n    y[i] = 4.0f * x[i];\n  }\n" in applied


def test_apply_keeps_crlf_sources_crlf() -> None:
    crlf = SOURCE.replace("\n", "\r\n")
    applied = apply_blocks(crlf, [SearchReplace("#define BLOCK_SIZE 256\n", "#define BLOCK_SIZE 128\n")])
    assert applied == crlf.replace("256", "128")


def test_search_not_found_names_block_and_nearest_line() -> None:
    blocks = [
        SearchReplace("#define BLOCK_SIZE 256\n", "#define BLOCK_SIZE 128\n"),
        SearchReplace("    y[i] = 2.0f * x[j];\n", "    y[i] = x[i];\n"),
    ]
    with pytest.raises(EditApplyError) as err:
        apply_blocks(SOURCE, blocks)
    message = str(err.value)
    assert message.startswith("block 2: SEARCH text not found in the current kernel")
    assert "closest to line 8: 'y[i] = 2.0f * x[i];'" in message


def test_search_matching_nothing_alike_says_so() -> None:
    with pytest.raises(EditApplyError, match="no line resembles 'completely unrelated text here'"):
        apply_blocks(SOURCE, [SearchReplace("completely unrelated text here\n", "x\n")])


def test_ambiguous_search_is_an_error() -> None:
    source = "a;\nfoo();\nb;\nfoo();\n"
    with pytest.raises(EditApplyError, match=r"block 1: SEARCH text matches 2 places \(lines 2, 4\)"):
        apply_blocks(source, [SearchReplace("foo();\n", "bar();\n")])


def test_no_blocks_is_an_error() -> None:
    with pytest.raises(EditApplyError, match="no SEARCH/REPLACE blocks"):
        apply_blocks(SOURCE, [])


@pytest.mark.parametrize("path", SUITE_KERNELS + DATA_KERNELS, ids=lambda p: p.name)
def test_diff_blocks_round_trip_on_real_kernels(path: Path) -> None:
    old = path.read_text()
    lines = old.split("\n")
    rng = random.Random(path.name)
    new_lines = list(lines)
    for _ in range(4):  # insert, delete and change a few lines, including repeated ones like "}"
        at = rng.randrange(len(new_lines))
        choice = rng.random()
        if choice < 0.33:
            new_lines.insert(at, "  // inserted")
        elif choice < 0.66:
            del new_lines[at]
        else:
            new_lines[at] = "}"
    new = "\n".join(new_lines)
    blocks = diff_blocks(old, new)
    assert apply_blocks(old, blocks) == new
    assert apply_blocks(old, parse_blocks(render_blocks(blocks))) == new


def test_diff_blocks_property_on_small_random_texts() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        a = [rng.choice(["a", "b", "}", " ", ""]) for _ in range(rng.randint(1, 10))]
        b = list(a)
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.5 and b:
                del b[rng.randrange(len(b))]
            else:
                b.insert(rng.randint(0, len(b)), rng.choice(["a", "z", ""]))
        old, new = "\n".join(a), "\n".join(b)
        if old == new or not old.strip():
            continue
        blocks = diff_blocks(old, new, context=rng.randint(0, 2))
        assert apply_blocks(old, parse_blocks(render_blocks(blocks))) == new, (old, new)


def test_apply_edit_every_kind() -> None:
    kernel = KernelSource(SOURCE, flags=("-Xptxas=-dlcm=ca",))
    search_replace = Edit("search_replace", block("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 64"), "x", "", "t")
    assert "#define BLOCK_SIZE 64" in apply_edit(kernel, search_replace).code
    knob = apply_edit(kernel, Edit("knob", "BLOCK_SIZE=1024", "launch_config", "", "t"))
    assert "#define BLOCK_SIZE 1024" in knob.code and knob.flags == kernel.flags
    flags = apply_edit(kernel, Edit("flags", "--use_fast_math -Xptxas=-dlcm=ca", "compiler_flags", "", "t"))
    assert flags.flags == ("--use_fast_math", "-Xptxas=-dlcm=ca") and flags.code == kernel.code
    whole = SOURCE + "OPTIML_EXPORT int optiml_forward();\n"
    assert apply_edit(kernel, Edit("full_source", whole, "algorithm", "", "t")).code == whole


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (Edit("full_source", "int main() {}", "other", "", "t"), "does not define optiml_forward"),
        (
            Edit("knob", "TILE=16", "tiling", "", "t"),
            r"knob TILE is not defined in this kernel \(its knobs: BLOCK_SIZE\)",
        ),
        (Edit("knob", "BLOCK_SIZE=big", "tiling", "", "t"), "knob edit payload must be NAME=integer"),
        (Edit("patch", "", "other", "", "t"), "unknown edit kind 'patch'"),
    ],
)
def test_apply_edit_errors(edit: Edit, message: str) -> None:
    with pytest.raises(EditApplyError, match=message):
        apply_edit(KernelSource(SOURCE), edit)
