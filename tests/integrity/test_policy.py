"""The policy table: well-formed, and reproduced verbatim in docs/integrity.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.integrity.rules import POLICY, Rule, policy_markdown
from optiml.integrity.screen import _DETECTORS

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrity.md"


def test_rule_ids_are_unique_and_kebab_case() -> None:
    ids = [rule.id for rule in POLICY]
    assert len(ids) == len(set(ids))
    assert all(rule_id == rule_id.lower() and " " not in rule_id for rule_id in ids)


def test_every_source_rule_has_a_matcher() -> None:
    for rule in POLICY:
        if rule.applies_to != "source":
            continue
        declarative = rule.names or rule.calls or rule.prefixes or rule.anywhere or rule.qualified
        assert declarative or rule.headers or rule.asm or rule.custom, rule.id
        assert rule.custom == (rule.id in _DETECTORS), rule.id


def test_bad_action_is_refused() -> None:
    with pytest.raises(ValueError, match="action"):
        Rule(id="x", action="warn", covers="", reason="")


def test_markdown_lists_every_rule_with_its_action() -> None:
    table = policy_markdown()
    for rule in POLICY:
        assert f"| `{rule.id}` | {rule.action}" in table


def test_docs_carry_the_current_table() -> None:
    assert policy_markdown() in DOC.read_text(encoding="utf-8"), (
        "docs/integrity.md is out of date: paste optiml.integrity.rules.policy_markdown() into it"
    )
