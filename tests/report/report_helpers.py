"""Real stored runs for the report tests: a search on the synthetic landscape (CPU), profiled with
diagnoses built from counters recorded on the H200, and LLM calls recorded in the same store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from optiml.kernel.source import KernelSource
from optiml.llm.store import LLMCallStore
from optiml.llm.types import CallRecord, ChatMessage, LLMRequest, LLMResponse
from optiml.profile.diagnosis import Diagnosis, diagnose
from optiml.profile.metrics import KernelMetrics
from optiml.profile.ncu_csv import parse_raw_csv
from optiml.profile.results import KernelProfile, Profile
from optiml.profile.roofline import Roofline, datasheet_peaks
from optiml.search import Budgets, SearchConfig, run_search
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel, read_knobs
from optiml.store import EDIT_UNTRIED, NodeRecord, RunStore
from optiml.task import Task, load_task
from optiml.values import Edit, EvalResult, EvalStatus, TimingStats

NCU_CSV = Path(__file__).resolve().parents[1] / "profile" / "data" / "ncu_raw.csv"
N = 1 << 20

TASK = f"""\
import torch
import torch.nn as nn

N = {N}
OPTIML = {{"description": "scale a vector by two", {{FLOPS}}}}


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.rand(N)]


def get_init_inputs():
    return []
"""


def write_task(directory: Path, *, flops: bool = True) -> Task:
    path = directory / "scale.py"
    path.write_text(TASK.replace("{FLOPS}", '"flops": "N"' if flops else ""))
    return load_task(path)


class PhasedEvaluator(LandscapeEvaluator):
    """The landscape's evaluator, reporting the per-phase seconds a GPU worker reports."""

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        result = super().evaluate(kernel)
        knobs = read_knobs(kernel.code) or {"TILE": 1}
        result.phase_seconds = {"compile": 1.0 + 0.1 * knobs["TILE"], "verify": 0.4, "time": 0.6 if result.ok else 0.0}
        return result


@dataclass
class RecordedProfiler:
    """Diagnoses with optiml.profile.diagnosis over counters recorded on the H200: a landscape kernel
    with UNROLL < 8 gets the naive transpose's counters (uncoalesced stores), the others vecadd's."""

    task: Task

    def __post_init__(self) -> None:
        rows = {row.kernel_name.split("(")[0]: row for row in parse_raw_csv(NCU_CSV.read_text(encoding="utf-8"))}
        self.rows = rows
        peaks = datasheet_peaks("NVIDIA H200")
        assert peaks is not None
        self.roofline = Roofline(peaks, "float32", flops=float(N), min_bytes=8 * N)

    def diagnose(self, kernel: KernelSource, result: EvalResult) -> Diagnosis:
        knobs = read_knobs(kernel.code) or {"UNROLL": 1}
        row = self.rows["vecadd" if knobs["UNROLL"] >= 8 else "transpose_naive"]
        metrics = KernelMetrics.from_values(row.values)
        kernel_profile = KernelProfile(row.kernel_name, row.launch_id, row.block, row.grid, metrics)
        profile = Profile(label="candidate 0", kernel_digest=kernel.digest, kernels=(kernel_profile,))
        # timed as the counters were: the landscape's synthetic times would read as launch overhead
        return diagnose(profile=profile, static=None, roofline=self.roofline, time_ms=metrics.duration_ms)

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[Diagnosis]:
        return [self.diagnose(kernel, result) for kernel, result in items]


def make_run(directory: Path, *, evaluations: int = 24, flops: bool = True, llm_calls: int = 3) -> tuple[Path, str]:
    """A finished search stored in ``directory/runs.db``; returns the store's path and the run id."""
    task = write_task(directory, flops=flops)
    store_path = directory / "runs.db"
    config = SearchConfig(parallel_evaluations=1, parallel_proposals=1, budgets=Budgets(evaluations))
    with RunStore(store_path) as store:
        outcome = run_search(
            task,
            landscape_kernel(),
            PhasedEvaluator(Landscape(seed=3, fail_rate=0.2)),
            [KnobProposer(0, unusable_rate=0.15)],
            RecordedProfiler(task),
            store,
            config,
        )
    record_llm_calls(store_path, outcome.run_id, llm_calls)
    return store_path, outcome.run_id


def record_llm_calls(store_path: Path, run_id: str, count: int) -> None:
    """``count`` answered calls for ``run_id``, the last from the cache, as the LLM layer records them."""
    with LLMCallStore(store_path) as calls:
        for index in range(count):
            request = LLMRequest(
                messages=(ChatMessage("user", f"propose an edit {index}"),),
                model="gpt-test",
                temperature=0.7,
                max_tokens=512,
                purpose="propose",
            )
            cached = index == count - 1
            response = LLMResponse(
                texts=["<edit/>"],
                model="gpt-test",
                provider="openai",
                input_tokens=1200 + index,
                output_tokens=300,
                cost_usd=0.0 if cached else 0.0125,
                latency_s=2.5,
                cached=cached,
                finish_reasons=["stop"],
            )
            calls.record(
                CallRecord(
                    key=f"k{index}",
                    run_id=run_id,
                    provider="openai",
                    purpose="propose",
                    request=request,
                    response=response,
                )
            )


HOSTILE = '</script><script>window.owned = 1</script><img src="https://example.invalid/x.png">'


def manual_run(directory: Path) -> tuple[Path, str]:
    """An unfinished run written through the store API: a verified root and one child that failed to
    compile, whose edit's rationale and error message are hostile HTML (they must show as text)."""
    task = write_task(directory)
    store_path = directory / "manual.db"
    root = landscape_kernel()
    child = root.with_code(root.code.replace("#define TILE 1", "#define TILE 2"))
    timing = TimingStats.from_samples([1.0, 1.01, 0.99, 1.02])
    ok = EvalResult(EvalStatus.OK, kernel_digest=root.digest, timing=timing, reference={"eager": timing})
    failed = EvalResult(EvalStatus.COMPILE_ERROR, f"error: {HOSTILE}", kernel_digest=child.digest)
    with RunStore(store_path) as store:
        run = store.create_run(
            task_name=task.name,
            task_path=str(task.path),
            task_digest=task.digest,
            strategy="greedy",
            config_json="{}",
            root=root,
        )
        store.record_evaluation(
            run.id, node=NodeRecord(root.digest, None, None, 0, 1.0, 1, 0.0, ""), kernel=root, result=ok,
            elapsed_s=1.0, cost_usd=0.0,
        )  # fmt: skip
        edit = Edit("knob", "TILE=2", "tiling", f"tile {HOSTILE}", "knobs")
        edit_id = store.add_edit(
            run.id, parent_digest=root.digest, edit=edit, outcome=EDIT_UNTRIED, seq=2, kernel=child
        )
        store.record_evaluation(
            run.id, node=NodeRecord(child.digest, root.digest, edit_id, 1, 1.0, 2, -1.0, ""), kernel=child,
            result=failed, elapsed_s=2.0, cost_usd=0.0,
        )  # fmt: skip
    return store_path, run.id
