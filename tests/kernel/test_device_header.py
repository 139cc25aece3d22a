"""optiml_device.h's index split, compiled for the host (``__device__`` and ``__forceinline__`` defined away)
and checked against Python's divmod on both of its paths: operands that fit 32 bits and those that do not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HEADER_DIR = Path(__file__).resolve().parents[2] / "src" / "optiml" / "kernel" / "include"

PROGRAM = """
#define __device__
#define __forceinline__ inline
#include <cmath>
#include <cstdio>
#include "optiml_device.h"
int main() {
  long long rem, k;
  while (std::scanf("%lld %lld", &rem, &k) == 2) {
    int64_t q = rem;
    const int64_t r = optiml_divmod(q, k);
    std::printf("%lld %lld\\n", (long long)q, (long long)r);
  }
  return 0;
}
"""

CASES = [
    (0, 1),
    (7, 3),
    (524287, 2048),
    (2**32 - 1, 7),  # the largest 32-bit dividend
    (2**32, 7),  # one past: the 64-bit path
    (2**40 + 12345, 2**20 + 3),
    (2**33, 2**32 + 1),  # a divisor past 32 bits with a small quotient
    (123456789, 2**32),  # a divisor past 32 bits, quotient 0
    (2**62 + 5, 3),
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_divmod_matches_python_on_both_paths(tmp_path: Path) -> None:
    source = tmp_path / "divmod.cpp"
    source.write_text(PROGRAM)
    binary = tmp_path / "divmod"
    subprocess.run(["g++", "-O1", "-I", str(HEADER_DIR), str(source), "-o", str(binary)], check=True)
    given = "".join(f"{a} {b}\n" for a, b in CASES)
    done = subprocess.run([str(binary)], input=given, capture_output=True, text=True, check=True)
    got = [tuple(int(v) for v in line.split()) for line in done.stdout.splitlines()]
    assert got == [divmod(a, b) for a, b in CASES]


CHUNKS_PROGRAM = """
#define __device__
#define __forceinline__ inline
#include <cmath>
#include <cstdio>
#include "optiml_device.h"
int main() {
  long long rows, cap, most;
  while (std::scanf("%lld %lld %lld", &rows, &cap, &most) == 3)
    std::printf("%lld\\n", (long long)optiml_wave_chunks(rows, cap, most));
  return 0;
}
"""


def _last_wave_fill(rows: int, chunks: int, cap: int) -> float:
    blocks = rows * chunks
    return blocks / (-(-blocks // cap) * cap)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_wave_chunks_fill_the_last_wave(tmp_path: Path) -> None:
    """split_row and col_chunks cut rows into chunks for rows x chunks blocks, cap of which run at once: enough to
    fill the GPU, then the fewest whose last wave is at least 90 % full (128 rows on 528 slots took 5: a second wave
    21 % full), within the chunks a row allows and the partials the workspace holds."""
    source = tmp_path / "chunks.cpp"
    source.write_text(CHUNKS_PROGRAM)
    binary = tmp_path / "chunks"
    subprocess.run(["g++", "-O1", "-I", str(HEADER_DIR), str(source), "-o", str(binary)], check=True)
    cases = [(1, 528, 10**6), (128, 528, 10**6), (896, 528, 10**6), (7168, 528, 10**6), (300, 528, 10**6)]
    cases += [(128, 528, 3), (1, 528, 100), (128, 4096, 10**6), (0, 528, 10**6), (5, 528, 0)]
    given = "".join(f"{r} {c} {m}\n" for r, c, m in cases)
    done = subprocess.run([str(binary)], input=given, capture_output=True, text=True, check=True)
    got = dict(zip(cases, (int(line) for line in done.stdout.split()), strict=True))
    assert got[(1, 528, 10**6)] == 528  # one row: a block a slot, as before
    assert got[(128, 528, 10**6)] == 8  # 1024 blocks: two waves 97 % full, where 5 chunks left a 21 % wave
    assert got[(7168, 528, 10**6)] == 1  # 13.6 waves of whole rows: the last 57 % full costs 3 %, no chunks
    assert got[(128, 528, 3)] == 3 and got[(1, 528, 100)] == 100  # chunks no shorter than a block's pass
    assert got[(0, 528, 10**6)] == 528 and got[(5, 528, 0)] == 1  # degenerate sizes still launch one chunk
    for (rows, cap, most), chunks in got.items():
        assert 1 <= chunks <= max(1, min(cap, most))
        if rows >= 1 and min(cap, most) >= -(-cap // rows) * 8:  # room to search: the last wave is 90 % full
            assert _last_wave_fill(rows, chunks, cap) >= 0.9, (rows, cap, chunks)
    assert got[(896, 528, 10**6)] == 4 and got[(300, 528, 10**6)] == 5
