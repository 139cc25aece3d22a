"""Same machine code from different source text: the proof for a refactor that moves code between files.

    PYTHONPATH=src python3 benchmarks/render_digests.py tasks ... --sources /tmp/before   # at the old commit
    PYTHONPATH=src python3 benchmarks/render_digests.py tasks ... --sources /tmp/after    # at the new one
    PYTHONPATH=src python3 benchmarks/sass_compare.py /tmp/before /tmp/after --per-kind 3 \
        --out benchmarks/results/sass_compare.json

``render_digests.py --sources`` writes every rendered seed and neighbour, with a manifest (task →
configuration → file). This pairs the two folders' sources by task and configuration, keeps the pairs
whose text differs, and compiles both sides of up to ``--per-kind`` pairs of each kind (the tensor-core
variants of the configuration, e.g. ``wgmma_tma`` or ``tf32x3 + tf32x3_tma``; spread over the tasks) to a
cubin for ``--arch`` with nvcc (no line info: only instructions count), then compares their SASS
(``cuobjdump -sass``) function by function.
Exit status 1 when any pair's machine code differs or a side fails to build. Needs nvcc, not a GPU.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from result_file import head_commit, write_result

from optiml.cuda_tools import find_cuda_tool
from optiml.kernel.compiler import gencode, include_dir

KIND = re.compile(r"(\w+)\(")
#: the variants that call optiml_ptx.h (every GEMM and convolution tensor-core build)
TENSOR_CORE = ("mma", "wgmma", "wgmma_tma", "tf32x3", "tf32x3_wgmma", "tf32x3_tma")


def kind_of(configuration: str) -> str:
    """The tensor-core variants of a configuration key, each once (``tf32x3(...) | row(...) | tf32x3(...)`` →
    ``tf32x3``); the whole list of variants where it has none."""
    variants = KIND.findall(configuration)
    return " + ".join(sorted({v for v in variants if v in TENSOR_CORE})) or " | ".join(variants)


def spread(items: list[Any], count: int) -> list[Any]:
    """``count`` items evenly spaced through ``items`` (all of them when there are no more)."""
    if len(items) <= count:
        return items
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)] if count > 1 else items[:1]


def differing_pairs(before: Path, after: Path) -> dict[str, list[tuple[str, str, Path, Path]]]:
    """Kind → [(task, configuration, before file, after file)] whose texts differ, one per distinct pair."""
    old = json.loads((before / "manifest.json").read_text(encoding="utf-8"))
    new = json.loads((after / "manifest.json").read_text(encoding="utf-8"))
    seen: set[tuple[str, str]] = set()
    kinds: dict[str, list[tuple[str, str, Path, Path]]] = {}
    for task in sorted(set(old) & set(new)):
        for configuration in sorted(set(old[task]) & set(new[task])):
            a, b = before / old[task][configuration], after / new[task][configuration]
            ta, tb = a.read_bytes(), b.read_bytes()
            key = (hashlib.sha256(ta).hexdigest(), hashlib.sha256(tb).hexdigest())
            if ta == tb or key in seen:
                continue
            seen.add(key)
            kinds.setdefault(kind_of(configuration), []).append((task, configuration, a, b))
    return kinds


def sass(nvcc: str, cuobjdump: str, source: Path, arch: str, work: Path) -> dict[str, str]:
    """Function name → its SASS, for ``source`` compiled to a cubin (raises with nvcc's last lines on failure)."""
    cubin = work / (hashlib.sha256(str(source).encode()).hexdigest()[:16] + ".cubin")
    build = subprocess.run(
        [nvcc, "-std=c++17", gencode(arch), f"-I{include_dir()}", "-cubin", "-o", str(cubin), str(source)],
        capture_output=True,
        text=True,
    )
    if build.returncode:
        raise RuntimeError(f"{source}: nvcc failed: {build.stderr.strip().splitlines()[-1:]}")
    listing = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    functions: dict[str, str] = {}
    for chunk in listing.split("\t\tFunction : ")[1:]:
        name, _, body = chunk.partition("\n")
        functions[name.strip()] = body
    return functions


def compare(nvcc: str, cuobjdump: str, pair: tuple[str, str, Path, Path], arch: str, work: Path) -> dict[str, Any]:
    task, configuration, a, b = pair
    row: dict[str, Any] = {"task": task, "configuration": configuration, "kind": kind_of(configuration)}
    try:
        old, new = sass(nvcc, cuobjdump, a, arch, work), sass(nvcc, cuobjdump, b, arch, work)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        return row | {"identical": False, "error": str(exc)}
    row["functions"] = len(old)
    row["instructions"] = sum(body.count("/*0") for body in old.values())
    row["identical"] = old == new
    if not row["identical"]:
        row["differing_functions"] = sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="render_digests.py --sources folder at the old commit")
    parser.add_argument("after", type=Path, help="the same at the new commit")
    parser.add_argument("--per-kind", type=int, default=3, help="pairs compiled per kind of configuration")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, help="write the result JSON here")
    args = parser.parse_args()
    nvcc, cuobjdump = find_cuda_tool("nvcc"), find_cuda_tool("cuobjdump")
    if nvcc is None or cuobjdump is None:
        raise SystemExit("error: nvcc and cuobjdump are needed (the CUDA toolkit)")
    kinds = differing_pairs(args.before, args.after)
    chosen = [pair for pairs in kinds.values() for pair in spread(pairs, args.per_kind)]
    print(f"{sum(map(len, kinds.values()))} differing sources in {len(kinds)} kinds; compiling {len(chosen)} pairs")
    with tempfile.TemporaryDirectory() as work, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda pair: compare(nvcc, cuobjdump, pair, args.arch, Path(work)), chosen))
    for row in rows:
        if not row["identical"]:
            print(f"DIFFERS {row['task']} {row['configuration']}: {row.get('error') or row['differing_functions']}")
    summary = {
        "differing_sources": sum(map(len, kinds.values())),
        "kinds": len(kinds),
        "pairs_compiled": len(rows),
        "identical_sass": sum(r["identical"] for r in rows),
        "functions_compared": sum(r.get("functions", 0) for r in rows),
        "by_kind": {k: len(v) for k, v in sorted(kinds.items())},
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        write_result(args.out, "sass_compare", head_commit(None), gpu=False, rows=rows, summary=summary, arch=args.arch)
    return 0 if summary["identical_sass"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
