"""Coalescing is judged by the widest access whose requests the counters hold: cp.async copies (LDGSTS) count with
global loads, so a kernel of 16-byte copies and a few 2-byte loads is not called uncoalesced."""

from __future__ import annotations

from optiml.profile.findings import counter_findings
from optiml.profile.metrics import KernelMetrics
from optiml.profile.results import KernelProfile
from optiml.profile.sass import SassInstruction, SassKernel
from optiml.profile.static import StaticKernel


def _static(*opcodes: str) -> StaticKernel:
    instructions = tuple(SassInstruction(address=16 * i, opcode=op) for i, op in enumerate(opcodes))
    return StaticKernel("conv", None, SassKernel("conv", "conv", instructions))


def _loads(sectors_per_request: float) -> KernelProfile:
    requests = 1e6
    metrics = KernelMetrics(global_load_sectors=sectors_per_request * requests, global_load_requests=requests)
    return KernelProfile("conv", 1, (256, 1, 1), (784, 1, 1), metrics)


def _uncoalesced(kernel: KernelProfile, static: StaticKernel) -> list[str]:
    return [b.name for b in counter_findings(kernel, 1.0, static, multi=False) if b.name.startswith("uncoalesced")]


def test_copies_by_cp_async_set_the_ideal_of_global_loads() -> None:
    # the channels-last conv on the H100 (2026-12-07): LDGSTS.128 copies and 16-bit bias loads, 11.3 sectors a request
    conv = _static("LDGSTS.E.BYPASS.128", "LDGSTS.E.BYPASS.128", "LDG.E.U16", "LDG.E.U16", "LDG.E.U16")
    assert conv.request_widths("global_load") == {128, 16}
    assert _uncoalesced(_loads(11.3), conv) == []
    assert _uncoalesced(_loads(32.0), conv) == ["uncoalesced_loads"]  # worse than even 16-byte accesses allow


def test_without_copies_the_loads_own_width_decides() -> None:
    gather = _static("LDG.E.U16", "LDG.E.U16", "LDGDEPBAR", "UTMALDG.2D")  # TMA and barriers are not LSU loads
    assert gather.request_widths("global_load") == {16}
    assert _uncoalesced(_loads(11.3), gather) == ["uncoalesced_loads"]
    assert _uncoalesced(_loads(2.0), gather) == []


def test_copies_are_not_stores() -> None:
    assert _static("LDGSTS.E.BYPASS.128", "STG.E.U16").request_widths("global_store") == {16}
