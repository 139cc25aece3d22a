"""What is left in a timed window beyond the kernel? (issue 38) One step of the protocol changed at a time.

On 2026-12-05 (H100, `clock_agreement_device_end_h100.json`) windows ended on the device still read one-call
kernels over GBs 0.27-0.29 ms above the candidate stream's own events (19_ReLU, SiLU, a long softmax), and
windows of several short calls ~0.09 ms a window. This script takes that residual apart: each task's template
seed is compiled once and evaluated by a judge in this process (the protocol of ``optiml eval``, without the
worker around it), under variants that each change one step:

* ``as_is``: the protocol as it stands (windows end on the device where the calibration trusts it);
* ``host_end``: windows end at the candidate's reply;
* ``no_poison``: outputs are not poisoned before each call (nor sampled for answers written ahead of it);
* ``no_flush``: the judge does not flush the L2 before each call;
* ``check_after``: nothing is enqueued behind the window's end while the call runs (its output check is
  enqueued once the window has ended);
* ``no_refill``: each slot's inputs are mixed (and its reference run) once; later windows reuse them, so the
  judge's context writes no GBs of fresh inputs and reference outputs just before the call;
* ``narrow_window``: a window's slots may hold 4 GiB (the budget until 2026-12-05) instead of
  ``memory.WINDOW_BYTES`` (16 GiB), so short calls share a window's cost with fewer calls;
* ``short_poll``: the candidate process polls for its next request 50 ms before it blocks (``POLL_S`` until
  2026-12-05), so a window whose preparation took longer finds it asleep and waits for it to be woken.

Each row: the judge's time per call, the candidate stream's own events per call, the residual (their
difference), calls per window and the round trip subtracted. Variants that weaken the judge are for this
diagnosis only.

``--spin-ms 1,3,5`` also evaluates the seed with one thread of its first block held for that long on the
GPU's global timer (asleep, no memory traffic): a residual that grows with the spin grows with how long the
call keeps the GPU, not with the bytes it moves.

    PYTHONPATH=src python3 benchmarks/window_residual.py tasks/large/silu_4096x393216.py --out OUT.json
    PYTHONPATH=src python3 benchmarks/window_residual.py tasks/silu.py --variants as_is --spin-ms 0,1,3,5 --out OUT.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from result_file import head_commit, write_result

from optiml.errors import OptimlError

NARROW_WINDOW_BYTES = 4 * 2**30  # memory.WINDOW_BYTES until 2026-12-05
VARIANTS = ("as_is", "host_end", "no_poison", "no_flush", "check_after", "no_refill", "narrow_window", "short_poll")
SHORT_POLL_S = 0.05  # the candidate process's poll before 2026-12-05 (evening)

SPIN = """
__device__ __forceinline__ void optiml_residual_spin(unsigned long long ns) {
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { __nanosleep(1000); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  }
}
"""


def with_spin(code: str, spin_ms: float) -> str:
    """``code`` with every kernel's first thread held ``spin_ms`` on the global timer before its work."""
    if spin_ms <= 0:
        return code
    includes = list(re.finditer(r"^#include .*$", code, flags=re.MULTILINE))
    cut = includes[-1].end() if includes else 0
    ns = int(spin_ms * 1e6)
    spun = re.sub(r"(__global__[^{;]*\{)", lambda m: f"{m.group(1)} optiml_residual_spin({ns}ULL);", code[cut:])
    return code[:cut] + SPIN + spun


@contextlib.contextmanager
def variant_patches(variant: str) -> Iterator[None]:
    """The process-wide change ``variant`` makes to the judge's protocol, undone afterwards."""
    import torch

    from optiml.evaluate import harness
    from optiml.evaluate.arena import SharedBuffers
    from optiml.evaluate.judge import Judge, Window

    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    if variant == "no_poison":
        patch(SharedBuffers, "poison_outputs", lambda self: None)

        def unsampled(_outputs: Any, generator: torch.Generator) -> torch.Tensor:
            """The outputs keep the last call's answer: the sample for answers written ahead must not look."""
            return torch.zeros((), dtype=torch.bool, device=generator.device)

        patch(harness, "written_before_call", unsampled)
    elif variant == "check_after":
        window = Judge.window

        def check_after(
            self: Judge, process: Any, message: Any, deadline: float, check: Callable[[], Any], end: str = "host"
        ) -> Window:
            done = window(self, process, message, deadline, lambda: None, end)
            return dataclasses.replace(done, check=check())

        patch(Judge, "window", check_after)
    elif variant == "no_refill":
        fill = harness.FreshInputs.fill
        filled: dict[int, Any] = {}

        def fill_once(self: harness.FreshInputs, buffers: SharedBuffers) -> Any:
            if id(buffers) not in filled:
                filled[id(buffers)] = fill(self, buffers)
            return filled[id(buffers)]

        patch(harness.FreshInputs, "fill", fill_once)
    elif variant == "narrow_window":
        from optiml.evaluate import memory

        patch(memory, "WINDOW_BYTES", NARROW_WINDOW_BYTES)
        patch(harness, "WINDOW_BYTES", NARROW_WINDOW_BYTES)
    elif variant == "short_poll":
        from optiml.evaluate import candidate_process

        patch(candidate_process, "POLL_S", SHORT_POLL_S)
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


def evaluate(task_path: Path, so_path: str, variant: str, workdir: Path) -> dict[str, Any]:
    """One evaluation of the compiled seed under ``variant``: the judge's figures for it."""
    import torch

    from optiml.evaluate.config import EvalConfig
    from optiml.evaluate.harness import CaseSeeds, Peaks, evaluate_candidate
    from optiml.evaluate.judge import Judge
    from optiml.evaluate.runtime import TaskRuntime
    from optiml.task import load_task

    config = EvalConfig(window_end="host" if variant == "host_end" else "auto")
    judge = Judge(torch.device("cuda", 0), workdir, flush_l2=variant != "no_flush")
    begin = time.perf_counter()
    try:
        with variant_patches(variant):
            runtime = TaskRuntime(load_task(task_path), "cuda")
            judged = evaluate_candidate(judge, runtime, so_path, config, Peaks(), None, CaseSeeds())
    finally:
        judge.close()
    result, detail = judged.result, judged.judge
    row: dict[str, Any] = {"variant": variant, "status": result.status.value, "message": result.message[:200]}
    if result.ok and result.timing is not None and detail:
        calls = detail["window_calls"]
        row.update(
            judge_ms=result.timing.median_ms,
            stream_ms=detail["claimed_stream_ms"],
            residual_ms=result.timing.median_ms - detail["claimed_stream_ms"],
            residual_per_window_ms=(result.timing.median_ms - detail["claimed_stream_ms"]) * calls,
            window_calls=calls,
            window_end=detail["window_end"],
            round_trip_ms=result.clock.get("round_trip_ms"),
        )
    row["wall_s"] = round(time.perf_counter() - begin, 1)
    return row


def seed_library(task_path: Path, cache: Path, spin_ms: float = 0.0) -> str:
    """The planner's seed for the task (held ``spin_ms`` on the GPU first, see :func:`with_spin`), compiled;
    its shared object's path."""
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    kernels = template_kernels(load_task(task_path))
    compiler = Compiler(CompilerConfig(cache_dir=cache))
    try:
        source = kernels.render(next(iter(kernels.seeds(1))))
        source = dataclasses.replace(source, code=with_spin(source.code, spin_ms))
        compiled = compiler.compile_many([source])[0]
    finally:
        compiler.close()
    if not compiled.ok:
        raise SystemExit(f"error: {task_path.name}: the seed does not compile: {compiled.error_summary(3)}")
    return str(compiled.so_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="+", type=Path)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--spin-ms", default="", help="comma-separated spins (ms) of the seed's first thread")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU is visible: this benchmark times kernels on one")
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"error: unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="optiml-residual-") as scratch:
        root = Path(scratch)
        spins = [float(v) for v in args.spin_ms.split(",") if v] or [0.0]
        for task_path in args.tasks:
            for spin in spins:
                try:
                    so_path = seed_library(task_path, root / f"cache{spin}", spin)
                except OptimlError as exc:
                    rows.append({"task": task_path.stem, "spin_ms": spin, "error": str(exc).splitlines()[0]})
                    continue
                for variant in variants:
                    workdir = root / f"{task_path.stem}-{spin}-{variant}"
                    workdir.mkdir()
                    row = {"task": task_path.stem, "spin_ms": spin, **evaluate(task_path, so_path, variant, workdir)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    write_result(args.out, "window_residual", head_commit(args.commit), rows=rows)
    write_result(args.out, "window_residual", head_commit(args.commit), rows=rows)


if __name__ == "__main__":
    main()
