"""A timed window keeps the slots that fit when another process takes the memory it was sized on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from optiml.evaluate.cudart import CUDA_ERROR_MEMORY_ALLOCATION, CudaError
from optiml.evaluate.harness import TimingBench

CUDA_ERROR_INVALID_VALUE = 1


class _Buffers:
    def refill(self, args: list) -> None:
        self.args = args


class _Judge:
    """A judge whose device holds ``fit`` slots; the next allocation fails with ``code``."""

    cuda = False

    def __init__(self, fit: int, code: int = CUDA_ERROR_MEMORY_ALLOCATION) -> None:
        self.fit, self.code = fit, code

    def buffers(self, args: list, expected: list, slot: int = 0) -> _Buffers:
        if slot >= self.fit:
            raise CudaError("cudaMalloc(536879104)", self.code)
        return _Buffers()


def _bench(judge: _Judge) -> TimingBench:
    session = SimpleNamespace(
        judge=judge, bind=lambda buffers: id(buffers), process=SimpleNamespace(thread_count=lambda: 1)
    )
    case = SimpleNamespace(abi_inputs=[], expected=[], args=[])
    return TimingBench(session, SimpleNamespace(device="cpu"), [case], max_width=16)


def test_out_of_memory_leaves_the_window_with_the_slots_that_fit() -> None:
    bench = _bench(_Judge(fit=3))
    bench._add_slots(16)
    assert bench.width == 3
    assert bench.max_width == 3


def test_out_of_memory_for_the_first_slot_and_other_errors_are_raised() -> None:
    with pytest.raises(CudaError, match=r"cudaMalloc\(536879104\)"):
        _bench(_Judge(fit=0))
    bench = _bench(_Judge(fit=2, code=CUDA_ERROR_INVALID_VALUE))
    with pytest.raises(CudaError):
        bench._add_slots(4)
