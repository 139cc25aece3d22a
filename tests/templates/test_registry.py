"""The template families: one registry, one folder each, no reaching into each other (docs/templates.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from optiml.templates.base import TemplateError
from optiml.templates.registry import PACKAGES, dedicated_op_classes, families, family, served

TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "optiml" / "templates"
#: what a family package may import besides the core: its own modules, the shared product pieces, and
#: (conv only) the GEMM family's public tensor-core kernel modules
SHARED = {"product"}
ALLOWED_EDGES = {("conv", "gemm")}


def test_every_group_template_has_one_family() -> None:
    names = [name for f in families() for name in f.serves]
    assert len(names) == len(set(names))
    assert set(names) == {
        "pointwise",
        "reduce",
        "scan",
        "pool",
        "permute",
        "cat",
        "slice",
        "gemm",
        "conv",
        "recurrent",
        "triangular",
        "index",
    }
    assert family("slice").name == "cat"
    assert served("product") == ("gemm", "conv")
    assert set(served("row")) == {"pointwise", "reduce"}
    assert set(dedicated_op_classes()) == {
        "scan",
        "flip",
        "pool",
        "permute",
        "cat",
        "slice",
        "recurrent",
        "triangular",
        "index",
    }
    with pytest.raises(TemplateError, match="no template family 'sort'"):
        family("sort")


def test_each_family_lists_its_variants() -> None:
    for f in families():
        assert f.variants and len(set(f.variants)) == len(f.variants), f.name
        assert f.kind in ("row", "dedicated", "product"), f.name
        assert (f.kind == "dedicated") == bool(f.op_classes), f.name


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["optiml", "templates"] or len(parts) < 3:
        return None
    return parts[2] if (TEMPLATES / parts[2]).is_dir() else None


def test_families_do_not_reach_into_each_other_and_the_core_imports_none() -> None:
    folders = {p.name for p in TEMPLATES.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert set(PACKAGES) | SHARED == folders
    for path in TEMPLATES.rglob("*.py"):
        own = path.parent.name if path.parent != TEMPLATES else None
        for module in _imports(path):
            other = _package_of(module)
            if other is None or other == own:
                continue
            if own is None:
                raise AssertionError(f"core module {path.name} imports the family {module}")
            if other in SHARED or (own, other) in ALLOWED_EDGES:
                assert not module.rsplit(".", 1)[-1].startswith("_"), f"{path}: private {module}"
                continue
            raise AssertionError(f"{path.relative_to(TEMPLATES)} imports {module} (another family)")
