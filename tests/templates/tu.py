"""Test helpers for templates: a full translation unit from rendered kernels, a simple RenderContext, and
one built candidate run through the harness on the GPU."""

from __future__ import annotations

from typing import Any

from optiml.templates.base import KernelCode, Operand, RenderContext

# g++ flags of every CPU emulator build: a typed access through a misaligned pointer (a 16-byte pack read
# from an address that is not a multiple of 16, which faults on the GPU as "misaligned address") aborts
# the emulated call instead of reading the bytes, as x86 would.
EMULATOR_SANITIZERS = ("-fsanitize=alignment", "-fno-sanitize-recover=alignment")


def translation_unit(codes: list[KernelCode], n_inputs: int, n_outputs: int) -> str:
    """A complete candidate file: the ABI header, each code's device part, then ``optiml_forward``
    running each code's host part in order (and ``optiml_workspace_bytes`` when scratch is used)."""
    includes: list[str] = []
    for code in codes:
        includes.extend(inc for inc in code.includes if inc not in includes)
    parts = ['#include "optiml.h"']
    parts += [f"#include {inc}" if inc.startswith(("<", '"')) else f'#include "{inc}"' for inc in includes]
    parts += [code.device for code in codes]
    host = "\n".join("  {\n" + code.host + "\n  }" for code in codes)  # each in its own scope
    parts.append(
        "OPTIML_EXPORT int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,\n"
        "                                 int n_outputs, void* workspace, size_t workspace_bytes,\n"
        "                                 cudaStream_t stream) {\n"
        f"  // expects {n_inputs} input(s), {n_outputs} output(s)\n"
        "  (void)workspace_bytes;\n"
        f"{host}\n"
        "  return optiml_check_launch();\n"
        "}"
    )
    scratch = [code.workspace_bytes for code in codes if code.workspace_bytes.strip() != "0"]
    if scratch:
        total = " + ".join(f"(size_t)({expr})" for expr in scratch)
        parts.append(
            "OPTIML_EXPORT size_t optiml_workspace_bytes(const optiml_tensor* inputs, int n_inputs) {\n"
            "  (void)n_inputs;\n"
            f"  return {total};\n"
            "}"
        )
    return "\n\n".join(parts) + "\n"


def unary_context(prefix: str, ctype: str = "float", compute: str = "float") -> RenderContext:
    """A RenderContext for a kernel reading input 0 and writing output 0 of the same shape."""
    return RenderContext(
        prefix=prefix,
        inputs=[Operand(f"((const {ctype}*)inputs[0].data)", ctype)],
        outputs=[Operand(f"(({ctype}*)outputs[0].data)", ctype)],
        dims=lambda vid, d: f"inputs[0].shape[{d}]",
        compute_type=compute,
    )


def gpu_trial_failures(runtime: Any, compiled: Any, label: str) -> list[str]:
    """``compiled`` (a compile result) run through the harness on the GPU at every shape set of
    ``runtime``'s task: one line per failure, a compile error included."""
    import torch

    from optiml.evaluate.abi import KernelLibrary
    from optiml.evaluate.harness import CandidateRunner

    if not compiled.ok:
        return [f"{label}: compile error {compiled.error_summary(3)}"]
    runner = CandidateRunner(runtime, KernelLibrary(compiled.so_path), torch.cuda.Stream())
    failures = []
    for shape_set in range(runtime.task.num_shape_sets):
        try:
            check = runner.trial(runtime.case(1000 + shape_set, shape_set))
        except Exception as exc:  # CandidateFailure and CUDA errors alike
            failures.append(f"{label} @ shape set {shape_set}: {type(exc).__name__}: {exc}")
            torch.cuda.synchronize()
            continue
        if not check.passed:
            failures.append(f"{label} @ shape set {shape_set}: {check.message}")
    return failures
