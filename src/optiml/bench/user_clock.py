"""The user's clock: a verified kernel exported as KernelBench's ``ModelNew`` and measured in a fresh plain
Python process the way a user, or KernelBench itself, runs it (issues 38 and 41).

:func:`measure_kernel` renders the export (and, if asked, the ``torch.library`` op) into a temporary
folder with :mod:`optiml.export`, copies :mod:`optiml.bench.user_clock_child` beside it and runs that
script with this interpreter and a timeout: it imports only the standard library and torch, so nothing of
OptiML's is in the process it times. The child prints one JSON line; it becomes a
:class:`UserClockResult`: KernelBench's verdict (its correctness check: default-settings reference, its
tolerances, its seeded trials) and, for ``ModelNew``, the op, eager (exact fp32), eager under PyTorch's
defaults (``eager_tf32``) and ``torch.compile``, the cold time (KernelBench's
``time_execution_with_cuda_event``) and the warm one (back-to-back calls). Nothing here raises for a
failed measurement: the result's ``error`` says, in one line, what went wrong.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from optiml.kernel.source import KernelSource
from optiml.task import Task

if TYPE_CHECKING:
    from optiml.bench.runner import BenchWorker

CHILD = Path(__file__).with_name("user_clock_child.py")
MARKER = "OPTIML_USER_CLOCK "
#: The subjects a measurement times, and the baselines a speedup divides (``eager``: exact fp32;
#: ``eager_tf32``: PyTorch's default settings; ``fastest``: the faster of those two defaults, eager or
#: ``torch.compile``, KernelBench v3's baseline for fast_p).
SUBJECTS = ("model_new", "op", "eager_tf32", "eager", "compile")
BASELINES = ("eager", "eager_tf32", "compile", "fastest")
CLOCKS = ("cold", "warm")


@dataclass(frozen=True)
class UserClockOptions:
    """How to measure: KernelBench's counts by default (5 correctness trials, 100 timed trials, seed 42)."""

    device: str = "cuda"  # "cuda", "cuda:N" or "cpu" (the child's CPU mode, for tests)
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES for the child (as the judge's worker gets it)
    correct_trials: int = 5
    perf_trials: int = 100
    seed: int = 42
    torch_compile: bool = True
    torch_op: bool = False  # also the `--as op` export
    warm_windows: int = 10
    window_ms: float = 20.0
    timeout_s: float = 1800.0
    #: input sets of this many bytes or more are drawn by parallel processes (user_clock_child.draw_inputs)
    parallel_input_bytes: int = 1 << 28
    #: processes drawing them, at the lowest priority, while a process started ahead waits for its spec
    #: (:class:`ReadyProcess`); None: half the machine's cores, as after the spec, where it has 4 or more, else none
    #: (the judge times its candidates meanwhile: its processes come first)
    draw_ahead_cores: int | None = None


def draw_ahead_cores(options: UserClockOptions) -> int:
    """How many processes draw input sets ahead of the spec under ``options`` (0: none)."""
    if options.draw_ahead_cores is not None:
        return max(0, options.draw_ahead_cores)
    cores = os.cpu_count() or 1
    return cores // 2 if cores >= 4 else 0


@dataclass(frozen=True)
class ClockStats:
    """Per-call times of one subject under one method, in ms."""

    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    trials: int
    calls_per_trial: int = 1


@dataclass(frozen=True)
class Timing:
    """One subject's cold (KernelBench's method) and warm times, or why it has none."""

    cold: ClockStats | None = None
    warm: ClockStats | None = None
    error: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        def read(key: str) -> ClockStats | None:
            value = data.get(key)
            return ClockStats(**value) if isinstance(value, dict) else None

        return cls(cold=read("cold"), warm=read("warm"), error=str(data.get("error", "")))


@dataclass(frozen=True)
class Verdict:
    """KernelBench's correctness check of the exported ``ModelNew``."""

    passed: bool
    trials: int
    passed_trials: int
    tolerance: float
    max_abs_diff: float | None = None
    reason: str = ""  # why it failed
    exact_max_abs_diff: float | None = None
    default_vs_exact: float | None = None


@dataclass(frozen=True)
class UserClockResult:
    """What the user's process measured (``error``: the measurement as a whole failed, in one line)."""

    task: str
    device: str = ""
    torch: str = ""
    precision: str = ""
    verdict: Verdict | None = None
    timings: dict[str, Timing] = field(default_factory=dict)
    kernelbench_speedup: float | None = None  # KernelBench's figure: mean default-eager / mean ModelNew, cold
    input_bytes: int = 0
    output_bytes: int = 0
    wall_s: float = 0.0  # the measurement inside the process (its start and ``import torch`` not included)
    #: where the process's time went, in s: ``import`` (torch), ``device`` (CUDA's context), ``load`` (the task
    #: and the export), ``check_*`` (KernelBench's trials: its inputs, the reference, ModelNew, whose first call
    #: loads the kernel, the comparison), ``inputs``, then each timed subject (``compile``: torch.compile's build)
    phases_s: dict[str, float] = field(default_factory=dict)
    process_s: float = 0.0  # the fresh process from its spec to its answer, as the bench waited for it
    waited_s: float = 0.0  # a process started ahead (:class:`ReadyProcess`): how long it waited for its spec
    inputs_drawn_in_parallel: int = 0  # KernelBench's input sets drawn at once by forked processes (0: in turn)
    inputs_drawn_ahead: bool = False  # ... and they were drawn while the process waited for its spec
    error: str = ""
    #: whose build of the kernel the export loaded: "judge" (the judge's verified binary, seeded into the
    #: export's cache: same source, flags and GPU code; see :func:`seed_export_build`) or "export" (its own)
    binary: str = "export"

    @property
    def ok(self) -> bool:
        return not self.error and self.ms("model_new") is not None

    def ms(self, subject: str, clock: str = "cold") -> float | None:
        """The median time of ``subject`` (``fastest``: the faster of eager_tf32 and compile)."""
        if subject == "fastest":
            found = [t for s in ("eager_tf32", "compile") if (t := self.ms(s, clock)) is not None]
            return min(found) if found else None
        timing = self.timings.get(subject)
        stats = getattr(timing, clock, None) if timing is not None else None
        return stats.median_ms if stats is not None else None

    def speedup(self, baseline: str, clock: str = "cold", subject: str = "model_new") -> float | None:
        ref, mine = self.ms(baseline, clock), self.ms(subject, clock)
        return ref / mine if ref is not None and mine else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UserClockResult:
        verdict = data.get("verdict")
        timings = data.get("timings") or {}
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k not in ("verdict", "timings")}
        return cls(
            **known,
            verdict=Verdict(**verdict) if isinstance(verdict, dict) else None,
            timings={name: Timing.from_dict(t) for name, t in timings.items() if isinstance(t, dict)},
        )


@dataclass(frozen=True)
class Prebuilt:
    """The judge's build of a kernel: its shared object and the architecture it was built for."""

    so_path: Path
    arch: str


def seed_export_build(task: Task, kernel: KernelSource, prebuilt: Prebuilt) -> bool:
    """Put the judge's build of ``kernel`` where the export looks for its own (``library_key``), unless one is
    there: the export then loads the binary the judge verified instead of spending up to a minute in nvcc
    (a level-3 model's 20 000 lines) on the same source, flags and GPU code. Only the host code differs (the
    judge builds it at ``-O1``; it is the argument block and the launches). True where it was seeded."""
    from optiml.export.rendering import export_cache_root, library_key

    folder = export_cache_root() / library_key(task, kernel, prebuilt.arch)
    if (folder / "kernel.so").is_file() or not prebuilt.so_path.is_file():
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-seed-", dir=folder.parent))
    shutil.copyfile(prebuilt.so_path, work / "kernel.so")
    try:
        work.rename(folder)  # whole or not at all, as the export's own build lands
    except OSError:  # another process put one there meanwhile: theirs is used
        shutil.rmtree(work, ignore_errors=True)
        return False
    return True


def measure_kernel(
    task: Task,
    kernel: KernelSource,
    options: UserClockOptions | None = None,
    store: str | Path | None = None,
    prebuilt: Prebuilt | None = None,
    ready: ReadyProcess | None = None,
) -> UserClockResult:
    """Export ``kernel`` for ``task`` (labelled with its verification from ``store`` where one is recorded)
    and measure it in a fresh process (``ready``'s, started with ``options``, where given); every failure, the
    export's included, is the result's ``error``. ``prebuilt``: the judge's build, loaded by the export in place
    of its own (:func:`seed_export_build`)."""
    options = options or UserClockOptions()
    from optiml.errors import OptimlError
    from optiml.export.kernelbench import render_model_new
    from optiml.export.op import render_op
    from optiml.export.signature import read_signature
    from optiml.export.verification import find_verification

    with tempfile.TemporaryDirectory(prefix="optiml-user-clock-") as folder:
        work = Path(folder)
        try:
            verification = find_verification(store, task, kernel) if store is not None else None
            signature = read_signature(task)
            model_new = work / f"{_module_name(task)}_model_new.py"
            model_new.write_text(render_model_new(task, kernel, verification, str(store or ""), signature))
            op_file = None
            if options.torch_op:
                op_file = work / f"{_module_name(task)}_op.py"
                op_file.write_text(
                    render_op(
                        task, kernel, verification, str(store or ""), module_hint=op_file.stem, signature=signature
                    )
                )
        except (OptimlError, OSError) as exc:
            return UserClockResult(task=task.name, error=f"export: {_one_line(exc)}")
        seeded = prebuilt is not None and seed_export_build(task, kernel, prebuilt)
        result = measure_files(
            task.name, task.path, model_new, options, op_file=op_file, precision=task.meta.dtype, ready=ready
        )
        return replace(result, binary="judge") if seeded else result


#: the child's environment variable naming the process that started it (it stops waiting once that one is gone;
#: the child, which imports no OptiML, names it too: ``user_clock_child.PARENT_VARIABLE``)
PARENT_VARIABLE = "OPTIML_USER_CLOCK_PARENT"


class ReadyProcess:
    """A user's process started ahead of its measurement: the child's ``import torch`` (3–5 s, no CUDA) runs
    while the judge works, then the child waits for its spec file; :func:`measure_files` writes it. ``close()``
    ends a process that never got one (the task failed first) and removes its folder. A child whose parent is
    gone stops waiting. Given the task file, the child also starts drawing KernelBench's input sets while it
    waits (a level-1 set takes ~30 s on the CPU; by :func:`draw_ahead_cores` processes at the lowest priority:
    the child's ``draw_ahead``), used if its spec names the same task and draw."""

    def __init__(self, options: UserClockOptions | None = None, task_file: Path | None = None) -> None:
        self.options = options or UserClockOptions()
        self._folder = tempfile.TemporaryDirectory(prefix="optiml-user-clock-run-")
        self.work = Path(self._folder.name)
        self.spec = self.work / "spec.json"
        child = self.work / CHILD.name
        shutil.copyfile(CHILD, child)
        env = {**os.environ, PARENT_VARIABLE: str(os.getpid())}
        if self.options.visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.options.visible_devices
        ahead: list[str] = []
        cores = draw_ahead_cores(self.options)
        if task_file is not None and cores:
            ahead_file = self.work / "ahead.json"
            ahead_file.write_text(json.dumps({**_draw_fields(task_file, self.options), "cores": cores}), "utf-8")
            ahead = [str(ahead_file)]
        self.process = subprocess.Popen(
            [sys.executable, str(child), str(self.spec), *ahead],
            cwd=self.work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def start(self, spec: dict[str, Any]) -> None:
        """Hand the child its spec (whole or not at all: written beside, then renamed)."""
        ready = self.work / "spec.json.part"
        ready.write_text(json.dumps(spec), encoding="utf-8")
        ready.rename(self.spec)

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.communicate()
        self._folder.cleanup()

    def __enter__(self) -> ReadyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def measure_files(
    name: str,
    task_file: Path,
    model_new_file: Path,
    options: UserClockOptions | None = None,
    *,
    op_file: Path | None = None,
    precision: str = "float32",
    ready: ReadyProcess | None = None,
) -> UserClockResult:
    """Measure a ready ``ModelNew`` file (any file defining ``ModelNew``, as KernelBench accepts) against
    ``task_file``'s ``Model`` in a fresh process: ``ready``'s, started earlier with these options, or a new one."""
    if ready is None:
        with ReadyProcess(options) as fresh:
            return measure_files(
                name, task_file, model_new_file, options, op_file=op_file, precision=precision, ready=fresh
            )
    options = ready.options
    spec = {
        **_draw_fields(task_file, options),
        "model_new_file": str(Path(model_new_file).resolve()),
        "op_file": str(Path(op_file).resolve()) if op_file is not None else None,
        "build_dir": str(ready.work / "torch_extensions"),
        "device": options.device,
        "precision": precision,
        "perf_trials": options.perf_trials,
        "torch_compile": options.torch_compile,
        "warm_windows": options.warm_windows,
        "window_ms": options.window_ms,
    }
    begin = time.perf_counter()
    ready.start(spec)
    data, error = collect(ready.process, options.timeout_s)
    process_s = round(time.perf_counter() - begin, 2)
    if data is None:
        return UserClockResult(task=name, error=error, wall_s=process_s, process_s=process_s)
    try:
        return UserClockResult.from_dict({**data, "task": name, "process_s": process_s})
    except (TypeError, ValueError) as exc:
        return UserClockResult(task=name, error=f"the user's process answered an unreadable result: {_one_line(exc)}")


def _draw_fields(task_file: Path, options: UserClockOptions) -> dict[str, Any]:
    """The spec's fields that decide KernelBench's input sets (the child's ``AHEAD_FIELDS``)."""
    return {
        "task_file": str(Path(task_file).resolve()),
        "seed": options.seed,
        "correct_trials": options.correct_trials,
        "parallel_input_bytes": options.parallel_input_bytes,
    }


def collect(process: subprocess.Popen[str], timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """Wait for the child (its session killed whole on timeout); (its JSON, "") or (None, why)."""
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None, f"the user's process timed out after {timeout_s:g} s"
    data = parse_line(out)
    if data is not None:
        return data, ""
    tail = [line for line in err.strip().splitlines() if line.strip()]
    why = tail[-1].strip() if tail else "no output"
    code = process.returncode
    status = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    return None, f"the user's process ended ({status}) without a result: {why}"[:400]


def parse_line(stdout: str) -> dict[str, Any] | None:
    """The child's result: the JSON of its last line that starts with the marker (None without one)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def agreement(judge_ms: float | None, result: UserClockResult, clock: str = "cold") -> float | None:
    """judge ÷ user's process, for the same kernel (1.0: the two clocks agree)."""
    user = result.ms("model_new", clock)
    if judge_ms is None or not user or not math.isfinite(judge_ms):
        return None
    return judge_ms / user


def _module_name(task: Task) -> str:
    """A file stem Python can import (KernelBench names start with digits: ``19_ReLU`` → ``t19_ReLU``)."""
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in task.name)
    return stem if stem[:1].isalpha() else f"t{stem}"


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:400]


#: Inputs and outputs over this, and the judge's worker is stopped before the user's process runs (it starts
#: again on the next task's first request), so the two never hold a large task's buffers on the GPU at once.
RELEASE_BYTES = 1 << 30
#: The judge's worker is also stopped when the card has less than this share of its memory free after the search:
#: a task's inputs can be small while its reference's temporaries are not (31_VisionAttention's 8 GiB attention
#: matrix found the card held by the judge's worker and KernelBench's check could not run its reference, H100,
#: 2026-12-07).
CROWDED_FRACTION = 0.5


def card_is_crowded(hello: dict[str, Any]) -> bool:
    """Whether the judge's ``hello`` reply (``free_bytes`` of ``memory_bytes``) says the card is short of memory."""
    free, total = hello.get("free_bytes"), hello.get("memory_bytes")
    return isinstance(free, int) and isinstance(total, int) and free < total * CROWDED_FRACTION


def judge_crowds_card(worker: Any) -> bool:
    """:func:`card_is_crowded` by the judge's own ``hello``; False where it cannot answer (a worker that died in the
    search): the question must not cost the row its verified kernel."""
    try:
        return card_is_crowded(worker.request({"op": "hello"}, timeout_s=60))
    except Exception:
        return False


def bench_options(gpu: int | None, torch_compile: bool) -> UserClockOptions:
    """A bench's measurement on the GPU the judge used (``gpu`` made the only visible device, as
    :class:`~optiml.evaluate.client.WorkerClient` does)."""
    return UserClockOptions(visible_devices=None if gpu is None else str(gpu), torch_compile=torch_compile)


def measure_for_bench(
    task: Task,
    kernel: KernelSource,
    store: Path,
    gpu: int | None,
    torch_compile: bool,
    worker: BenchWorker | None = None,
    footprint: int = 0,
    prebuilt: Prebuilt | None = None,
    ready: ReadyProcess | None = None,
    crowded: bool = False,
) -> dict[str, Any]:
    """A bench row's ``user_clock``: the best kernel measured with :func:`bench_options` (in ``ready``, started
    with them while the judge worked, where given), as a dict; any failure, however it happens, is the dict's
    ``error`` (a bench never loses a row to this measurement). ``worker`` (the judge's) is stopped first when
    the task's ``footprint`` (bytes in and out) is over :data:`RELEASE_BYTES` or the card is ``crowded``
    (:func:`card_is_crowded`). ``prebuilt``: the judge's build of ``kernel`` (:func:`seed_export_build`)."""
    options = ready.options if ready is not None else bench_options(gpu, torch_compile)
    try:
        if (footprint > RELEASE_BYTES or crowded) and worker is not None:
            worker.stop()
        return measure_kernel(task, kernel, options, store, prebuilt, ready).to_dict()
    except Exception as exc:
        return UserClockResult(task=task.name, error=f"user clock: {_one_line(exc)}").to_dict()


def eval_block(
    task: Task,
    kernel: KernelSource,
    *,
    judge_ms: float | None = None,
    options: UserClockOptions | None = None,
    store: str | Path | None = None,
) -> dict[str, Any]:
    """The ``user_clock`` block of ``optiml eval --json``: the measurement, its headline speedups (cold
    medians over each of :data:`BASELINES`) and the judge ÷ user agreement for ``judge_ms``. Call it after
    the judge's evaluator is closed (its GPU memory released). ``store``: the run store whose verification
    the export names."""
    result = measure_kernel(task, kernel, options, store)
    return {
        **result.to_dict(),
        "speedups": {baseline: result.speedup(baseline) for baseline in BASELINES},
        "agreement": agreement(judge_ms, result),
    }
