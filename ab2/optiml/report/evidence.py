"""Profiler evidence as the run store keeps it, read back into parts a page can lay out.

The store keeps a node's diagnosis as the text :meth:`optiml.profile.diagnosis.Diagnosis.render`
wrote (``Bound: …``, ``Roofline: …``, numbered bottlenecks each followed by ``→ suggestion``,
``Kernel …`` lines of key metrics joined by ``|``, ``Missing evidence: …``), with its proxy score
and roofline fraction beside it. :func:`parse_evidence` splits that text back into those parts;
a line it does not recognise is kept in ``other``, so nothing stored is lost from the page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optiml.store import ProfileRecord

_NUMBERED = re.compile(r"^(\d+)\.\s+(.*)$")
_SEVERITY = re.compile(r"\[severity ([0-9.]+)\]")


@dataclass(frozen=True)
class Finding:
    """One named bottleneck: what it is (with its evidence), its severity, what to do."""

    text: str
    severity: float | None
    suggestion: str


@dataclass(frozen=True)
class Evidence:
    bound: str  # "memory", "compute", "latency", "launch_overhead", "unknown", or "" when not stated
    summary: str  # the bound line after "Bound: "
    roofline: str  # the roofline line after "Roofline: "
    findings: tuple[Finding, ...]
    metrics: tuple[tuple[str, ...], ...]  # per kernel: its key metrics, one cell each
    missing: tuple[str, ...]
    other: tuple[str, ...]
    proxy_score: float
    roofline_fraction: float | None


def parse_evidence(record: ProfileRecord) -> Evidence:
    summary = roofline = ""
    findings: list[Finding] = []
    metrics: list[tuple[str, ...]] = []
    missing: tuple[str, ...] = ()
    other: list[str] = []
    for raw in record.text.splitlines():
        line = raw.strip()
        numbered = _NUMBERED.match(line)
        if not line or line.startswith("Bottlenecks, "):  # the header of the numbered list
            continue
        if line.startswith("Bound:"):
            summary = line.removeprefix("Bound:").strip()
        elif line.startswith("Roofline:"):
            roofline = line.removeprefix("Roofline:").strip()
        elif line.startswith("Missing evidence:"):
            missing = tuple(p.strip() for p in line.removeprefix("Missing evidence:").split(";") if p.strip())
        elif line.startswith("→") and findings:
            last = findings[-1]
            findings[-1] = Finding(last.text, last.severity, line.removeprefix("→").strip())
        elif numbered:
            severity = _SEVERITY.search(numbered.group(2))
            findings.append(Finding(numbered.group(2), float(severity.group(1)) if severity else None, ""))
        elif line.startswith("Kernel "):
            metrics.append(tuple(cell.strip() for cell in line.split("|")))
        else:
            other.append(line)
    bound = re.split(r"[\s:(]", summary, maxsplit=1)[0] if summary else ""
    return Evidence(
        bound=bound,
        summary=summary,
        roofline=roofline,
        findings=tuple(findings),
        metrics=tuple(metrics),
        missing=missing,
        other=tuple(other),
        proxy_score=record.proxy_score,
        roofline_fraction=record.roofline_fraction,
    )
