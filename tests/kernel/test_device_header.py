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
