"""The Profiler: hardware feedback for a task's candidates — ncu profiles, static facts, roofline, diagnosis.

``profile`` compiles the candidates (cached), runs one ncu launch for all of them in the isolated
worker setup and attributes every kernel to its candidate. Candidates alone are profiled in the
torch-free :mod:`optiml.profile.light_target` on a case written once per profiler by
:mod:`optiml.profile.case_dump` (ncu then starts a bare Python and a CUDA context, not torch); a
batch that includes the PyTorch reference, or a case that cannot be written, uses the torch
target :mod:`optiml.profile.target`. ``diagnose`` adds ``ptxas``/SASS
facts, the roofline and the evaluation's timing, and falls back to static analysis and timing
when ncu is missing, not permitted or fails. ``roofline`` gives the task's floor under this
GPU's peaks (measured once per GPU and cached; datasheet figures as the labelled fallback).

Given the evaluator's GPU lock, the profiler holds it for its GPU work only: writing the case,
measuring the peaks, and each ncu launch from the moment its target may touch the GPU to the
launch's end. The light target starts (ncu, Python, a CUDA context, the case's upload) while the
evaluator times other candidates, says it is ready and waits for its turn
(:class:`~optiml.profile.ncu.GpuTurn`); static analysis and SASS disassembly never hold the lock.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from optiml.integrity import process
from optiml.integrity.process import LaunchBuilder, sandbox_launch
from optiml.kernel.compiler import Compiler
from optiml.kernel.source import KernelSource
from optiml.peaks import Peaks, default_cache_dir, find_peaks
from optiml.peaks import gpu_name as gpu_name  # where it was; it lives with the peaks
from optiml.profile.attribution import split_by_markers
from optiml.profile.diagnosis import Diagnosis, diagnose
from optiml.profile.light_target import MANIFEST as CASE_MANIFEST
from optiml.profile.metrics import DEFAULT_METRICS, KernelMetrics
from optiml.profile.ncu import (
    PERMISSION_HINT,
    GpuTurn,
    NcuRun,
    find_ncu,
    light_target_command,
    ncu_command,
    run_ncu,
    target_command,
)
from optiml.profile.ncu_csv import NcuRow
from optiml.profile.results import KernelProfile, Profile
from optiml.profile.roofline import Roofline, problem_bytes
from optiml.profile.sass import disassemble
from optiml.profile.static import StaticAnalysis, analyse
from optiml.task import Task
from optiml.values import CompileResult, EvalResult

REFERENCE_LABEL = "reference"  # the profile target's label for the PyTorch model (optiml.profile.target)


@dataclass(frozen=True)
class ProfileConfig:
    """How candidates are profiled. Passed down explicitly; nothing is read from the environment."""

    metrics: tuple[str, ...] = DEFAULT_METRICS
    sections: tuple[str, ...] = ()  # extra ``ncu --section`` names (their metrics join the raw page)
    seed: int = 1000  # the inputs profiled: the evaluator's first timing seed
    shape_set: int = 0
    #: one ncu launch: start-up (~5–7 s on the H200) plus task set-up, plus each entry's replay passes
    timeout_s: float = 120.0
    timeout_per_entry_s: float = 30.0
    ncu: str | None = None  # path to ncu; None = search PATH, beside nvcc, CUDA_HOME
    gpu: int | None = None  # CUDA_VISIBLE_DEVICES for the profiled process
    peaks: Peaks | None = None  # fixed peaks: skip the cache and the measurement
    measure_peaks: bool = True  # measure on first use when a GPU is visible and nothing is cached
    peaks_timeout_s: float = 300.0
    roofline_cache_dir: Path = field(default_factory=default_cache_dir)
    raw_dir: Path | None = None  # keep each ncu run's raw CSV and the target's events here
    #: candidates run in the torch-free light target (the reference always uses the torch target)
    light_target: bool = True
    case_timeout_s: float = 300.0  # writing the profiled case (a torch start-up plus the task's inputs)
    #: True: read-only filesystem + pid namespace around ncu; False: scrubbed environment, own
    #: directory, limits and no network only; None: the first, and the second if the counters turn
    #: out to be unreadable inside the namespace (ERR_NVGPUCTRPERM), said in the profile's notes
    isolate_filesystem: bool | None = None


class Profiler:
    """Hardware feedback for candidates of one task."""

    def __init__(
        self,
        task: Task,
        compiler: Compiler,
        config: ProfileConfig | None = None,
        *,
        launch: LaunchBuilder | None = None,
        io_bytes: int | None = None,
        gpu_lock: threading.Lock | None = None,
    ) -> None:
        """``launch`` replaces the sandbox (tests); ``io_bytes`` is the task's inputs + outputs if known;
        ``gpu_lock`` (the evaluator's) is held for the profiler's GPU work only: writing the case, measuring
        the peaks, and each ncu launch from when its target is ready (:class:`~optiml.profile.ncu.GpuTurn`)
        to its end. The caller must not hold it."""
        self.task = task
        self.compiler = compiler
        self.config = config or ProfileConfig()
        isolate = self.config.isolate_filesystem
        self._launch = launch or sandbox_launch(isolate_filesystem=isolate is not False)
        self._fallback_launch = sandbox_launch(isolate_filesystem=False) if launch is None and isolate is None else None
        self._io_bytes = io_bytes
        self._case: Path | str | None = None  # the light target's case folder, or why there is none
        self._case_lock = threading.Lock()
        self._case_writer: threading.Thread | None = None
        self.case_seconds = 0.0  # how long writing the case took (its wait for the GPU lock included)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._peaks: Peaks | None = None
        self._roofline: Roofline | None = None
        self._runs = 0
        self._gpu_lock = gpu_lock
        self.gpu_held_s = 0.0  # how long this profiler has held ``gpu_lock``, in all
        self.gpu_waited_s = 0.0  # how long its ready targets waited for ``gpu_lock``, in all

    # -- profiling ---------------------------------------------------------------------------
    def profile(self, kernels: Sequence[KernelSource] | KernelSource, reference: bool = False) -> list[Profile]:
        """One :class:`Profile` per kernel, in order, then the reference's if asked; never raises for a bad run."""
        batch = [kernels] if isinstance(kernels, KernelSource) else list(kernels)
        compiled = self.compiler.compile_many(batch)
        labels = [f"candidate {i}" for i in range(len(batch))]
        results: dict[str, Profile] = {}
        runnable: list[tuple[str, CompileResult]] = []
        for label, kernel, build in zip(labels, batch, compiled, strict=True):
            if build.ok and build.so_path:
                runnable.append((label, build))
            else:
                results[label] = Profile(label, kernel.digest, errors=(f"compile failed: {build.error_summary(1)}",))
        if runnable or reference:
            run = self._run([build.so_path or "" for _, build in runnable], reference)
            digests = {label: kernel.digest for label, kernel in zip(labels, batch, strict=True)}
            results.update(self._profiles_from_run(run, [label for label, _ in runnable], reference, digests))
        return [results[label] for label in labels] + ([results[REFERENCE_LABEL]] if reference else [])

    def _run(self, so_paths: list[str], reference: bool) -> NcuRun:
        ncu = find_ncu(self.config.ncu, self.compiler.nvcc)
        if ncu is None:
            return NcuRun(error="ncu (Nsight Compute) not found: install it or put ncu on PATH")
        count = len(so_paths) + int(reference)
        timeout = self.config.timeout_s + self.config.timeout_per_entry_s * max(0, count - 1)
        extra_env = {"CUDA_VISIBLE_DEVICES": str(self.config.gpu)} if self.config.gpu is not None else {}
        case = self.light_case() if self.config.light_target and not reference else None
        if isinstance(case, Path):
            folder = case
            run = self._ncu(
                ncu,
                lambda report, gate: light_target_command(folder, so_paths, report, gate),
                timeout,
                extra_env,
                gated=True,
            )
            started = any(e.get("event") == "case" for e in run.events)
            if run.error not in (None, PERMISSION_HINT) and not started and not run.error.startswith("ncu timed out"):
                self._case = f"the light target failed ({run.error})"  # never again in this profiler
                case = self._case
        if not isinstance(case, Path):
            task = str(self.task.path)
            seed, shape_set = self.config.seed, self.config.shape_set
            run = self._ncu(
                ncu,
                lambda report, _: target_command(task, so_paths, reference, seed, shape_set, report),
                timeout,
                extra_env,
            )
        if isinstance(case, str):
            run = replace(run, warnings=(*run.warnings, f"profiled in the torch target: {case}"))
        self._keep_raw(run)
        facts = next((e for e in run.events if e.get("event") == "case"), None)
        if facts is not None and self._io_bytes is None:
            self._io_bytes = int(facts["input_bytes"]) + int(facts["output_bytes"])
            self._roofline = None
        return run

    def _ncu(
        self,
        ncu: str,
        target: Callable[[Path, Path | None], list[str]],
        timeout: float,
        extra_env: dict[str, str],
        gated: bool = False,
    ) -> NcuRun:
        """One ncu launch of ``target(report path, gate path)`` in a fresh directory, under the sandbox (or
        its fallback); ``gated``: the target waits for the gate file before it uses the GPU (the light target)."""
        with tempfile.TemporaryDirectory(prefix="optiml-profile-") as tmp:
            workdir = Path(tmp)
            report = workdir / "profiled.jsonl"
            gate = workdir / "gpu-turn" if gated and self._gpu_lock is not None else None
            command = ncu_command(ncu, self.config.metrics, self.config.sections, target(report, gate))
            run = self._launch_ncu(command, self._launch, workdir, report, gate, timeout, extra_env)
            if self._fallback_launch is not None and _sandbox_refused(run):
                first = run.error
                report.unlink(missing_ok=True)
                if gate is not None:
                    gate.unlink(missing_ok=True)
                run = self._launch_ncu(command, self._fallback_launch, workdir, report, gate, timeout, extra_env)
                if run.error is None:  # it is the namespace ncu cannot work in: keep the lighter isolation
                    self._launch, self._fallback_launch = self._fallback_launch, None
                note = f"under the filesystem sandbox ncu failed ({first}); profiled with network-only isolation"
                run = replace(run, warnings=(*run.warnings, note))
        return run

    def _launch_ncu(
        self,
        command: list[str],
        launch: LaunchBuilder,
        workdir: Path,
        report: Path,
        gate: Path | None,
        timeout: float,
        extra_env: dict[str, str],
    ) -> NcuRun:
        turn = GpuTurn(self._gpu_lock, report, gate) if self._gpu_lock is not None else None
        run = run_ncu(command, launch, workdir, report, timeout, extra_env, turn)
        self._count(turn)
        return replace(run, seconds=run.seconds - turn.waited_s) if turn is not None else run  # ncu's own time

    def _count(self, turn: GpuTurn | None) -> None:
        if turn is not None:
            self.gpu_held_s += turn.held_s
            self.gpu_waited_s += turn.waited_s

    def write_case_in_background(self) -> None:
        """Start writing the light target's case now, on a thread of its own (a search calls it as it
        starts: the case's torch start-up then overlaps the first evaluations, and the first ncu launch
        finds it written). A later :meth:`light_case` waits for that write instead of starting another."""
        if not self.config.light_target or self._case_writer is not None:
            return
        self._case_writer = threading.Thread(target=self.light_case, name="optiml-profile-case", daemon=True)
        self._case_writer.start()

    def light_case(self) -> Path | str:
        """The case folder for the light target, written on first use; a one-line reason if it cannot be."""
        with self._case_lock:
            return self._write_case()

    def _write_case(self) -> Path | str:
        if self._case is None:
            began = time.perf_counter()
            self._scratch = tempfile.TemporaryDirectory(prefix="optiml-profile-case-")
            workdir = Path(self._scratch.name)
            out = workdir / "case"
            argv = [sys.executable, "-m", "optiml.profile.case_dump", "--task", str(self.task.path)]
            argv += ["--seed", str(self.config.seed), "--shape-set", str(self.config.shape_set), "--out", str(out)]
            extra_env = {"CUDA_VISIBLE_DEVICES": str(self.config.gpu)} if self.config.gpu is not None else {}
            turn = None
            if self._gpu_lock is not None:  # the case is made on the GPU (the evaluation's inputs): its turn
                turn = GpuTurn(self._gpu_lock, workdir / "case-dump.jsonl", workdir / "case-turn")
                argv += ["--report", str(turn.report), "--gate", str(turn.gate)]
            outcome = process.run(argv, self._launch, workdir, self.config.case_timeout_s, extra_env, hold=turn)
            self._count(turn)
            if (out / CASE_MANIFEST).is_file() and outcome.returncode == 0:
                self._case = out
            elif outcome.timed_out:
                self._case = f"writing the case timed out after {self.config.case_timeout_s:.0f} s"
            else:
                detail = process.last_line(outcome.stderr) or outcome.start_error or outcome.exit_text
                self._case = f"the case could not be written ({detail})"
            self.case_seconds = time.perf_counter() - began
        return self._case

    def close(self) -> None:
        """Delete the light target's case files (they are as large as the task's inputs), once a write
        in the background has ended."""
        if self._case_writer is not None:
            self._case_writer.join()
            self._case_writer = None
        with self._case_lock:
            if self._scratch is not None:
                self._scratch.cleanup()
                self._scratch, self._case = None, None

    def _profiles_from_run(
        self, run: NcuRun, candidates: list[str], reference: bool, digests: dict[str, str]
    ) -> dict[str, Profile]:
        # the target labels candidates by their position among the shared objects it was given
        target_labels = [f"candidate {j}" for j in range(len(candidates))]
        ours = dict(zip(target_labels, candidates, strict=True))
        if reference:
            ours[REFERENCE_LABEL] = REFERENCE_LABEL
        share = run.seconds / max(1, len(ours))
        if run.error is not None:
            return {
                label: Profile(label, digests.get(label, ""), errors=(run.error,), seconds=share)
                for label in ours.values()
            }
        failed = {e["label"]: e.get("error", "failed") for e in run.events if e.get("event") == "failed"}
        profiled = [e["label"] for e in run.events if e.get("event") == "profiling"]
        attribution = split_by_markers(run.rows, profiled)
        notes = tuple(run.warnings) + tuple(attribution.problems)
        profiles = {}
        for target_label, label in ours.items():
            rows = attribution.kernels.get(target_label, [])
            errors: tuple[str, ...] = ()
            if target_label in failed:
                errors = (f"the call in the profile target failed: {failed[target_label]}",)
            elif target_label not in attribution.kernels:
                errors = (
                    "not profiled: the profile target stopped early"
                    + (f" ({process.last_line(run.stderr)})" if run.stderr.strip() else ""),
                )
            elif not rows:
                errors = ("ncu captured no kernel for this call",)
            profiles[label] = Profile(
                label=label,
                kernel_digest=digests.get(label, ""),
                kernels=tuple(_kernel_profile(row) for row in rows),
                errors=errors,
                seconds=share,
                notes=notes,
            )
        return profiles

    def _keep_raw(self, run: NcuRun) -> None:
        if self.config.raw_dir is None:
            return
        self.config.raw_dir.mkdir(parents=True, exist_ok=True)
        self._runs += 1
        stem = f"{self.task.name}-{time.strftime('%Y%m%d-%H%M%S')}-{self._runs}"
        (self.config.raw_dir / f"{stem}.csv").write_text(run.stdout, encoding="utf-8")
        (self.config.raw_dir / f"{stem}.events.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in run.events), encoding="utf-8"
        )

    # -- static analysis and diagnosis -------------------------------------------------------
    def static_analysis(self, kernel: KernelSource) -> StaticAnalysis | None:
        """ptxas resources and SASS of ``kernel`` (None if it does not compile)."""
        compiled = self.compiler.compile(kernel)
        if not compiled.ok or not compiled.so_path:
            return None
        return analyse(compiled, disassemble(compiled.so_path, self.compiler.nvcc))

    def diagnose(self, kernel: KernelSource, result: EvalResult) -> Diagnosis:
        """Profile ``kernel`` if it was verified and ncu works; otherwise diagnose from static facts and timing."""
        return self.diagnose_many([(kernel, result)])[0]

    def diagnose_many(self, items: Sequence[tuple[KernelSource, EvalResult]]) -> list[Diagnosis]:
        """:meth:`diagnose` for several candidates, profiling the verified ones in ONE ncu launch.

        ncu's and the target's start-up is paid once per launch, so a batch of k candidates costs far
        less than k single diagnoses (torch target: 3.2 s vs 8.2 s each for k = 3 on the starter suite).
        Every candidate's static analysis (its SASS) runs beside the launch.
        """
        verified = [i for i, (_, result) in enumerate(items) if result.ok]
        # SASS comes from cuobjdump (~1 s a kernel): every candidate's at once, beside the ncu launch
        with ThreadPoolExecutor(max(1, len(items)), thread_name_prefix="optiml-static") as pool:
            static_futures = [pool.submit(self.static_analysis, kernel) for kernel, _ in items]
            profiled = self.profile([items[i][0] for i in verified]) if verified else []
            statics = [future.result() for future in static_futures]
        # a candidate that does not compile has no static facts and is diagnosed without a profile
        profiles = {i: p for i, p in zip(verified, profiled, strict=True) if statics[i] is not None}
        diagnoses = []
        for index, ((_, result), static) in enumerate(zip(items, statics, strict=True)):
            missing: tuple[str, ...] = ()
            if not result.ok:
                missing = (
                    f"hardware counters (candidate is {result.status.value}: only verified kernels are profiled)",
                )
            diagnoses.append(
                diagnose(
                    profile=profiles.get(index),
                    static=static,
                    roofline=self.roofline(),
                    time_ms=result.time_ms,
                    dtype=self.task.meta.dtype,
                    missing=missing,
                )
            )
        return diagnoses

    # -- roofline ----------------------------------------------------------------------------
    def roofline(self) -> Roofline:
        """The task under this GPU's roofs: intensity, floor time, regime."""
        if self._roofline is None:
            if self._io_bytes is None:
                self._io_bytes = problem_bytes(self.task, self.config.shape_set)
            self._roofline = Roofline(
                peaks=self.peaks(),
                dtype=self.task.meta.dtype,
                flops=self.task.flops(self.config.shape_set),
                min_bytes=self._io_bytes,
            )
        return self._roofline

    def peaks(self) -> Peaks:
        """Configured peaks, else cached for this GPU, else measured now (and cached), else datasheet."""
        if self._peaks is None:
            self._peaks = find_peaks(
                self.compiler,
                configured=self.config.peaks,
                gpu=self.config.gpu,
                cache_dir=self.config.roofline_cache_dir,
                measure=self.config.measure_peaks,
                timeout_s=self.config.peaks_timeout_s,
                launch=self._launch,
                gpu_lock=self._gpu_lock,
            )
        return self._peaks


def _sandbox_refused(run: NcuRun) -> bool:
    """ncu failed before the profile target started (or was refused the counters), and not by timing out.

    Inside the read-only, user-namespaced sandbox ncu may lack the capability to read the counters
    (ERR_NVGPUCTRPERM) or a writable place it expects; the target's first event shows it got going.
    """
    if run.error is None or run.error.startswith("ncu timed out"):
        return False
    started = any(e.get("event") == "case" for e in run.events)
    return run.error == PERMISSION_HINT or not started


def _kernel_profile(row: NcuRow) -> KernelProfile:
    return KernelProfile(
        name=row.kernel_name,
        launch_id=row.launch_id,
        block=row.block,
        grid=row.grid,
        metrics=KernelMetrics.from_values(row.values),
    )
