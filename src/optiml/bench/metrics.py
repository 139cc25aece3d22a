"""One row per task, and the suite's metrics as KernelBench and published systems report them.

``fast_p`` (KernelBench): the share of *all* tasks whose kernel is both verified and faster than the
baseline by more than a factor ``p`` (``fast_0`` is the correctness rate). Geomean speedups and the
median fraction of the DRAM floor are over the verified tasks.

Two clocks (issue 38). The *judge's* times (``best_ms``, ``baselines_ms``) come from the search's
evaluator. The *user's* come from the exported ``ModelNew`` timed in a fresh process as KernelBench times
it, beside eager and ``torch.compile`` in that process (``user_clock``, :mod:`optiml.bench.user_clock`).
A row measured in the user's process has its headline speedups (:meth:`BenchRow.speedup`) on the user's
clock (cold medians), or none where that measurement failed; a row never measured there (``--no-user-clock``,
an older bench) keeps the judge's. The metrics say which clock their headline is (``clock``), keep the
judge's figures as ``judge_*``, and add the agreement (judge ÷ user) and KernelBench's own verdict.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from optiml.bench.user_clock import UserClockResult, agreement

FAST_P = (0.0, 1.0, 1.5, 2.0)
BASELINES = ("eager", "eager_tf32", "compile")  # exact fp32, PyTorch's default settings (TF32 convs), compile
#: The faster of PyTorch's defaults (eager) and torch.compile: KernelBench v3's baseline for fast_p.
FASTEST = "fastest"
USER_CLOCK = "user's process (KernelBench's cold timing, median)"
JUDGE_CLOCK = "judge"


@dataclass
class BenchRow:
    task: str
    file: str
    status: str  # "verified" | "no kernel" | "failed"
    reason: str = ""
    plan: str = ""
    root: str = ""
    best_ms: float | None = None
    baselines_ms: dict[str, float] = field(default_factory=dict)  # "eager", "eager_tf32", "compile"
    floor_ms: float | None = None
    evaluations: int = 0
    confirmed: bool = False
    run_id: str = ""
    gpu: int | None = None
    device: str = ""  # the GPU's name as its worker reports it: every time in the row is from it
    wall_s: float = 0.0
    # where the row's wall time went: "prepare" (task, references, calibration), "roots" (the template seeds'
    # evaluations), "search", "user_clock"
    phases_s: dict[str, float] = field(default_factory=dict)
    # "prepare" in steps: the worker's cases and sensitivity, each reference mode's timing, the compute roof
    prepare_steps_s: dict[str, float] = field(default_factory=dict)
    cost_usd: float = 0.0
    # the user's process (UserClockResult.to_dict()); None: not measured there
    user_clock: dict[str, Any] | None = None

    @property
    def verified(self) -> bool:
        return self.status == "verified" and self.best_ms is not None

    @property
    def clock(self) -> str:
        """Which clock this row's headline speedups come from."""
        return USER_CLOCK if self.user_clock is not None else JUDGE_CLOCK

    def speedup(self, baseline: str) -> float | None:
        """The headline speedup over ``baseline`` (or :data:`FASTEST`): the user's clock where the row was
        measured there (None if that failed), else the judge's."""
        return self.user_speedup(baseline) if self.user_clock is not None else self.judge_speedup(baseline)

    def judge_speedup(self, baseline: str) -> float | None:
        if baseline == FASTEST:
            found = [ms for b in ("eager_tf32", "compile") if (ms := self.baselines_ms.get(b)) is not None]
            ref = min(found) if found else None
        else:
            ref = self.baselines_ms.get(baseline)
        if not self.verified or ref is None or not self.best_ms:
            return None
        return ref / self.best_ms

    @property
    def user(self) -> UserClockResult | None:
        return UserClockResult.from_dict(self.user_clock) if self.user_clock is not None else None

    def user_speedup(self, baseline: str, clock: str = "cold") -> float | None:
        user = self.user
        if not self.verified or user is None or not user.ok:
            return None
        return user.speedup(baseline, clock)

    @property
    def user_ms(self) -> float | None:
        user = self.user
        return user.ms("model_new") if user is not None else None

    @property
    def agreement(self) -> float | None:
        """judge ÷ user's process for this row's kernel (cold, KernelBench's method)."""
        user = self.user
        return agreement(self.best_ms, user) if self.verified and user is not None else None

    @property
    def baseline_agreement(self) -> dict[str, float]:
        """Per baseline, the judge's time ÷ the user's process's (cold): whether the judge's own clock reads the
        references as the user's does (its speedups, shown by ``optiml optimize``, rest on them)."""
        user = self.user
        if user is None or not user.ok:
            return {}
        ratios = {}
        for baseline, judge_ms in self.baselines_ms.items():
            user_ms = user.ms(baseline)
            if user_ms:
                ratios[baseline] = judge_ms / user_ms
        return ratios

    @property
    def kernelbench(self) -> dict[str, Any] | None:
        """KernelBench's verdict on the exported ModelNew: passed, its speedup over the default-settings
        reference under its own timing (mean over mean), and why it failed."""
        user = self.user
        if user is None:
            return None
        if user.verdict is None:
            return {"passed": None, "speedup": None, "reason": user.error}
        return {"passed": user.verdict.passed, "speedup": user.kernelbench_speedup, "reason": user.verdict.reason}

    @property
    def roofline_fraction(self) -> float | None:
        """The share of the physics floor the kernel reaches, on the headline's clock: the user's process where
        the row was measured there (None if that failed), else the judge's."""
        if self.user_clock is not None:
            return self._floor_share(self.user_ms)
        return self.judge_roofline_fraction

    @property
    def judge_roofline_fraction(self) -> float | None:
        return self._floor_share(self.best_ms)

    def _floor_share(self, ms: float | None) -> float | None:
        if not self.verified or not self.floor_ms or not ms:
            return None
        return self.floor_ms / ms

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["clock"] = self.clock
        shown = dict.fromkeys([*self.baselines_ms, *(BASELINES if self.user_clock is not None else ()), FASTEST])
        data["speedups"] = {b: self.speedup(b) for b in shown}
        data["judge_speedups"] = {b: self.judge_speedup(b) for b in (*self.baselines_ms, FASTEST)}
        if self.user_clock is not None:
            data["user_ms"] = self.user_ms
            data["agreement"] = self.agreement
            data["baseline_agreement"] = self.baseline_agreement
            data["kernelbench"] = self.kernelbench
        data["roofline_fraction"] = self.roofline_fraction
        data["judge_roofline_fraction"] = self.judge_roofline_fraction
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchRow:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def suite_metrics(rows: list[BenchRow]) -> dict[str, Any]:
    total = len(rows)
    verified = [r for r in rows if r.verified]
    metrics: dict[str, Any] = {"tasks": total, "verified": len(verified)}
    metrics["correctness"] = len(verified) / total if total else 0.0
    on_user = [r for r in verified if r.user_clock is not None]
    if on_user:
        metrics["clock"] = USER_CLOCK if len(on_user) == len(verified) else f"{USER_CLOCK}; judge for the rest"
    _speedups(metrics, verified, total, "", BenchRow.speedup)
    if on_user:  # the judge's own figures beside the headline, and the user's process at steady state
        _speedups(metrics, verified, total, "judge_", BenchRow.judge_speedup)
        _speedups(metrics, verified, total, "warm_", _warm_speedup)
    fractions = [f for r in verified if (f := r.roofline_fraction) is not None]
    if fractions:
        metrics["median_roofline_fraction"] = statistics.median(fractions)
    judged = [f for r in verified if (f := r.judge_roofline_fraction) is not None]
    if on_user and judged:
        metrics["judge_median_roofline_fraction"] = statistics.median(judged)
    if on_user:
        ratios = [a for r in on_user if (a := r.agreement) is not None]
        if ratios:
            metrics["median_agreement"] = statistics.median(ratios)  # judge ÷ user
            metrics["max_agreement_error"] = max(abs(a - 1.0) for a in ratios)
        per_row = [r.baseline_agreement for r in on_user]  # each parses the row's user clock once
        for baseline in BASELINES:  # the judge's reference times against the user's process's
            references = [row[baseline] for row in per_row if baseline in row]
            if references:
                metrics[f"median_{baseline}_agreement"] = statistics.median(references)
        verdicts = [v for r in on_user if (v := r.kernelbench) is not None]
        metrics["kernelbench_passed"] = sum(1 for v in verdicts if v["passed"])
        metrics["kernelbench_pass_rate"] = metrics["kernelbench_passed"] / total
        metrics["user_clock_failed"] = sorted(r.task for r in on_user if r.user is None or not r.user.ok)
    metrics["not_verified"] = sorted(r.task for r in rows if not r.verified)
    return metrics


def _warm_speedup(row: BenchRow, baseline: str) -> float | None:
    """The speedup in the user's process with calls back to back (no flush, no sync between calls): a baseline's
    launch cost (torch.compile's guards and wrapper) overlaps the previous call's device work, as in a model's
    loop, where the cold clock shows the part the 256 MB flush does not cover."""
    return row.user_speedup(baseline, "warm")


def _speedups(metrics: dict[str, Any], verified: list[BenchRow], total: int, prefix: str, speedup: Any) -> None:
    """Geomean and fast_p against every baseline, under ``prefix``."""
    for baseline in (*BASELINES, FASTEST):
        speedups = [s for r in verified if (s := speedup(r, baseline)) is not None]
        if not speedups:
            continue
        metrics[f"{prefix}geomean_vs_{baseline}"] = statistics.geometric_mean(speedups)
        for p in FAST_P:
            metrics[f"{prefix}fast_{p:g}_vs_{baseline}"] = sum(1 for s in speedups if s > p) / total


def markdown(rows: list[BenchRow], metrics: dict[str, Any], notes: Sequence[str] = ()) -> str:
    """The per-task table and the suite metrics, as Markdown; ``notes`` follow as lines of their own."""
    devices = sorted({r.device for r in rows if r.device})
    lines = [f"Measured on {', '.join(devices)}; each task's kernel and baselines on one GPU.", ""] if devices else []
    if any(r.user_clock is not None for r in rows):
        lines += _user_table(rows)
        return _with_metrics(lines, metrics, notes)
    lines += [
        "| task | status | best ms | eager ms | eager TF32 ms | compile ms | × eager | × eager TF32 | × compile "
        "| roofline | evals |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        cells = [
            r.task,
            r.status if r.verified else f"{r.status}: {r.reason[:60]}",
            _num(r.best_ms),
            _num(r.baselines_ms.get("eager")),
            _num(r.baselines_ms.get("eager_tf32")),
            _num(r.baselines_ms.get("compile")),
            _ratio(r.speedup("eager")),
            _ratio(r.speedup("eager_tf32")),
            _ratio(r.speedup("compile")),
            f"{r.roofline_fraction:.0%}" if r.roofline_fraction is not None else "",
            str(r.evaluations),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return _with_metrics(lines, metrics, notes)


def _user_table(rows: list[BenchRow]) -> list[str]:
    """The table with the user's clock as the headline: speedups of the exported kernel in a fresh process
    (KernelBench's cold timing, medians) over eager exact fp32, eager under PyTorch's defaults,
    torch.compile and the faster of the last two; then both clocks' times, their agreement and
    KernelBench's verdict (its correctness check, and its speedup: mean over mean against the defaults)."""
    lines = [
        "Speedups on the user's clock: the exported ModelNew in a fresh process, timed as KernelBench times it "
        "(cold, median), beside eager and torch.compile in that process; the judge's time for comparison. "
        "Warm: the same with calls back to back, where torch.compile's launch cost overlaps earlier work.",
        "",
        "| task | status | × eager | × eager default | × compile | × fastest | × compile, warm | user ms | judge ms "
        "| judge ÷ user | KernelBench | KB × | roofline | evals |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        verdict = r.kernelbench
        if verdict is None or not r.verified:
            shown = ""
        elif verdict["passed"]:
            shown = "pass"
        else:
            shown = f"fail: {str(verdict['reason'])[:80]}" if verdict["passed"] is False else "not run"
        user = r.user
        status = r.status if r.verified else f"{r.status}: {r.reason[:60]}"
        if r.verified and user is not None and not user.ok:
            status += f" (user clock: {user.error[:60] or 'no ModelNew time'})"
        cells = [
            r.task,
            status,
            _ratio(r.speedup("eager")),
            _ratio(r.speedup("eager_tf32")),
            _ratio(r.speedup("compile")),
            _ratio(r.speedup(FASTEST)),
            _ratio(_warm_speedup(r, "compile")),
            _num(r.user_ms),
            _num(r.best_ms),
            f"{r.agreement:.2f}" if r.agreement is not None else "",
            shown,
            _ratio(verdict["speedup"]) if verdict is not None else "",
            f"{r.roofline_fraction:.0%}" if r.roofline_fraction is not None else "",
            str(r.evaluations),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _with_metrics(lines: list[str], metrics: dict[str, Any], notes: Sequence[str]) -> str:
    lines += ["", "| metric | value |", "| --- | ---: |"]
    for key, value in metrics.items():
        shown = (
            f"{value:.3f}" if isinstance(value, float) else ", ".join(value) if isinstance(value, list) else str(value)
        )
        lines.append(f"| {key} | {shown} |")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else ""


def _ratio(value: float | None) -> str:
    return f"{value:.2f}×" if value is not None else ""
