"""Generation and a GPU: refuse before any paid call when none is visible, or, asked to, only
compile what the LLM writes (``optiml generate --no-verify``)."""

from __future__ import annotations

from collections.abc import Sequence

from optiml.errors import NoGPUError
from optiml.evaluate.cost import CostFunction
from optiml.kernel.compiler import Compiler
from optiml.kernel.source import KernelSource
from optiml.values import EvalResult, EvalStatus, TimingStats


def require_gpu(no_verify_flag: bool = True) -> None:
    """Generation verifies every candidate on a GPU: say so before the first paid LLM call. The message
    offers ``--no-verify`` where the command has it (``no_verify_flag``: generate has, adapt has not)."""
    import torch

    if not torch.cuda.is_available():
        instead = ", or pass --no-verify to only write the LLM's candidates" if no_verify_flag else ""
        raise NoGPUError(
            "no CUDA GPU is visible: generation verifies every candidate on one, so no LLM call was made "
            f"(run on a GPU machine{instead})"
        )


class CompileOnly(CostFunction):
    """A stand-in cost function for --no-verify: compiles (CPU only) and marks every candidate unverified."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler

    @property
    def reference(self) -> dict[str, TimingStats]:
        return {}  # nothing runs on a GPU

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        return self.evaluate_many([kernel])[0]

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        raise NoGPUError("--no-verify only compiles: there is nothing verified to re-time")

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        results = []
        for kernel, built in zip(kernels, self.compiler.compile_many(list(kernels)), strict=True):
            if built.ok:
                message = "compiled; not verified (--no-verify)"
                results.append(EvalResult(EvalStatus.REJECTED, message, kernel.digest, compile=built))
            else:
                summary = built.error_summary(3)
                results.append(EvalResult(EvalStatus.COMPILE_ERROR, summary, kernel.digest, compile=built))
        return results
