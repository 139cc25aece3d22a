"""Writing proposals to a folder, for ``optiml propose``: one ``.cu`` per usable proposal plus summaries.

Layout of ``out_dir``::

    proposal_1.cu       the kernel of proposal 1 (only usable proposals get a file)
    proposal_2.cu
    proposals.json      every proposal: index, file, kind, category, proposer, rationale, flags,
                        digest, payload, error, diff
    proposals.md        the same for a person to read, with each usable proposal's diff against the
                        current kernel (the raw edit of a failed one)

Numbering follows the order of ``proposals`` (1-based), so a failed proposal leaves a gap in the
``.cu`` files but keeps its entry, with its error, in both summaries. Old ``proposal_<i>.cu`` files
in ``out_dir`` are removed first so that a folder never mixes two runs.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from optiml.errors import OptimlError
from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposal

_OLD_KERNEL = re.compile(r"proposal_\d+\.cu")
JSON_NAME = "proposals.json"
MARKDOWN_NAME = "proposals.md"


@dataclass(frozen=True)
class ProposalRecord:
    """One proposal as written to ``proposals.json``."""

    index: int
    file: str | None
    kind: str
    category: str
    proposer: str
    rationale: str
    flags: tuple[str, ...]
    digest: str | None
    payload: str
    error: str | None
    diff: str = ""  # unified diff of the current kernel's file against the proposal's ("" if unknown)

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "file": self.file,
            "kind": self.kind,
            "category": self.category,
            "proposer": self.proposer,
            "rationale": self.rationale,
            "flags": list(self.flags),
            "digest": self.digest,
            "payload": self.payload,
            "error": self.error,
            "diff": self.diff,
        }


def write_proposals(
    proposals: Sequence[Proposal], out_dir: str | Path, parent: KernelSource | None = None
) -> list[Path]:
    """Write kernels and summaries; returns the paths written (kernels in order, then JSON, then Markdown).
    ``parent``: the kernel the proposals edit, for their diffs.

    Raises :class:`OptimlError` with a one-line message when the folder cannot be written.
    """
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            if _OLD_KERNEL.fullmatch(old.name) and old.is_file():
                old.unlink()
        written: list[Path] = []
        records = []
        for index, proposal in enumerate(proposals, 1):
            name = None
            if proposal.usable and proposal.kernel is not None:
                name = f"proposal_{index}.cu"
                path = folder / name
                path.write_text(proposal.kernel.to_file_text(), encoding="utf-8")
                written.append(path)
            records.append(_record(index, name, proposal, parent))
        summary = folder / JSON_NAME
        summary.write_text(json.dumps({"proposals": [r.to_dict() for r in records]}, indent=2) + "\n", encoding="utf-8")
        markdown = folder / MARKDOWN_NAME
        markdown.write_text(render_markdown(records), encoding="utf-8")
    except OSError as exc:
        raise OptimlError(f"{folder}: cannot write proposals: {exc.strerror or exc}") from exc
    return [*written, summary, markdown]


def kernel_diff(parent: KernelSource, kernel: KernelSource, new_name: str) -> str:
    """Unified diff of two kernels' files (flags line included), as ``git diff`` shows it."""
    lines = difflib.unified_diff(
        parent.to_file_text().splitlines(keepends=True),
        kernel.to_file_text().splitlines(keepends=True),
        fromfile="a/kernel.cu",
        tofile=f"b/{new_name}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _record(index: int, name: str | None, proposal: Proposal, parent: KernelSource | None) -> ProposalRecord:
    edit = proposal.edit
    kernel = proposal.kernel if proposal.usable else None
    diff = kernel_diff(parent, kernel, name) if parent is not None and kernel is not None and name else ""
    return ProposalRecord(
        index=index,
        file=name,
        kind=edit.kind,
        category=edit.category,
        proposer=edit.proposer,
        rationale=edit.rationale,
        flags=kernel.flags if kernel is not None else (),
        digest=kernel.digest if kernel is not None else None,
        payload=edit.payload,
        error=proposal.error,
        diff=diff,
    )


def render_markdown(records: Sequence[ProposalRecord]) -> str:
    usable = sum(1 for r in records if r.file)
    lines = [f"# Proposals ({usable} usable of {len(records)})", ""]
    for r in records:
        status = f"`{r.file}`" if r.file else f"**failed**: {r.error}"
        lines += [f"## {r.index}. [{r.category}] {r.kind} — {status}", "", f"Proposer: `{r.proposer}`", ""]
        if r.flags:
            lines += [f"nvcc flags: `{' '.join(r.flags)}`", ""]
        lines += [r.rationale, ""]
        if r.diff:
            lines += ["```diff", r.diff.rstrip("\n"), "```", ""]
        elif r.kind in ("search_replace", "knob", "flags") and r.payload.strip():
            lines += ["```", r.payload.rstrip("\n"), "```", ""]
    return "\n".join(lines)
