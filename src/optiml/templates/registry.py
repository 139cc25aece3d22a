"""The template families: which planned kernels each one serves, and how its template is made.

A *family* is one subpackage of :mod:`optiml.templates` (``row/``, ``scan/``, ``pool/``,
``permute/``, ``gemm/``, ``conv/``) whose ``__init__.py`` declares ``FAMILIES``: one
:class:`Family` per template it offers. The registry is read by the assembler
(:meth:`~optiml.templates.assemble.Templates.of`: a group's ``template`` name → its family's
template) and by the planner (:mod:`optiml.templates.plan`: which op classes get a kernel of their
own, which groups are row groups, which are products with a fused epilogue). A new family is one
folder and one entry in :data:`PACKAGES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from optiml.graph.sizes import SizeResolver
from optiml.templates.base import Template, TemplateError
from optiml.templates.group import Spec

#: The family packages under ``optiml.templates``; a new family is one more name here.
PACKAGES = ("row", "scan", "pool", "permute", "gemm", "conv", "recurrent", "triangular", "index")


@dataclass(frozen=True)
class Family:
    """One template family.

    ``serves``: the :attr:`Group.template <optiml.templates.group.Group.template>` names its template
    renders. ``make``: the template, given the task's size resolver (run-time sizes as C expressions;
    ``resolver.graphs`` are every shape set's graph). ``variants``: every variant its spaces can offer
    (a group's :meth:`~optiml.templates.base.Template.space` offers those that fit it, each with its
    knobs). ``kind``: how the planner forms its groups — ``"row"`` (element-wise ops and reductions
    fused by domain), ``"dedicated"`` (one node, or a folded chain, a kernel of its own: the op classes
    in ``op_classes``), ``"product"`` (a ``matmul`` / ``conv`` node plus its fused element-wise epilogue).
    ``spec``: the group's typed :attr:`~optiml.templates.group.Group.spec` from what the planner
    gathered (the node's attrs and the planner's facts: ``shape``, ``dims``, ``recomputable``, …).
    """

    name: str
    serves: tuple[str, ...]
    make: Callable[[SizeResolver], Template]
    variants: tuple[str, ...]
    kind: str  # "row" | "dedicated" | "product"
    op_classes: tuple[str, ...] = ()
    spec: Callable[[Mapping[str, Any]], Spec | None] = lambda gathered: None


@cache
def families() -> tuple[Family, ...]:
    """Every registered family, in :data:`PACKAGES` order (each package imported once, on first use)."""
    found: list[Family] = []
    for package in PACKAGES:
        found += importlib.import_module(f"optiml.templates.{package}").FAMILIES
    names = [name for family in found for name in family.serves]
    if len(names) != len(set(names)):
        raise TemplateError(f"internal: two families serve one group template ({sorted(names)})")
    return tuple(found)


def family(template: str) -> Family:
    """The family serving groups of ``template``; TemplateError when none does."""
    for candidate in families():
        if template in candidate.serves:
            return candidate
    raise TemplateError(f"no template family {template!r}")


def served(kind: str) -> tuple[str, ...]:
    """The group template names of every family of ``kind`` (``"row"``, ``"dedicated"``, ``"product"``)."""
    return tuple(name for f in families() if f.kind == kind for name in f.serves)


def dedicated_op_classes() -> tuple[str, ...]:
    """The op classes (:func:`optiml.graph.ops.op_class`) the planner gives a dedicated kernel."""
    return tuple(c for f in families() if f.kind == "dedicated" for c in f.op_classes)
