"""The rendered sources of every template seed, as digests: the proof that a refactor changed nothing.

    PYTHONPATH=src python3 benchmarks/render_digests.py tasks /tmp/kernelbench/level1 /tmp/kernelbench/level2 \
        --out benchmarks/results/render_digests.json
    PYTHONPATH=src python3 benchmarks/render_digests.py tasks ... --compare benchmarks/results/render_digests.json

For every task file (a file, or a folder searched recursively for ``*.py``) this traces and plans it on
the CPU (:func:`optiml.templates.kernels.template_kernels`), renders each seed configuration and each
single structural edit of the first seed (:meth:`TemplateKernels.neighbours`: variant switches and knob
steps), and records the SHA-256 of every rendered source, keyed by the configuration it came from. A task
the planner refuses records its one-line message. Nothing is compiled and nothing runs on a GPU.

With ``--compare``, the run is checked against an earlier table: every task whose plan, configurations or
digests differ is printed, and the exit status is 1 when any does. Each task runs in a child process of a
pool, under a time limit, so a problem that materialises huge inputs costs that task only.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

RENDER_TIMEOUT_S = 120.0


def task_files(roots: list[str]) -> dict[str, Path]:
    """The task files under ``roots``, each named by its root's folder name and its path below it
    (``level1/19_ReLU.py``: the same wherever KernelBench lies); names starting with ``_`` are not tasks."""
    files: dict[str, Path] = {}
    for root in map(Path, roots):
        found = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for path in found:
            if not path.name.startswith("_"):
                files[f"{root.name}/{path.relative_to(root)}" if root.is_dir() else path.name] = path
    return files


def config_key(configs: list[Any]) -> str:
    """One configuration list as text: each kernel's variant and knobs."""
    return " | ".join(c.label() for c in configs)


def digest_task(path: str, neighbours: bool = True, keep_sources: bool = False) -> dict[str, Any]:
    """The plan and the digests of one task (its seeds, and with ``neighbours`` every single structural
    edit of the first seed), or the planner's refusal; with ``keep_sources`` the rendered sources too
    (under ``"sources"``, by configuration)."""
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    try:
        kernels = template_kernels(load_task(path))
    except Exception as exc:  # a refusal is a row, as is a crash: both must survive a refactor unchanged
        return {"status": "refused", "message": f"{type(exc).__name__}: {exc}"}
    renders: dict[str, str] = {}
    sources: dict[str, str] = {}
    seeds = kernels.seeds()
    configs = [
        *seeds,
        *(
            [*seeds[0][: m.group], m.config, *seeds[0][m.group + 1 :]]
            for m in (kernels.neighbours(seeds[0]) if neighbours else [])
        ),
    ]
    for config in configs:
        key = config_key(config)
        try:
            source = kernels.render(config)
            text = source.code + "\0" + "\0".join(source.flags)
            renders[key] = hashlib.sha256(text.encode()).hexdigest()
            if keep_sources:
                sources[key] = source.code
        except Exception as exc:
            renders[key] = f"error {type(exc).__name__}: {exc}"
    return {
        "status": "planned",
        "plan": kernels.describe(),
        "seeds": [config_key(s) for s in seeds],
        "renders": renders,
        **({"sources": sources} if keep_sources else {}),
    }


def write_sources(folder: Path, table: dict[str, Any]) -> None:
    """Each task's rendered sources as ``folder/<n>.cu``, and ``folder/manifest.json``: task → configuration →
    file name (what ``benchmarks/sass_compare.py`` pairs up across two checkouts)."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict[str, str]] = {}
    for name, record in sorted(table.items()):
        for key, code in sorted(record.pop("sources", {}).items()):
            file = f"{sum(map(len, manifest.values()))}.cu"
            (folder / file).write_text(code, encoding="utf-8")
            manifest.setdefault(name, {})[key] = file
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per task whose record differs between two tables (tasks in only one are named too)."""
    lines = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if before is None or after is None:
            lines.append(f"{name}: only in the {'new' if before is None else 'old'} table")
        elif before["status"] != after["status"] or before.get("message") != after.get("message"):
            lines.append(
                f"{name}: {before['status']} {before.get('message', '')} → {after['status']} {after.get('message', '')}"
            )
        else:
            changed = [
                k
                for k in set(before["renders"]) | set(after["renders"])
                if before["renders"].get(k) != after["renders"].get(k)
            ]
            parts = [f"{len(changed)} render(s) differ, first: {sorted(changed)[0]}" if changed else ""]
            if before["plan"] != after["plan"]:
                parts.append("the plan differs")
            if before["seeds"] != after["seeds"]:
                parts.append("the seeds differ")
            lines.append(f"{name}: {'; '.join(p for p in parts if p)}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="task files or folders")
    parser.add_argument("--out", type=Path, help="write the table here")
    parser.add_argument("--compare", type=Path, help="an earlier table: exit 1 when anything differs")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--seeds-only", action="store_true", help="the seeds' sources only, not every single edit of the first"
    )
    parser.add_argument("--sources", type=Path, help="also write every rendered source to this folder")
    args = parser.parse_args()
    table: dict[str, Any] = {}
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        files = task_files(args.roots)
        futures = {
            name: pool.submit(digest_task, str(path), not args.seeds_only, args.sources is not None)
            for name, path in files.items()
        }
        for name, future in futures.items():
            try:
                table[name] = future.result(timeout=RENDER_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                table[name] = {"status": "timeout", "message": f"over {RENDER_TIMEOUT_S:g} s"}
    if args.sources:
        write_sources(args.sources, table)
    planned = sum(r["status"] == "planned" for r in table.values())
    renders = sum(len(r.get("renders", {})) for r in table.values())
    print(f"{len(table)} tasks, {planned} planned, {renders} rendered configurations")
    if args.out:
        args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    if args.compare:
        lines = differences(json.loads(args.compare.read_text()), table)
        print("\n".join(lines) if lines else "identical: every plan, configuration and rendered source")
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
