"""benchmarks/window_residual.py without a GPU: each variant changes the one protocol step it names, and
leaves the judge as it was once its evaluation is over."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from benchmark_scripts import benchmark_module
from optiml.evaluate import harness, memory


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return benchmark_module("window_residual")


def test_a_narrow_window_holds_fewer_short_calls_only_while_its_evaluation_runs(script: ModuleType) -> None:
    slot = 805 * 2**20  # a 268 MB-input task: input copies, outputs and a reference a call
    wide = harness.window_width(0.2, slot, None)
    with script.variant_patches("narrow_window"):
        assert memory.window_bytes(80 * 2**30) == script.NARROW_WINDOW_BYTES
        narrow = harness.window_width(0.2, slot, None)
    assert narrow == 5 and wide == 15  # wanted: 3 ms of 0.2 ms calls
    assert harness.window_width(0.2, slot, None) == wide and memory.WINDOW_BYTES == 16 * 2**30


def test_short_poll_changes_the_candidates_poll_only_while_its_evaluation_runs(script: ModuleType) -> None:
    from optiml.evaluate import candidate_process

    long_poll = candidate_process.POLL_S
    with script.variant_patches("short_poll"):
        patched = candidate_process.POLL_S
    restored = candidate_process.POLL_S
    assert patched == script.SHORT_POLL_S < long_poll and restored == long_poll


def test_no_refill_mixes_each_slot_once_and_reuses_its_reference(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    fills: list[Any] = []

    def counting_fill(self: Any, buffers: Any) -> list[str]:
        fills.append(buffers)
        return [f"reference {len(fills)}"]

    monkeypatch.setattr(harness.FreshInputs, "fill", counting_fill)
    first, second = object(), object()
    with script.variant_patches("no_refill"):
        answers = [harness.FreshInputs.fill(None, slot) for slot in (first, second, first, second, first)]
    assert fills == [first, second]
    assert answers == [["reference 1"], ["reference 2"], ["reference 1"], ["reference 2"], ["reference 1"]]
    assert harness.FreshInputs.fill is counting_fill  # restored


def test_every_variant_is_known_and_an_unknown_one_changes_nothing(script: ModuleType) -> None:
    assert set(script.VARIANTS) >= {"as_is", "no_refill", "narrow_window", "short_poll"}
    before = (harness.FreshInputs.fill, harness.WINDOW_BYTES)
    with script.variant_patches("as_is"):
        assert (harness.FreshInputs.fill, harness.WINDOW_BYTES) == before
