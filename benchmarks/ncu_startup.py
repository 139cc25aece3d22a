"""Where a lone ncu launch's seconds go, and whether ncu reports a process before the launch ends.

Each probe runs ``ncu --csv --page raw --profile-from-start off`` (the profiler's flags, one cheap
metric) over a bare Python child (``python -I -S``, ctypes only) and stamps every line ncu and the
child print with the seconds since the launch began:

* ``version``   — ``ncu --version`` alone: the tool's own start;
* ``bare``      — a child that does nothing (no CUDA): ncu's start plus a process it injects into;
* ``context``   — the child creates the primary CUDA context and exits;
* ``context_plain`` — the same child without ncu;
* ``one``       — the child profiles one marker kernel (as the light target profiles a candidate);
* ``two_ranges``— one child profiles a marker, sleeps ``--gap`` s, profiles another: do the first
  kernel's rows appear before the child exits?
* ``two_children`` — a parent (``--target-processes all``) runs two such children one after the
  other with a gap: do the first child's rows appear before the second starts?

The answers decide whether one long-lived ncu launch can serve a whole search.

    PYTHONPATH=src python3 benchmarks/ncu_startup.py --out benchmarks/results/ncu_startup.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.profile.light_target import MARKER_NAME, MARKER_PTX
from optiml.profile.ncu import find_ncu

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import ctypes, subprocess, sys, time
mode = sys.argv[1]
gap = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
def say(what):
    print(f"child {what}", file=sys.stderr, flush=True)
if mode == "spawn":
    for index in range(2):
        say(f"spawn {index}")
        subprocess.run([sys.executable, "-I", "-S", sys.argv[0], "one"], check=True)
        time.sleep(gap)
    say("parent done")
    sys.exit(0)
if mode == "bare":
    sys.exit(0)
cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
assert cuda.cuInit(0) == 0
device, context = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) == 0
assert cuda.cuCtxSetCurrent(context) == 0
say("context")
if mode == "context":
    sys.exit(0)
module, function = ctypes.c_void_p(), ctypes.c_void_p()
assert cuda.cuModuleLoadData(ctypes.byref(module), PTX.encode() + b"\0") == 0
assert cuda.cuModuleGetFunction(ctypes.byref(function), module, NAME.encode()) == 0
for index in range(2 if mode == "two_ranges" else 1):
    cuda.cuProfilerStart()
    assert cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, None, None) == 0
    assert cuda.cuCtxSynchronize() == 0
    cuda.cuProfilerStop()
    say(f"profiled {index}")
    if mode == "two_ranges" and index == 0:
        time.sleep(gap)
say("exit")
"""


def stamped_run(command: list[str], timeout: float = 120.0) -> dict[str, Any]:
    """Run ``command``; every line of its stdout and stderr with the seconds since it started."""
    start = time.perf_counter()
    lines: list[tuple[float, str, str]] = []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read(stream: Any, name: str) -> None:
        for line in stream:
            lines.append((round(time.perf_counter() - start, 3), name, line.rstrip()[:200]))

    readers = [
        threading.Thread(target=read, args=(s, n)) for s, n in ((process.stdout, "out"), (process.stderr, "err"))
    ]
    for reader in readers:
        reader.start()
    returncode = process.wait(timeout)
    for reader in readers:
        reader.join()
    wall = time.perf_counter() - start
    lines.sort()
    rows = [t for t, name, text in lines if name == "out" and text.startswith('"') and MARKER_NAME in text]
    return {
        "wall_s": round(wall, 3),
        "returncode": returncode,
        "marker_rows_at_s": rows,
        "child_events": [(t, text) for t, name, text in lines if text.startswith("child ")],
        "prof_lines": [(t, text) for t, name, text in lines if text.startswith("==")][:12],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ncu_startup.json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gap", type=float, default=3.0)
    parser.add_argument("--commit", default="unknown")
    args = parser.parse_args()
    ncu = find_ncu()
    if ncu is None:
        sys.exit("ncu not found")
    folder = Path(tempfile.mkdtemp(prefix="optiml-ncu-probe-"))
    child = folder / "child.py"
    child.write_text(f"PTX = {MARKER_PTX!r}\nNAME = {MARKER_NAME!r}\n" + CHILD, encoding="utf-8")
    base = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--profile-from-start", "off"]
    base += ["--metrics", "gpu__time_duration.sum"]
    python = [sys.executable, "-I", "-S", str(child)]
    probes: dict[str, list[str]] = {
        "version": [ncu, "--version"],
        "bare": [*base, *python, "bare"],
        "context": [*base, *python, "context"],
        "context_plain": [*python, "context"],
        "one": [*base, *python, "one"],
        "two_ranges": [*base, *python, "two_ranges", str(args.gap)],
        "two_children": [*base[:1], "--target-processes", "all", *base[1:], *python, "spawn", str(args.gap)],
    }
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in probes}
    for _ in range(args.repeats):
        for name, command in probes.items():
            result = stamped_run(command)
            results[name].append(result)
            print(name, json.dumps(result), flush=True)
    summary = {name: sorted(r["wall_s"] for r in runs)[len(runs) // 2] for name, runs in results.items()}
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    write_result(
        args.out,
        "ncu_startup",
        args.commit,
        gpu=True,
        ncu=ncu,
        ncu_version=version[-1] if version else None,
        probes=results,
        median_wall_s=summary,
    )
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
