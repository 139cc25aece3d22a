"""Can CUDA start inside the candidate sandbox, started from here? (issue 39) Many starts at once, both ways.

Each start runs ``python -I -S`` that loads ``libcudart`` and calls ``cudaSetDevice(0)`` and
``cudaMemGetInfo``, wrapped in the candidate sandbox (``optiml.integrity.candidate_sandbox``:
own user, pid, network, IPC and mount namespaces, the candidate's view) or not, ``--concurrency``
at a time. Per setup: how many failed, with what CUDA error, how long the slowest start took, and what
a start saw (entries of ``/sys``, ``/proc/driver/nvidia``, ``/dev``, ``/dev/shm``, ``/proc``; which
device nodes it could open; its uid).

In the product the judge starts candidates from inside its own sandbox (``optiml.integrity.sandbox``);
this probe starts them from the calling process, i.e. as a judge on a host without the judge's sandbox
would. Measured (H100, 2026-12-05, ``sandbox_cuda_probe_h100.json`` and ``sandbox_cuda_probe_h100_2.json``,
run as root): with a view of only the driver's ``/proc/driver/nvidia`` (or none of ``/proc``) every
sandboxed start failed with CUDA error 304 (cudaErrorOperatingSystem) — device nodes all opened, uid
65534 — at any concurrency, while every unconfined start worked. Drivers of the 570 series and later name
their threads through ``/proc/self/task/TID/comm`` while starting and fail with this error where they
cannot; the view now mounts a ``/proc`` of the candidate's own pid namespace (``sandboxed``), and
``sandboxed_driver_folder_only`` keeps the former view for comparison. ``nested`` starts the candidate sandbox
from inside the worker's sandbox (``optiml.integrity.sandbox``), as the judge does: there the candidate's own
``/proc`` needs the one the worker's jail keeps for it (``jail.keep_proc_for_nested_jails``).

    PYTHONPATH=src python3 benchmarks/sandbox_cuda_probe.py --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from result_file import head_commit, write_result

from optiml.evaluate import cudart
from optiml.integrity import candidate_sandbox, sandbox

ROOT = Path(__file__).resolve().parent.parent
SEEN = ("/sys", "/proc/driver/nvidia", "/dev", "/dev/shm", "/proc")
START = r"""
import ctypes, json, os, sys
runtime = ctypes.CDLL(sys.argv[1])
code = runtime.cudaSetDevice(0)
free, total = ctypes.c_size_t(), ctypes.c_size_t()
info = runtime.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) if code == 0 else -1
seen = {p: len(os.listdir(p)) if os.path.isdir(p) else -1 for p in json.loads(sys.argv[2])}
opens = {}
for name in sorted(os.listdir("/dev")):
    try:
        os.close(os.open("/dev/" + name, os.O_RDWR))
        opens[name] = "ok"
    except OSError as error:
        opens[name] = error.errno
print(json.dumps({"rc": code, "mem_info_rc": info, "seen": seen, "opens": opens, "uid": os.getuid()}))
"""


#: run inside the worker's sandbox: the candidate sandbox started from there, as the judge starts it
NESTED = r"""
import json, subprocess, sys
from pathlib import Path
from optiml.integrity import candidate_sandbox, sandbox
argv, view, root = json.loads(sys.argv[1]), json.loads(sys.argv[2]), Path.cwd()
candidate_sandbox.prepare(root / "candidate", root / "stage", view)
wrapped = candidate_sandbox.candidate_argv(argv, root / "candidate", root / "stage", view)
done = subprocess.run(wrapped, capture_output=True, text=True, timeout=100)
lines = done.stdout.strip().splitlines()
print(lines[-1] if lines else json.dumps({"rc": f"exit {done.returncode}", "stderr": done.stderr[-300:]}))
"""


def start(library: str, mode: str, view: tuple[str, ...]) -> dict[str, Any]:
    """One start of CUDA — ``mode`` "sandboxed" (the candidate sandbox, started from here), "nested" (the same,
    started from inside the worker's sandbox, as the judge starts candidates) or "unconfined" — what it
    returned and saw, and how long it took."""
    with tempfile.TemporaryDirectory(prefix="optiml-cuda-probe-") as scratch:
        root = Path(scratch)
        argv = [os.path.realpath(sys.executable), "-I", "-S", "-c", START, library, json.dumps(SEEN)]
        env = None
        if mode == "sandboxed":
            candidate_sandbox.prepare(root / "candidate", root / "stage", view)
            argv = candidate_sandbox.candidate_argv(argv, root / "candidate", root / "stage", view)
        elif mode == "nested":
            launch = sandbox.build_worker_launch(
                [sys.executable, "-c", NESTED, json.dumps(argv), json.dumps(list(view))],
                workdir=root,
                limits=sandbox.ResourceLimits(),
                extra_env={"PYTHONPATH": str(ROOT / "src")},
            )
            argv, env = launch.argv, launch.env
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=root)
        lines = done.stdout.strip().splitlines()
        if lines and lines[-1].startswith("{"):
            row: dict[str, Any] = json.loads(lines[-1])
        else:
            row = {"rc": f"exit {done.returncode}", "stderr": done.stderr[-300:]}
        row["seconds"] = round(time.perf_counter() - began, 2)
        return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,16", help="comma-separated starts at once")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sandbox_cuda_probe.json")
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    library = cudart.library_path()
    if library is None:
        raise SystemExit("error: no CUDA runtime library found: this probe starts CUDA")
    full = candidate_sandbox.candidate_view(candidate_sandbox.__file__, library)
    own_proc = candidate_sandbox.OPTIONAL + candidate_sandbox.OWN_PROC
    former = tuple(candidate_sandbox.OPTIONAL + "/proc/driver/nvidia" if p == own_proc else p for p in full)
    views = {  # the sandbox's view, and the former one: the driver's /proc folder instead of a /proc of its own
        "sandboxed": ("sandboxed", full),
        "nested": ("nested", full),
        "sandboxed_driver_folder_only": ("sandboxed", former),
        "unconfined": ("unconfined", ()),
    }
    setups: dict[str, Any] = {}
    for setup, (mode, view) in views.items():
        for concurrency in (int(v) for v in args.concurrency.split(",") if v):
            count = max(concurrency, 8)
            with ThreadPoolExecutor(concurrency) as pool:
                rows = list(pool.map(start, [library] * count, [mode] * count, [view] * count))
            failed = [row for row in rows if row["rc"] != 0]
            name = f"{setup}_{concurrency}_at_once"
            setups[name] = {
                "starts": len(rows),
                "failed": len(failed),
                "errors": sorted({str(row["rc"]) for row in failed}),
                "slowest_s": max(row["seconds"] for row in rows),
                "a_start": failed[0] if failed else rows[0],
            }
            print(name, json.dumps(setups[name])[:600], flush=True)
    write_result(args.out, "sandbox_cuda_probe", head_commit(args.commit), setups=setups)


if __name__ == "__main__":
    main()
