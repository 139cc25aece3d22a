"""How much of KernelBench the template path (no LLM) turns into a kernel, on the CPU.

    PYTHONPATH=src python3 benchmarks/kernelbench_coverage.py /tmp/kernelbench/level1 /tmp/kernelbench/level2 \
        --seeds 2 --out coverage.json

For every problem file (a plain KernelBench file, or a folder of them) this records, stage by stage:

* ``loaded``   — :func:`optiml.task.load_task` accepted the file;
* ``traced``   — the op graph traced on the meta device (:func:`optiml.graph.capture.capture_all`);
* ``planned``  — the fusion planner and templates produced a plan (how many seeds, capped by ``--seeds``);
* ``rendered`` — every seed rendered to CUDA source;
* ``compiled`` — how many of the rendered seeds nvcc builds (one compile pool for every problem).

Nothing runs on a GPU: the kernels are compiled, never run. Each problem's load/trace/plan/render
happens in a child process under a memory limit (``--mem-gb``, address space) and a time limit
(``--timeout``), so a reference that materialises its KernelBench-sized inputs on the CPU fails
that one problem (a finding) instead of the machine.

A failure is *clean* when it is one of OptiML's one-line errors (``TaskError``, its
``UnsupportedOpError``, ``TemplateError``, …: an op or a shape no template covers). Anything
else — an ``AttributeError``/``KeyError``/``IndexError`` escaping the pipeline, a clean error
that merely wraps such a Python error, a child killed for memory or time, a rendered seed that
does not compile — is a *crash* and is flagged ``crash: true``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

STAGES = ("loaded", "traced", "planned", "rendered", "compiled")
# Python errors that mean a bug in OptiML when they escape (or are wrapped into a clean error)
_BUG_TYPES = (
    "AttributeError",
    "KeyError",
    "IndexError",
    "TypeError",
    "AssertionError",
    "UnboundLocalError",
    "NameError",
    "ZeroDivisionError",
    "RecursionError",
    "StopIteration",
)
_WRAPPED = re.compile(r"failed: (" + "|".join(_BUG_TYPES) + r")\b")
_NO_TEMPLATE = re.compile(r"no template for (aten\.[\w.]+)")


def _problem_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        found = sorted(path.glob("*.py")) if path.is_dir() else [path]
        files.extend(sorted(found, key=lambda p: (p.parent.name, _number(p.name), p.name)))
    return files


def _number(name: str) -> int:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else 10**9


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ---------------------------------------------------------------- child: load, trace, plan, render


def _probe(path: str, seeds: int, source_dir: str) -> dict[str, Any]:
    """Run the stages up to rendering for one problem; never raises."""
    row: dict[str, Any] = {"stage": None, "seeds": 0, "rendered": 0, "sources": [], "plan": ""}

    def fail(stage: str, exc: BaseException) -> dict[str, Any]:
        from optiml.errors import OptimlError

        message = _one_line(str(exc))
        clean = isinstance(exc, OptimlError) and not _WRAPPED.search(message)
        row["failure"] = {
            "stage": stage,
            "type": type(exc).__name__,
            "message": message,
            "crash": not clean,
        }
        return row

    try:
        from optiml.task import load_task

        task = load_task(path)
    except Exception as exc:
        return fail("load", exc)
    row["stage"] = "loaded"
    try:
        from optiml.graph.capture import capture_all

        graphs = capture_all(task)
    except Exception as exc:
        return fail("trace", exc)
    row["stage"] = "traced"
    row["ops"] = sorted({node.op for graph in graphs[:1] for node in graph.nodes})
    try:
        from optiml.templates.base import TemplateError
        from optiml.templates.kernels import TemplateKernels
        from optiml.templates.plan import make_plan

        try:
            kernels = TemplateKernels(task, make_plan(graphs))
        except TemplateError as exc:  # as template_kernels() words it
            raise TemplateError(f"{task.path.name}: {exc}") from None
        row["plan"] = _one_line(kernels.describe(), 400)
        configs = kernels.seeds(seeds)
    except Exception as exc:
        return fail("plan", exc)
    row["stage"] = "planned"
    row["seeds"] = len(configs)
    for index, config in enumerate(configs):
        try:
            source = kernels.render(config)
        except Exception as exc:
            return fail("render", exc)
        out = Path(source_dir) / f"{Path(path).stem}.{index}.cu"
        out.write_text(source.to_file_text(), encoding="utf-8")
        row["sources"].append(str(out))
        row["rendered"] += 1
    row["stage"] = "rendered"
    return row


def _limit_memory(gigabytes: float) -> Any:
    def apply() -> None:
        limit = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _run_child(path: Path, args: argparse.Namespace, source_dir: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--probe", str(path), "--seeds", str(args.seeds), "--sources", source_dir]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            preexec_fn=_limit_memory(args.mem_gb),
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        )
    except subprocess.TimeoutExpired:
        row: dict[str, Any] = {"stage": None, "seeds": 0, "rendered": 0, "sources": []}
        row["failure"] = {
            "stage": "probe",
            "type": "Timeout",
            "message": f"load/trace/plan/render took over {args.timeout:g} s",
            "crash": True,
        }
        row["seconds"] = round(time.perf_counter() - start, 2)
        return row
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = _one_line(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
        memory = "MemoryError" in done.stderr or done.returncode in (-9, 137)
        row = {"stage": None, "seeds": 0, "rendered": 0, "sources": []}
        row["failure"] = {
            "stage": "probe",
            "type": "MemoryLimit" if memory else f"ChildExit{done.returncode}",
            "message": tail,
            "crash": True,
        }
    else:
        row = json.loads(lines[-1])
    row["seconds"] = round(time.perf_counter() - start, 2)
    return row


# ---------------------------------------------------------------- parent: sweep, compile, summarise


def _compile_all(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.kernel.source import KernelSource

    config = CompilerConfig(arch=args.arch, jobs=args.jobs or 0)
    if args.cache_dir:
        config = CompilerConfig(arch=args.arch, jobs=args.jobs or 0, cache_dir=Path(args.cache_dir))
    compiler = Compiler(config)
    try:
        flat = [(row, KernelSource.from_file(src)) for row in rows for src in row.get("sources", [])]
        results = compiler.compile_many([k for _, k in flat])
    finally:
        compiler.close()
    for row in rows:
        row["compiled"] = 0
    for (row, _), result in zip(flat, results, strict=True):
        if result.ok:
            row["compiled"] += 1
        elif "failure" not in row:
            first = next((d.message for d in result.diagnostics if getattr(d, "severity", "") == "error"), "")
            message = first or (result.log.strip().splitlines() or ["nvcc failed"])[-1]
            row["failure"] = {"stage": "compile", "type": "CompileError", "message": _one_line(message), "crash": True}
    for row in rows:
        if row.get("sources") and row["compiled"] == len(row["sources"]):
            row["stage"] = "compiled"


def _op_family(failure: dict[str, Any]) -> str:
    """A short key naming what blocked a problem (the unsupported op, else the message's gist)."""
    message = failure["message"]
    hit = _NO_TEMPLATE.search(message)
    if hit:
        return hit.group(1)
    message = re.sub(r"^[\w.-]+\.py: ", "", message)
    message = re.sub(r"\d+", "N", message)
    return f"{failure['stage']}: {failure['type']}: {message[:90]}"


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_level: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        by_level[row["level"]].append(row)
    summary: dict[str, Any] = {}
    for level, items in sorted(by_level.items()):
        reached = {stage: 0 for stage in STAGES}
        for row in items:
            stage = row.get("stage")
            if stage in STAGES:
                for s in STAGES[: STAGES.index(stage) + 1]:
                    reached[s] += 1
        failures = [row["failure"] for row in items if "failure" in row]
        summary[level] = {
            "problems": len(items),
            **reached,
            "seeds_compiled": sum(row.get("compiled", 0) for row in items),
            "seeds_rendered": sum(row.get("rendered", 0) for row in items),
            "crashes": sum(1 for f in failures if f["crash"]),
            "failed_at": dict(collections.Counter(f["stage"] for f in failures)),
            "top_blockers": collections.Counter(_op_family(f) for f in failures).most_common(15),
        }
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("paths", nargs="*", help="KernelBench problem files or folders of them")
    parser.add_argument("--seeds", type=int, default=2, help="seed configurations per problem (default 2)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for one problem's load..render")
    parser.add_argument("--mem-gb", type=float, default=8.0, help="address-space limit of a problem's child")
    parser.add_argument("--jobs", type=int, default=0, help="parallel children and nvcc jobs (0: CPUs)")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--cache-dir", default="", help="compile cache (default: OptiML's)")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write the table and summary as JSON")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    parser.add_argument("--sources", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.probe:  # the child
        print(json.dumps(_probe(args.probe, args.seeds, args.sources)), flush=True)
        return 0

    files = _problem_files(args.paths)
    if not files:
        parser.error("no problem files")
    jobs = args.jobs or os.cpu_count() or 1
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kb_cov_") as source_dir:
        with ThreadPoolExecutor(jobs) as pool:
            rows = list(pool.map(lambda p: _run_child(p, args, source_dir), files))
        for path, row in zip(files, rows, strict=True):
            row["problem"] = path.stem
            row["level"] = path.parent.name
        if not args.no_compile:
            _compile_all(rows, args)
        for row in rows:
            row.pop("sources", None)
            failure = row.get("failure")
            status = row.get("stage") or "-"
            counts = (
                f"seeds {row.get('seeds', 0)} rendered {row.get('rendered', 0)} compiled {row.get('compiled', '-')}"
            )
            note = ""
            if failure:
                flag = "CRASH " if failure["crash"] else ""
                note = f"{flag}{failure['stage']} {failure['type']}: {failure['message'][:150]}"
            print(f"{row['level']:7s} {row['problem'][:48]:48s} {status:9s} {counts:34s} {note}", flush=True)
    summary = summarise(rows)
    print()
    for level, info in summary.items():
        stages = "  ".join(f"{s} {info[s]}" for s in STAGES)
        print(f"{level}: {info['problems']} problems  {stages}  crashes {info['crashes']}")
        for key, count in info["top_blockers"]:
            print(f"    {count:3d}  {key}")
    print(f"({time.perf_counter() - start:.0f} s)")
    if args.out:
        payload = {"summary": summary, "rows": rows}
        args.out.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
