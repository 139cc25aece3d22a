"""optiml adapt: existing CUDA with its own host code, wrapped into the ABI by the model."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from generate_helpers import RuleEvaluator, ScriptedModel, fenced, silu_kernel

from llm_servers import OpenAIServer
from optiml.generate import GenerationConfig, GenerationError, adapt_kernel
from optiml.kernel.compiler import Compiler
from optiml.llm import LLMClient
from optiml.task import Task

USER_CODE = """#include <cstdio>
#include <cuda_runtime.h>
__global__ void silu(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
int main() {
  int n = 1 << 20; float *x, *y;
  cudaMalloc(&x, n * 4); cudaMalloc(&y, n * 4);
  silu<<<(n + 255) / 256, 256>>>(x, y, n);
  cudaDeviceSynchronize(); printf("done\\n");
}
"""


@pytest.mark.nvcc
def test_adapting_an_existing_kernel_with_a_repair(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task, compiler: Compiler
) -> None:
    model = ScriptedModel(
        {
            ("adapt", 0): fenced(silu_kernel(2.0, "adapted", broken=True)),
            ("adapt", 1): fenced(silu_kernel(2.0, "adapted")),
        }
    )
    server.responder = model
    outcome = adapt_kernel(USER_CODE, silu_task, make_client(server), RuleEvaluator(compiler), GenerationConfig())

    assert outcome.kind == "adapt" and outcome.winner == "adapt"
    assert [a.status for a in outcome.thoughts[0].attempts] == ["compile_error", "ok"]
    assert outcome.best_kernel is not None and "VARIANT_ADAPTED" in outcome.best_kernel.code
    (prompt,) = model.prompts("adapt", 0)
    assert USER_CODE.strip() in prompt and "OPTIML_EXPORT int optiml_forward" in prompt
    assert server.request_count == 2  # no aggregation for an adaptation


def test_an_empty_source_is_refused(
    server: OpenAIServer, make_client: Callable[..., LLMClient], silu_task: Task
) -> None:
    with pytest.raises(GenerationError, match="the CUDA source to adapt is empty"):
        adapt_kernel(" \n", silu_task, make_client(server), RuleEvaluator(None))
    assert server.request_count == 0
