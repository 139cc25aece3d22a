"""optiml_ptx.h: the one home of the tensor-core kernels' PTX, the header the emulator models by name."""

from __future__ import annotations

import re

import pytest
from test_gemm_template import PTX_MOCK

from optiml.kernel.compiler import included_helper_headers
from optiml.task import load_task
from optiml.templates import ptx
from optiml.templates.kernels import template_kernels

DEFINED = re.compile(r"\b(optiml_\w+)(?:<[^>]*>)?\(")
TENSOR_CORE_TASKS = ("tasks/matmul.py", "tasks/conv2d.py", "tasks/compute/bf16_gemm_square.py")


def defined_functions(text: str) -> set[str]:
    """Names of the functions a header declares or defines (``optiml_x(`` after a return type)."""
    return set(re.findall(r"(?:void|bool|unsigned|unsigned long long)\s+(optiml_\w+)(?:<[^>]*>)?\(", text))


def test_the_shipped_header_is_the_generated_one() -> None:
    assert ptx.header_path().read_text(encoding="utf-8") == ptx.header(), "run `python -m optiml.templates.ptx`"


@pytest.mark.parametrize("task", TENSOR_CORE_TASKS)
def test_tensor_core_kernels_call_the_header_and_hold_no_asm(task: str) -> None:
    """Every seed of a GEMM or convolution task: no inline asm of its own, the header included (so exports
    carry it), and every ``optiml_`` device function it calls is one the header defines."""
    kernels = template_kernels(load_task(task))
    header_functions = defined_functions(ptx.header())
    seen_header = False
    for seed in kernels.seeds():
        code = kernels.render(seed).code
        assert not re.search(r"\basm\b", code)
        if '#include "optiml_ptx.h"' not in code:
            continue
        seen_header = True
        assert "optiml_ptx.h" in included_helper_headers(code)
        called = {name for name in DEFINED.findall(code) if name in header_functions or "wgmma" in name}
        assert called and called <= header_functions, called - header_functions
    assert seen_header, f"no seed of {task} uses the tensor-core helpers"


def test_the_emulator_models_every_building_block_but_the_fp16_mmas() -> None:
    unmodelled = defined_functions(ptx.header()) - defined_functions(PTX_MOCK)
    assert unmodelled == {"optiml_mma_f16", "optiml_wgmma_f16"}


def test_a_wgmma_width_the_header_lacks_is_refused_when_rendering() -> None:
    assert ptx.wgmma_function("bfloat16", 128, b_k_major=False) == "optiml_wgmma_bf16<128, 1>"
    assert ptx.wgmma_function("float16", 64, b_k_major=True) == "optiml_wgmma_f16<64, 0>"
    with pytest.raises(ValueError, match="n = 96"):
        ptx.wgmma_function("bfloat16", 96, b_k_major=True)


def test_every_wgmma_width_and_register_budget_is_specialised() -> None:
    text = ptx.header()
    for n in ptx.WGMMA_WIDTHS:
        for name in (f"optiml_wgmma_bf16<{n}, 0>", f"optiml_wgmma_f16<{n}, 1>", f"optiml_wgmma_tf32<{n}>"):
            assert f"void {name}(" in text
        assert f"m64n{n}k16.f32.bf16.bf16" in text and f"m64n{n}k8.f32.tf32.tf32" in text
    assert "optiml_regs_dec<40>()" in text and "optiml_regs_inc<232>()" in text


def _functions_whose_ptx_matches(pattern: str) -> set[str]:
    """Header functions whose body holds PTX matching ``pattern`` (or calls such a function)."""
    bodies = re.findall(r"\b(optiml_\w+)(?:<[^>]*>)?\([^)]*\)\s*\{(.*?)\n\}", ptx.header(), re.S)
    found = {name for name, body in bodies if re.search(pattern, body)}
    return found | {name for name, body in bodies if any(f"{f}(" in body for f in found)}


def test_the_screen_sees_reduced_precision_through_the_header() -> None:
    """A candidate calling a header MMA computes in the precision of its PTX: the screen names them all
    (an fp32-strict task rejects the half-precision ones and flags the TF32 ones, as it does their asm)."""
    from optiml.integrity.rules import RULES

    half = _functions_whose_ptx_matches(r"\.(f16|bf16)\b")
    tf32 = _functions_whose_ptx_matches(r"\.tf32\b") | {"optiml_tf32", "optiml_split"}
    assert half == {"optiml_mma_bf16", "optiml_mma_f16", "optiml_wgmma_bf16", "optiml_wgmma_f16"}
    assert half <= RULES["precision"].names and tf32 <= RULES["tf32"].names
