"""The offline root: template seeds and the shipped kernel compete; the fastest verified one wins."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from optiml.evaluate.cost import CostFunction
from optiml.generate.offline import OfflineRoot, RootCandidate, generate_offline_root
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task
from optiml.templates.assemble import read_marker
from optiml.templates.kernels import template_kernels
from optiml.values import EvalResult, EvalStatus, TimingStats

ROOT = Path(__file__).resolve().parents[2]


def ok(time_ms: float) -> EvalResult:
    timing = TimingStats(median_ms=time_ms, q1_ms=time_ms, q3_ms=time_ms, min_ms=time_ms, max_ms=time_ms, trials=5)
    return EvalResult(status=EvalStatus.OK, timing=timing)


class FakeEvaluator:
    """Results by candidate position (``outcome(k, kernel)``); records what it was asked to evaluate."""

    def __init__(self, outcome: Callable[[int, KernelSource], EvalResult]) -> None:
        self.outcome = outcome
        self.batches: list[list[KernelSource]] = []
        self.singles: list[KernelSource] = []

    @property
    def reference(self) -> dict[str, TimingStats]:
        return {}

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        self.singles.append(kernel)
        return self.outcome(len(self.singles) - 1, kernel)

    def evaluate_many(self, kernels: Sequence[KernelSource]) -> list[EvalResult]:
        self.batches.append(list(kernels))
        return [self.outcome(k, kernel) for k, kernel in enumerate(kernels)]

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        raise AssertionError("not used")


class SerialEvaluator(CostFunction):
    """An evaluator of one candidate at a time: ``evaluate_many`` is the protocol's, one ``evaluate`` each."""

    def __init__(self) -> None:
        self.seen: list[KernelSource] = []

    @property
    def reference(self) -> dict[str, TimingStats]:
        return {}

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        self.seen.append(kernel)
        return ok(1.0 + len(self.seen))

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        raise AssertionError("not used")


def softmax() -> tuple[Task, KernelSource]:
    task = load_task(ROOT / "tasks" / "softmax.py")
    assert task.naive_kernel_path is not None
    return task, KernelSource.from_file(task.naive_kernel_path)


def test_the_fastest_verified_candidate_is_the_root() -> None:
    task, naive = softmax()
    times = [2.0, 1.0, 3.0, 4.0, 5.0, 6.0]
    evaluator = FakeEvaluator(lambda k, kernel: ok(times[k]))
    root = generate_offline_root(task, evaluator, seeds=4, naive=naive)
    kernels = template_kernels(task)
    seeds = kernels.seeds(4)
    assert root.plan == kernels.describe() == "reduce[amax sub exp sum div]"
    assert root.error == ""
    assert len(evaluator.batches) == 1, "every candidate in one parallel batch"
    assert len(root.candidates) == len(seeds) + 1
    assert [c.kernel.digest for c in root.candidates] == [k.digest for k in evaluator.batches[0]]
    templates, shipped = root.candidates[:-1], root.candidates[-1]
    assert shipped.label == "shipped kernel" and shipped.kernel == naive
    for candidate, configs in zip(templates, seeds, strict=True):
        assert candidate.label == "template " + " + ".join(c.label() for c in configs)
        assert read_marker(candidate.kernel.code) == configs
    assert root.best is root.candidates[1]
    summary = root.summary()
    assert summary.splitlines()[0] == f"plan: {root.plan}"
    assert "shipped kernel: " in summary and "1.0000 ms" in summary


def test_a_failed_candidate_never_wins_and_the_shipped_kernel_can() -> None:
    task, naive = softmax()

    def outcome(k: int, kernel: KernelSource) -> EvalResult:
        if kernel == naive:
            return ok(0.5)
        if k == 0:  # "fastest", but wrong
            return EvalResult(status=EvalStatus.WRONG_ANSWER, message="mismatch at [0, 0]")
        return ok(1.0 + k)

    root = generate_offline_root(task, FakeEvaluator(outcome), seeds=2, naive=naive)
    assert len(root.candidates) == 3
    assert root.best is not None and root.best.label == "shipped kernel"
    assert "wrong_answer (mismatch at [0, 0])" in root.summary()
    without = generate_offline_root(task, FakeEvaluator(outcome), seeds=2)
    assert without.best is not None and without.best.label.startswith("template ")
    assert without.best is without.candidates[1]


def test_no_verified_candidate_means_no_root_and_says_why_each_failed() -> None:
    task, naive = softmax()
    evaluator = FakeEvaluator(
        lambda k, kernel: (
            EvalResult(status=EvalStatus.COMPILE_ERROR, message=f"nvcc: error {k}\nmore")
            if k == 0
            else EvalResult(status=EvalStatus.WRONG_ANSWER, message="max abs diff 0.5")
        )
    )
    root = generate_offline_root(task, evaluator, seeds=2, naive=naive)
    assert root.candidates and root.best is None
    reason = root.failure_reason()
    assert reason.startswith("no root candidate verified: ") and "\n" not in reason
    assert f"{root.candidates[0].label}: compile_error (nvcc: error 0)" in reason
    assert f"{root.candidates[1].label}: wrong_answer (max abs diff 0.5)" in reason


def test_a_long_failure_message_is_cut_at_a_word_and_says_so() -> None:
    task, _ = softmax()
    long = "the judge ran out of GPU memory: " + "cuMemCreate failed " * 20
    root = generate_offline_root(task, FakeEvaluator(lambda k, kernel: EvalResult(EvalStatus.OUT_OF_MEMORY, long)))
    reason = root.failure_reason()
    for candidate in root.candidates:
        part = reason.split(f"{candidate.label}: out_of_memory (")[1].split(")")[0]
        assert part.endswith(" …") and len(part) <= 200
        assert part.removesuffix(" …").split()[-1] in {"cuMemCreate", "failed"}  # whole words only


def test_a_whole_models_label_is_cut_so_each_candidates_reason_shows() -> None:
    """Level 3's plans name dozens of kernels: four labels of ~3 000 characters hid the reasons between them."""
    _, naive = softmax()
    wrong = EvalResult(status=EvalStatus.WRONG_ANSWER, message="output 0: 1999 of 2000 elements off")
    label = "template " + " + ".join(f"stencil(rows={k},tx=64,ty=4)" for k in range(60))
    root = OfflineRoot(candidates=[RootCandidate(label, naive, wrong), RootCandidate("shipped kernel", naive, wrong)])
    reason = root.failure_reason()
    assert len(reason) < 500 and reason.count("wrong_answer (output 0: 1999 of 2000 elements off)") == 2
    assert "template stencil(rows=0,tx=64,ty=4) + " in reason and " …: wrong_answer" in reason


def test_wrong_answers_against_an_ill_conditioned_reference_say_so() -> None:
    """KernelBench's level3/24_EfficientNetB2 (training-mode batch norm over two values a channel) is 0.7 from
    float64 in fp32: its four roots' "wrong answer" alone sent the reader looking for a bug."""
    _, naive = softmax()
    note = (
        "output 0 (shape set 0, native inputs): the reference is 0.712 from float64 (5.4e+03x the tolerance): "
        "ill-conditioned, another correct rounding lands as far on the other side; atol 0.0001 -> 1.43"
    )
    wrong = EvalResult(status=EvalStatus.WRONG_ANSWER, message="output 0: 1999 of 2000 elements off")
    flagged = replace(wrong, task_notes=["verification inputs: native", note])
    root = OfflineRoot(candidates=[RootCandidate("a", naive, flagged), RootCandidate("b", naive, flagged)])
    assert root.failure_reason().endswith("every answer judged against an ill-conditioned reference: " + note)
    crashed = EvalResult(status=EvalStatus.CRASH, message="segfault", task_notes=[note])
    mixed = OfflineRoot(candidates=[RootCandidate("a", naive, flagged), RootCandidate("b", naive, crashed)])
    assert "ill-conditioned" not in mixed.failure_reason()  # a crash is the kernel's own fault
    plain = OfflineRoot(candidates=[RootCandidate("a", naive, wrong)])
    assert "ill-conditioned" not in plain.failure_reason()


def test_an_unsupported_op_is_an_error_and_the_shipped_kernel_is_still_evaluated() -> None:
    task = load_task(ROOT / "tests" / "tasks" / "unplannable" / "sort_rows.py")
    evaluator = FakeEvaluator(lambda k, kernel: ok(1.0))
    root = generate_offline_root(task, evaluator)
    assert root.candidates == [] and root.best is None and root.plan == ""
    assert "aten.sort" in root.error and "configure an LLM" in root.error
    assert "\n" not in root.error
    assert evaluator.batches == [] and evaluator.singles == []
    assert root.summary() == f"no template kernel: {root.error}"

    assert task.naive_kernel_path is not None
    naive = KernelSource.from_file(task.naive_kernel_path)
    root = generate_offline_root(task, evaluator, naive=naive)
    assert root.error and root.plan == ""
    assert [c.label for c in root.candidates] == ["shipped kernel"]
    assert evaluator.batches == [[naive]]
    assert root.best is root.candidates[0]


def test_an_evaluator_of_one_candidate_at_a_time_is_called_per_candidate() -> None:
    task, naive = softmax()
    evaluator = SerialEvaluator()
    root = generate_offline_root(task, evaluator, seeds=2, naive=naive)
    assert [c.kernel for c in root.candidates] == evaluator.seen
    assert len(evaluator.seen) == 3
    assert root.best is root.candidates[0]
