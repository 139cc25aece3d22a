"""write_proposals: kernel files, JSON and Markdown summaries, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from propose_helpers import SILU_TASK, read_kernel, suite_task

from optiml.errors import ConfigError, OptimlError
from optiml.propose.base import Proposal, ProposalContext
from optiml.propose.factory import make_proposer
from optiml.propose.heuristic import HeuristicProposer
from optiml.propose.output import write_proposals
from optiml.values import Edit


def proposals() -> list[Proposal]:
    ctx = ProposalContext(task=suite_task(SILU_TASK), kernel=read_kernel(SILU_TASK))
    good = HeuristicProposer().propose(ctx, 2)
    failed = Proposal(
        Edit("search_replace", "raw answer", "tiling", "tile it", "llm:m@propose_v1"),
        None,
        "block 1: SEARCH text not found",
    )
    return [good[0], failed, good[1]]


def test_writes_kernels_and_summaries(tmp_path: Path) -> None:
    items = proposals()
    (tmp_path / "proposal_9.cu").write_text("stale")
    (tmp_path / "notes.txt").write_text("keep me")
    paths = write_proposals(items, tmp_path)
    assert [p.name for p in paths] == ["proposal_1.cu", "proposal_3.cu", "proposals.json", "proposals.md"]
    assert not (tmp_path / "proposal_9.cu").exists() and (tmp_path / "notes.txt").exists()
    assert items[0].kernel is not None and (tmp_path / "proposal_1.cu").read_text() == items[0].kernel.code

    records = json.loads((tmp_path / "proposals.json").read_text())["proposals"]
    assert [r["file"] for r in records] == ["proposal_1.cu", None, "proposal_3.cu"]
    assert records[1]["error"] == "block 1: SEARCH text not found" and records[1]["digest"] is None
    assert records[0]["rationale"] == items[0].edit.rationale and records[0]["proposer"] == "heuristic"
    assert records[0]["digest"] == items[0].kernel.digest

    markdown = (tmp_path / "proposals.md").read_text()
    assert markdown.startswith("# Proposals (2 usable of 3)")
    assert "## 2. [tiling] search_replace — **failed**: block 1: SEARCH text not found" in markdown


def test_unwritable_folder_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(OptimlError, match=r"file: cannot write proposals: "):
        write_proposals(proposals(), blocker)


def test_make_proposer() -> None:
    assert make_proposer("heuristic", seed=4).name == "heuristic"
    assert make_proposer("structural", seed=4).name == "structural"
    assert make_proposer("offline", seed=4).name == "offline"  # structural edits, else the heuristic ones
    with pytest.raises(ConfigError, match="the llm proposer needs a configured LLM"):
        make_proposer("llm")
    kinds = "heuristic, structural, offline, llm"
    with pytest.raises(ConfigError, match=f"unknown proposer 'magic'; choose one of: {kinds}"):
        make_proposer("magic")
