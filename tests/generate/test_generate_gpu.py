"""On a GPU: a recorded generation is replayed (no model, no network), and its root is searched.

The recording is made in-process by a scripted provider (the GPU machine has no LLM SDKs), with
real kernels for tasks/silu.py: one that does not compile, one that computes the wrong answer,
both repaired, and an aggregation answer. The replay must ask the same questions — it gets the
same verification verdicts from the real evaluator — and the search that follows must end with a
verified kernel.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from generate_helpers import SILU_KERNEL, SILU_TASK, ScriptedModel, ScriptedProvider, fenced

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.generate import GenerationConfig, GenerationStore, generate_root
from optiml.llm import LLMCallStore, LLMClient, LLMConfig
from optiml.propose.heuristic import HeuristicProposer
from optiml.search.config import Budgets, SearchConfig
from optiml.search.runner import run_search
from optiml.store import RunStore
from optiml.task import load_task

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

VEC4 = (Path(__file__).parent / "data" / "silu_vec4.cu").read_text(encoding="utf-8")
BROKEN = VEC4.replace("v.w = silu(v.w);", "v.w = silu(v.w)")  # a missing semicolon
WRONG = SILU_KERNEL.replace("y[i] = v / (1.0f + expf(-v));", "y[i] = v;")  # identity, not SiLU
WIDE = SILU_KERNEL.replace("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 512")
NARROW = SILU_KERNEL.replace("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 128")
AGGREGATED = VEC4.replace("#define BLOCK_SIZE 256", "#define BLOCK_SIZE 512")


def test_replayed_generation_then_search_ends_with_a_verified_kernel(tmp_path: Path) -> None:
    assert WRONG != SILU_KERNEL and BROKEN != VEC4 and WIDE != SILU_KERNEL
    model = ScriptedModel(
        {
            ("direct", 0): fenced(SILU_KERNEL),
            ("memory_first", 0): fenced(BROKEN),
            ("memory_first", 1): fenced(VEC4),
            ("parallel_first", 0): fenced(WRONG),
            ("parallel_first", 1): fenced(WIDE),
            ("fusion_first", 0): fenced(NARROW),
            ("aggregate", 0): fenced(AGGREGATED),
        }
    )
    task = load_task(SILU_TASK)
    db = tmp_path / "runs.db"
    llm = LLMConfig(model="scripted", base_url="http://127.0.0.1:9/v1")
    with (
        LLMCallStore(db) as calls,
        GenerationStore(db) as generations,
        Evaluator(task, EvalConfig(seeds=2, timing_seconds=0.3)) as evaluator,
    ):
        with LLMClient(replace(llm, mode="record"), calls, "gen-1", ScriptedProvider(model)) as recorder:
            recorded = generate_root(task, recorder, evaluator, GenerationConfig(), generations)
        with LLMClient(replace(llm, mode="replay"), calls, "gen-2") as replayer:
            replayed = generate_root(task, replayer, evaluator, GenerationConfig(), generations)
            assert replayer.usage.api_calls == 0 and replayer.usage.calls == len(model.seen) == 7

        statuses = {t.name: [a.status for a in t.attempts] for t in replayed.thoughts}
        assert statuses == {t.name: [a.status for a in t.attempts] for t in recorded.thoughts}
        assert statuses == {
            "direct": ["ok"],
            "memory_first": ["compile_error", "ok"],
            "parallel_first": ["wrong_answer", "ok"],
            "fusion_first": ["ok"],
            "aggregate": ["ok"],
        }
        root = replayed.require_kernel()

        with RunStore(db) as runs:
            config = SearchConfig(strategy="greedy", budgets=Budgets(max_evaluations=6, max_seconds=600))
            searched = run_search(task, root, evaluator, [HeuristicProposer(seed=0)], None, runs, config)

    assert searched.root_digest == root.digest
    assert searched.best_result.ok and searched.best_result.verify is not None and searched.best_result.verify.passed
