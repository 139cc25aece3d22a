"""The layering of src/optiml, kept true: which part may import which (see docs/architecture.md).

A *part* is a subpackage (``search``) or a top-level module (``store``). Every import between two
parts must be in :data:`MAY_IMPORT`, or be one of the :data:`KNOWN_VIOLATIONS`, each with the
reason it is there; a known violation that is gone fails too, so that list only shrinks.
Imports inside functions count: they are dependencies all the same.

Run as a script to list today's imports between parts and where they are::

    python tests/test_architecture.py
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "optiml"

#: part -> the parts it may import, bottom to top. Foundations import nothing of ours but ``errors``.
MAY_IMPORT: dict[str, frozenset[str]] = {
    name: frozenset(deps)
    for name, deps in {
        # foundations
        "errors": (),
        "cache_dirs": (),
        "cuda_tools": (),
        "code_blocks": (),
        "config_file": (),
        "redact": (),
        "sqlite_db": ("errors",),
        "values": (),
        "task": ("errors",),
        # which arithmetic PyTorch's defaults give each convolution (measured by the worker, read by the planner)
        "conv_arithmetic": (),
        "task_runtime": ("errors", "task", "conv_arithmetic"),
        # what screens and sandboxes a candidate (it reads a source through its own protocol, not
        # optiml.kernel's class); a candidate and what builds it (in integrity's compile sandbox)
        "integrity": ("errors", "task", "redact"),
        "kernel": ("errors", "values", "task", "task_runtime", "integrity", "cache_dirs", "cuda_tools"),
        "peaks": ("kernel", "integrity", "cache_dirs"),
        # the op graph and the templates instantiated over it
        "graph": ("errors", "task", "task_runtime", "conv_arithmetic"),
        "templates": ("errors", "task", "graph", "kernel", "conv_arithmetic"),
        # measuring a candidate
        "evaluate": (
            "errors",
            "values",
            "task",
            "task_runtime",
            "conv_arithmetic",
            "kernel",
            "integrity",
            "peaks",
            "redact",
        ),
        "profile": ("errors", "values", "task", "kernel", "integrity", "peaks", "evaluate", "cuda_tools"),
        # asking for candidates
        "llm": ("errors", "config_file"),
        "propose": ("errors", "values", "task", "kernel", "templates", "llm", "code_blocks", "redact"),
        # keeping and searching
        "store": ("errors", "values", "kernel", "sqlite_db", "redact"),
        "search": ("errors", "values", "task", "kernel", "evaluate", "propose", "templates", "store"),
        "generate": (
            "errors",
            "values",
            "task",
            "kernel",
            "integrity",
            "evaluate",
            "templates",
            "llm",
            "code_blocks",
            "config_file",
            "sqlite_db",
        ),
        # using the results
        "export": ("errors", "task", "task_runtime", "kernel", "evaluate", "store", "cache_dirs"),
        # assembling the parts of a run, and the one optimize workflow over them
        "session": ("errors", "values", "task", "kernel", "evaluate", "profile", "propose", "llm", "store"),
        "workflow": ("task", "kernel", "evaluate", "generate", "search", "store", "session"),
        # whole suites, reports, the machine; the command line on top
        "bench": ("errors", "task", "conv_arithmetic", "kernel", "search", "store", "export", "session", "workflow"),
        "report": ("errors", "values", "task", "kernel", "profile", "search", "bench", "store", "llm"),
        "doctor": ("errors", "kernel", "integrity", "cuda_tools"),
        "cli": (
            "errors",
            "values",
            "llm",
            "task",
            "kernel",
            "integrity",  # Ctrl-C ends what a command started (integrity.children)
            "evaluate",
            "profile",
            "propose",
            "search",
            "generate",
            "bench",
            "store",
            "export",
            "report",
            "doctor",
            "session",
            "workflow",
        ),
    }.items()
}

#: (importing module, imported part) -> why it is allowed for now, and what would remove it.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}  # none today: a new one says why here

#: Terminal presentation (rich) lives under the CLI; domain parts return data.
PRESENTATION = ("rich",)
PRESENTERS = frozenset({"cli"})
KNOWN_PRESENTERS: dict[str, str] = {}

#: The CLI parses, calls and presents; optiml.session assembles these parts (issue 17.3).
ASSEMBLED = {
    "optiml.kernel.compiler": {"Compiler", "CompilerConfig"},
    "optiml.evaluate.evaluator": {"Evaluator"},
    "optiml.profile": {"Profiler"},
    "optiml.profile.profiler": {"Profiler"},
}

#: What optiml.session assembles, by the part defining it: no other module calls these constructors (nor
#: ``EvaluationCache.of``), so every command, the bench and the workflow get their parts built one way.
SESSION_BUILDS = {
    "Compiler": "kernel",
    "CompilerConfig": "kernel",
    "Evaluator": "evaluate",
    "EvaluationCache": "evaluate",
    "EvaluationCache.of": "evaluate",
    "GPUPool": "evaluate",
    "WorkerClient": "evaluate",
    "Profiler": "profile",
}
ASSEMBLER = "optiml.session"

#: (module, constructor) -> why that module builds a part itself (outside its own part).
KNOWN_ASSEMBLERS: dict[tuple[str, str], str] = {
    ("optiml.evaluate.evaluator", "Compiler"): "the Evaluator's default for scripts and tests; the session passes one",
    ("optiml.evaluate.evaluator", "CompilerConfig"): "the same default compiler's configuration",
    ("optiml.generate.pipeline", "EvaluationCache.of"): (
        "a generation judges each source once even when handed a bare evaluator (adapt, generate); "
        "the session's cache is kept as it is"
    ),
}

#: What the GPU worker process may load besides the standard library, NumPy and PyTorch.
ORCHESTRATOR_ONLY = ("rich", "typer", "jinja2", "openai", "anthropic", "httpx", "ray", "sqlite3")


@dataclass(frozen=True)
class Import:
    importer: str  # module that imports, e.g. optiml.search.engine
    module: str  # module imported, e.g. optiml.values
    names: tuple[str, ...]  # names taken from it (from-imports)
    line: int

    @property
    def where(self) -> str:
        return f"{self.importer}:{self.line}"


def part(module: str) -> str:
    """``optiml.search.engine`` -> ``search``; ``optiml.store`` -> ``store``."""
    return module.split(".")[1] if module.count(".") else module


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> Iterator[Import]:
    """Every import statement under src/optiml (absolute, or relative resolved against its package)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = module_name(path)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(importer, alias.name, (), node.lineno)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                yield Import(importer, base, tuple(a.name for a in node.names), node.lineno)


def cross_part_imports() -> list[Import]:
    return [
        i
        for i in imports()
        if i.module.startswith("optiml.") and i.importer.count(".") and part(i.module) != part(i.importer)
    ]


def violations() -> list[Import]:
    return [
        i
        for i in cross_part_imports()
        if part(i.module) not in MAY_IMPORT.get(part(i.importer), frozenset())
        and (i.importer, part(i.module)) not in KNOWN_VIOLATIONS
    ]


def test_every_part_has_a_place_in_the_table() -> None:
    parts = {part(module_name(p)) for p in PACKAGE.rglob("*.py")} - {"optiml"}
    assert parts - MAY_IMPORT.keys() == set(), "a new part: add it to MAY_IMPORT and docs/architecture.md"
    assert MAY_IMPORT.keys() - parts == set(), "a part in the table no longer exists"


def test_imports_between_parts_follow_the_table() -> None:
    found = [f"{i.where} imports {i.module}" for i in violations()]
    assert found == [], "imports against docs/architecture.md's layering:\n" + "\n".join(found)


def test_the_table_lists_no_dependency_that_is_not_used() -> None:
    used: dict[str, set[str]] = defaultdict(set)
    for i in cross_part_imports():
        used[part(i.importer)].add(part(i.module))
    unused = {p: sorted(deps - used[p]) for p, deps in MAY_IMPORT.items() if deps - used[p]}
    assert unused == {}, "MAY_IMPORT allows imports nobody makes: tighten it"


def test_known_violations_still_exist() -> None:
    present = {(i.importer, part(i.module)) for i in cross_part_imports()}
    gone = sorted(set(KNOWN_VIOLATIONS) - present)
    assert gone == [], f"fixed, so remove from KNOWN_VIOLATIONS: {gone}"


def test_terminal_presentation_lives_under_the_cli() -> None:
    found = sorted(
        {
            i.importer
            for i in imports()
            if i.module.split(".")[0] in PRESENTATION
            and part(i.importer) not in PRESENTERS
            and i.importer not in KNOWN_PRESENTERS
        }
    )
    assert found == [], f"rendering outside optiml.cli: {found}"
    stale = sorted(
        m for m in KNOWN_PRESENTERS if not any(i.importer == m and i.module.startswith("rich") for i in imports())
    )
    assert stale == [], f"no longer render: remove from KNOWN_PRESENTERS: {stale}"


def test_the_cli_builds_no_part_by_hand() -> None:
    found = [
        f"{i.where} imports {sorted(set(i.names) & ASSEMBLED[i.module])} from {i.module}"
        for i in imports()
        if part(i.importer) == "cli" and i.module in ASSEMBLED and set(i.names) & ASSEMBLED[i.module]
    ]
    assert found == [], "the CLI assembles parts itself; ask optiml.session for them:\n" + "\n".join(found)


def test_the_documented_table_is_the_enforced_one() -> None:
    """docs/architecture.md's table says what MAY_IMPORT enforces, part by part (``cli``: everything above)."""
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## The parts, bottom to top", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, frozenset[str]] = {}
    for row in re.finditer(r"^\| (`[^|]+`) \| .* \| ([^|]+) \|$", section, re.MULTILINE):
        deps = row[2].strip()
        for name in re.findall(r"`(\w+)`", row[1]):
            documented[name] = frozenset() if deps == "—" else frozenset(d.strip() for d in deps.split(","))
    assert documented.keys() == MAY_IMPORT.keys()
    differ = {p: (sorted(documented[p]), sorted(deps)) for p, deps in MAY_IMPORT.items() if p != "cli"
              if documented[p] != deps}  # fmt: skip
    assert differ == {}, "docs/architecture.md (first) and MAY_IMPORT (second) disagree"


def test_the_table_is_a_stack() -> None:
    """No part may import, through any chain of the table, a part that may import it: each has one place."""
    cycles = []
    for start in MAY_IMPORT:
        seen: set[str] = set()
        todo = list(MAY_IMPORT[start])
        while todo:
            dep = todo.pop()
            if dep == start:
                cycles.append(start)
                break
            if dep not in seen:
                seen.add(dep)
                todo.extend(MAY_IMPORT.get(dep, ()))
    assert cycles == [], f"parts that may import themselves through the table: {sorted(cycles)}"


def assemblies(tree: ast.AST, module: str) -> Iterator[tuple[str, int]]:
    """(constructor, line) for every call in ``tree`` of what only the session builds, where ``module``
    may not build it: outside optiml.session, the constructor's own part and :data:`KNOWN_ASSEMBLERS`."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr == "of":
            name = f"{func.value.id}.of"
        owner = SESSION_BUILDS.get(name)
        if owner is None or module == ASSEMBLER or part(module) == owner or (module, name) in KNOWN_ASSEMBLERS:
            continue
        yield name, node.lineno


def test_only_the_session_assembles_compilers_evaluators_caches_and_profilers() -> None:
    found = [
        f"{module_name(path)}:{line} builds {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, line in assemblies(ast.parse(path.read_text(encoding="utf-8")), module_name(path))
    ]
    assert found == [], "parts assembled by hand; ask optiml.session for them:\n" + "\n".join(found)
    calls = {(module_name(p), name) for p in PACKAGE.rglob("*.py") for name in _calls(p)}
    stale = sorted(set(KNOWN_ASSEMBLERS) - calls)
    assert stale == [], f"no longer built there: remove from KNOWN_ASSEMBLERS: {stale}"


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            names.add(f"{node.func.value.id}.{node.func.attr}")
    return names


def test_the_assembly_rule_sees_a_part_built_by_hand() -> None:
    """The rule above, on a bench that builds its own evaluator and cache (what optiml bench did)."""
    code = (
        "from optiml.evaluate.evaluator import Evaluator\n"
        "evaluator = Evaluator(task, EvalConfig(), compiler=Compiler(CompilerConfig()), worker=worker)\n"
        "costs = EvaluationCache(evaluator)\n"
        "cached = EvaluationCache.of(evaluator)\n"
    )
    found = sorted(assemblies(ast.parse(code), "optiml.bench.runner"))
    assert found == [("Compiler", 2), ("CompilerConfig", 2), ("EvaluationCache", 3), ("EvaluationCache.of", 4),
                     ("Evaluator", 2)]  # fmt: skip
    assert list(assemblies(ast.parse(code), ASSEMBLER)) == []
    assert [n for n, _ in assemblies(ast.parse(code), "optiml.evaluate.gpu_pool")] == ["Compiler", "CompilerConfig"]


def test_the_gpu_worker_loads_no_orchestrator_library() -> None:
    code = "import json, sys, optiml.evaluate.worker; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = {m.split(".")[0] for m in json.loads(out.stdout)}
    assert loaded & set(ORCHESTRATOR_ONLY) == set()


def direct_optiml_errors() -> dict[str, str]:
    """Every class deriving from OptimlError directly: name -> the module defining it (read from the AST)."""
    found: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and "OptimlError" in {ast.unparse(b).split(".")[-1] for b in node.bases}:
                found[node.name] = module_name(path)
    return found


def test_the_exception_tree_names_every_optiml_error() -> None:
    doc = (PACKAGE / "errors.py").read_text(encoding="utf-8").split('"""')[1]
    drawn = set(re.findall(r"[├└]── (\w+)", doc))
    missing = sorted(f"{name} ({module})" for name, module in direct_optiml_errors().items() if name not in drawn)
    assert missing == [], "add to the tree in optiml/errors.py's docstring: " + ", ".join(missing)


def main() -> None:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for i in cross_part_imports():
        edges[(part(i.importer), part(i.module))].append(i.where)
    for (src, dst), where in sorted(edges.items()):
        allowed = dst in MAY_IMPORT.get(src, frozenset())
        print(f"{src} -> {dst}{'' if allowed else '   NOT IN THE TABLE'}: {' '.join(where)}")


if __name__ == "__main__":
    main()
