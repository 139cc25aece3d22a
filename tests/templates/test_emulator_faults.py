"""The CPU emulator faults where the GPU would: a 16-byte pack read from an address that is not a multiple of 16
("misaligned address" on the device) or a pack read past the end of a buffer aborts the emulated call, so a
host check that lets a misaligned buffer take a kernel's vector path, or a loop bound one pack too far, fails
on the CPU instead of only on a GPU."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from emulated_tasks import planned, task_text, write_task
from test_gemm_template import emulated_library, from_bits, needs_gxx, run_emulated

from optiml.evaluate.runtime import Case, TaskRuntime

MISALIGNED_BYTES = 4  # one float past a 16-byte boundary: every 16-byte pack of the input is misaligned
POINTWISE = "x, y\nreturn torch.sigmoid(x) * y + 1"


def rendered(tmp_path: Path, name: str, body: str) -> tuple[str, Case]:
    """The planner's default source for a two-input float32 task of 8 rows of 64, and a case of it."""
    task = write_task(tmp_path, name, task_text([{"A": 8, "C": 64}], body, "[torch.randn(A, C), torch.randn(A, C)]"))
    kernels = planned(task)
    return kernels.render(kernels.default()).code, TaskRuntime(task, "cpu").case(3, 0)


@needs_gxx
@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("pointwise", POINTWISE),
        ("softmax", "x, y\nreturn torch.softmax(x * y, dim=-1)"),
    ],
)
def test_a_vector_path_forced_onto_misaligned_inputs_dies_on_the_emulator(name: str, body: str, tmp_path: Path) -> None:
    code, case = rendered(tmp_path, name, body)
    pointer_checks = re.findall(r"\(\(uintptr_t\)P\.l\d+ % \(sizeof\(float\) \* 4\) == 0\)", code)
    assert pointer_checks, "the row kernel no longer checks its leaves' alignment on the host"
    forced = code
    for check in pointer_checks:
        forced = forced.replace(check, "true")
    library = emulated_library(tmp_path / "emu", [code, forced])

    # as rendered, misaligned inputs take the per-element path and the answer is torch's
    (got,) = run_emulated(library, 0, case.abi_inputs, case.expected, offset=MISALIGNED_BYTES)
    want = case.expected[0].double().numpy().reshape(-1)
    assert np.allclose(from_bits(got, case.expected[0].dtype), want, rtol=1e-5, atol=1e-5)
    # aligned inputs on the forced build are fine: only the misaligned call reads packs across a boundary
    run_emulated(library, 1, case.abi_inputs, case.expected)
    with pytest.raises(AssertionError, match="the emulated call died"):
        run_emulated(library, 1, case.abi_inputs, case.expected, offset=MISALIGNED_BYTES)


@needs_gxx
def test_a_pack_read_past_the_end_of_an_input_dies_on_the_emulator(tmp_path: Path) -> None:
    code, case = rendered(tmp_path, "pointwise", POINTWISE)
    pack_read = "p.l1 + b_l1 + (r1) * p.l1_r1 + (e))"
    assert pack_read in code, "the row kernel's pack read of its second input changed: update the mutation"
    one_pack_on = code.replace(pack_read, "p.l1 + b_l1 + (r1) * p.l1_r1 + (e) + VEC)")
    library = emulated_library(tmp_path / "emu", [code, one_pack_on])
    run_emulated(library, 0, case.abi_inputs, case.expected)
    with pytest.raises(AssertionError, match="the emulated call died"):
        run_emulated(library, 1, case.abi_inputs, case.expected)
