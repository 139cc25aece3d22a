"""KernelBench level-1 problems over 4 GiB (issue 20): verdicts, GPU memory and evaluation cost.

For each problem in ``tests/evaluate/data/kb_*.py`` (6.4-7.5 GB per tensor, ``torch.rand`` inputs):
prepare the task (inputs, references, tolerances, reference timing), evaluate an honest kernel and,
where there is one, a trivial fake (identity as ReLU, zeros as softmax); record each verdict, its
message, the candidate's and the reference's median time, the GPU memory (torch allocator peak,
device in use, the task's footprint, the plan's bound) and the phase times.

    export PYTHONPATH=$PWD/src
    python benchmarks/large_problems.py --out benchmarks/results/large_problems.json
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path
from typing import Any

from result_file import write_result

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.kernel.source import KernelSource
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "evaluate" / "data"
ADV = ROOT / "tests" / "adversarial" / "kernels"
PROBLEMS: dict[str, list[Path]] = {
    "19_ReLU": [ADV / "honest_relu.cu", ADV / "identity_relu.cu"],
    "23_Softmax": [ADV / "honest_softmax_wide.cu", ADV / "zero_softmax.cu"],
    "26_GELU_": [DATA / "gelu.cu"],
    "47_Sum_reduction": [ADV / "honest_rowsum.cu"],
    "36_RMSNorm_": [DATA / "rmsnorm.cu"],
}


def _row(kernel: Path, result: Any) -> dict[str, Any]:
    eager = result.reference.get("eager")
    return {
        "kernel": kernel.name,
        "status": result.status.value,
        "message": result.message,
        "time_ms": result.time_ms,
        "eager_ms": eager.median_ms if eager else None,
        "floor_ms": result.floor_ms,
        "distributions": result.verify.distributions if result.verify else [],
        "memory": result.memory,
        "phase_seconds": result.phase_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "large_problems.json")
    parser.add_argument("--only", nargs="*", default=None, help="problem names (default: all)")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    rows: dict[str, Any] = {}
    for problem, kernels in PROBLEMS.items():
        if args.only and problem not in args.only:
            continue
        start = time.perf_counter()
        with Evaluator(load_task(DATA / f"kb_{problem}.py"), EvalConfig(timeout_s=900)) as evaluator:
            facts = evaluator.prepare()
            results = [_row(k, evaluator.evaluate(KernelSource.from_file(k))) for k in kernels]
        rows[problem] = {
            "input_bytes": facts.input_bytes,
            "output_bytes": facts.output_bytes,
            "prepare_seconds": facts.prepare_seconds,
            "notes": list(facts.notes),
            "candidates": results,
            "seconds": round(time.perf_counter() - start, 2),
        }
        write_result(args.out, "large_problems", commit, problems=rows)
        print(problem, [(r["kernel"], r["status"]) for r in results], flush=True)


if __name__ == "__main__":
    main()
