"""``optiml doctor``'s line on candidate processes: the host's sandbox for them and the isolation policy."""

from __future__ import annotations

import pytest

from optiml import doctor
from optiml.integrity import candidate_sandbox
from optiml.integrity.candidate_sandbox import CandidateIsolation

NONE_HERE = CandidateIsolation(False, "candidate isolation unavailable: unshare (util-linux) not installed")


@pytest.mark.parametrize(
    ("policy", "outcome"), [("", "candidates run unconfined"), ("required", "every candidate fails to start")]
)
def test_a_host_without_the_sandbox_says_what_the_policy_makes_of_it(
    monkeypatch: pytest.MonkeyPatch, policy: str, outcome: str
) -> None:
    monkeypatch.setenv("OPTIML_ISOLATION", policy)
    monkeypatch.setattr(candidate_sandbox, "probe_candidate_isolation", lambda: NONE_HERE)
    check = doctor.candidate_check()
    assert not check.ok
    assert check.detail.startswith(NONE_HERE.note) and check.detail.endswith(outcome)


def test_an_unknown_policy_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPTIML_ISOLATION", "strict")
    check = doctor.candidate_check()
    assert not check.ok and check.detail == "OPTIML_ISOLATION='strict' is not one of best_effort, required"


def test_a_host_with_the_sandbox_says_so_with_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPTIML_ISOLATION", raising=False)
    here = CandidateIsolation(True, "candidate processes: own pid, network, IPC and mount namespaces")
    monkeypatch.setattr(candidate_sandbox, "probe_candidate_isolation", lambda: here)
    check = doctor.candidate_check()
    assert check.ok and check.detail == f"{here.note}; OPTIML_ISOLATION=best_effort"
