"""A seeded synthetic landscape: a stand-in GPU for testing and benchmarking search on a CPU.

Candidates are real CUDA sources in the OptiML ABI whose four ``#define`` knobs — BLOCK, TILE,
UNROLL, VEC — decide a synthetic run time. The landscape is deterministic given its seed:

* each knob has a preferred value (never the starting one), and every step away from it costs
  ``15 % * strength`` (multiplied over knobs), so the best kernel is several times faster than
  the start;
* a ±4 % ruggedness per combination creates local optima that trap a purely greedy climber;
* TILE*VEC >= 64 costs 20 % more (register pressure);
* some combinations fail like real kernels do: TILE*VEC >= 128 does not compile,
  UNROLL=16 with VEC=8 computes the wrong answer, BLOCK=1024 with TILE=16 times out, and a
  seeded ``fail_rate`` of the rest hits an illegal address;
* every timing sample carries seeded Gaussian noise of relative size ``noise``.

:class:`LandscapeEvaluator` satisfies :class:`optiml.evaluate.cost.CostFunction` (with an
``optimism`` knob that reports search-time timings too fast, modelling a lucky measurement that
only re-timing exposes); :class:`KnobProposer` satisfies :class:`optiml.propose.base.Proposer`
by moving one knob one step, seeded.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from optiml.evaluate.cost import CostFunction
from optiml.kernel.source import KernelSource
from optiml.propose.base import Proposal, ProposalContext, Spend
from optiml.values import CompileDiagnostic, CompileResult, Edit, EvalResult, EvalStatus, TimingStats, VerifyReport

KNOBS: dict[str, tuple[int, ...]] = {
    "BLOCK": (64, 128, 256, 512, 1024),
    "TILE": (1, 2, 4, 8, 16),
    "UNROLL": (1, 2, 4, 8, 16),
    "VEC": (1, 2, 4, 8),
}
START: dict[str, int] = {name: values[0] for name, values in KNOBS.items()}
CATEGORY = {"BLOCK": "launch_config", "TILE": "tiling", "UNROLL": "unrolling", "VEC": "vectorization"}

_DEFINE = re.compile(r"^#define\s+([A-Z]+)\s+(\d+)\s*$", re.MULTILINE)
_BODY = """
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t base = ((int64_t)blockIdx.x * BLOCK + threadIdx.x) * TILE * VEC;
#pragma unroll UNROLL
  for (int i = 0; i < TILE * VEC; ++i) {
    int64_t j = base + i;
    if (j < n) y[j] = 2.0f * x[j];
  }
}

extern "C" int optiml_forward(const optiml_tensor* inputs, int n_inputs, optiml_tensor* outputs,
                              int n_outputs, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < inputs[0].ndim; ++d) n *= inputs[0].shape[d];
  int64_t per_block = (int64_t)BLOCK * TILE * VEC;
  unsigned blocks = (unsigned)((n + per_block - 1) / per_block);
  scale_kernel<<<blocks, BLOCK, 0, stream>>>((const float*)inputs[0].data, (float*)outputs[0].data, n);
  return (int)cudaGetLastError();
}
"""


def landscape_kernel(knobs: Mapping[str, int] = START) -> KernelSource:
    """The landscape's kernel with these knob values."""
    defines = "\n".join(f"#define {name} {knobs[name]}" for name in KNOBS)
    header = "// synthetic landscape kernel: its #define knobs decide its (synthetic) speed\n"
    return KernelSource(code=f'{header}#include "optiml.h"\n{defines}\n{_BODY}')


def read_knobs(code: str) -> dict[str, int] | None:
    """The knob values of a landscape kernel, or None when some knob is missing or out of range."""
    found = {name: int(value) for name, value in _DEFINE.findall(code)}
    if any(found.get(name) not in values for name, values in KNOBS.items()):
        return None
    return {name: found[name] for name in KNOBS}


def _rng(*key: object) -> random.Random:
    return random.Random(hashlib.sha256(repr(key).encode()).hexdigest())


@dataclass(frozen=True)
class Landscape:
    seed: int = 0
    base_ms: float = 1.0  # the starting kernel's time before ruggedness
    strength: float = 1.0  # 0 makes every kernel exactly as fast as the start
    noise: float = 0.01  # relative standard deviation of one timing sample
    fail_rate: float = 0.05  # share of otherwise valid combinations that crash
    rugged: float = 0.08  # amplitude of the seeded per-combination ruggedness (local optima)

    def preferred(self, knob: str) -> int:
        """Index of the knob's best value; never 0 (the start), so there is something to find."""
        return _rng(self.seed, "preferred", knob).randrange(1, len(KNOBS[knob]))

    def true_ms(self, knobs: Mapping[str, int]) -> float:
        factor = 1.0
        for name, values in KNOBS.items():
            distance = abs(values.index(knobs[name]) - self.preferred(name))
            factor *= 1.0 + 0.15 * self.strength * distance
        rugged = _rng(self.seed, "rugged", sorted(knobs.items())).random()
        factor *= 1.0 + self.rugged * self.strength * (rugged - 0.5)
        if knobs["TILE"] * knobs["VEC"] >= 64:
            factor *= 1.0 + 0.2 * self.strength
        return self.base_ms * factor

    def failure(self, knobs: Mapping[str, int]) -> tuple[EvalStatus, str] | None:
        """How this combination fails, or None when it works (the starting kernel always works)."""
        if dict(knobs) == START:
            return None
        if knobs["TILE"] * knobs["VEC"] >= 128:
            return EvalStatus.COMPILE_ERROR, "too many resources requested (TILE*VEC registers per thread)"
        if knobs["UNROLL"] == 16 and knobs["VEC"] == 8:
            return EvalStatus.WRONG_ANSWER, "max abs err 3.1e-02 > atol 1e-04 (1024 of 4194304 elements)"
        if knobs["BLOCK"] == 1024 and knobs["TILE"] == 16:
            return EvalStatus.TIMEOUT, "the kernel did not finish within 10 s"
        if _rng(self.seed, "fails", sorted(knobs.items())).random() < self.fail_rate:
            return EvalStatus.RUNTIME_ERROR, "cudaErrorIllegalAddress: an illegal memory access was encountered"
        return None

    def samples(self, knobs: Mapping[str, int], key: object, count: int) -> list[float]:
        rng = _rng(self.seed, "noise", key)
        true = self.true_ms(knobs)
        return [max(true * (1.0 + rng.gauss(0.0, self.noise)), true * 0.5) for _ in range(count)]

    def optimum(self) -> tuple[dict[str, int], float]:
        """The fastest combination that does not fail, by brute force (500 combinations)."""
        best: tuple[float, dict[str, int]] | None = None
        for combo in itertools.product(*KNOBS.values()):
            knobs = dict(zip(KNOBS, combo, strict=True))
            if self.failure(knobs) is None and (best is None or self.true_ms(knobs) < best[0]):
                best = (self.true_ms(knobs), knobs)
        assert best is not None
        return best[1], best[0]


class LandscapeEvaluator(CostFunction):
    """Evaluates landscape kernels; thread-safe; counts every call per kernel digest."""

    def __init__(
        self,
        landscape: Landscape,
        *,
        delay_s: float = 0.0,
        optimism: float = 0.0,
        trials: int = 20,
    ) -> None:
        self.landscape = landscape
        self.delay_s = delay_s
        self.optimism = optimism
        self.trials = trials
        self.calls: Counter[str] = Counter()  # digest → evaluate() calls
        self.retimes: list[list[str]] = []  # the digests of each retime() call
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._reference = {
            "eager": TimingStats.from_samples([t * 1.25 for t in landscape.samples(START, "eager", trials)]),
            "compile": TimingStats.from_samples([t * 0.9 for t in landscape.samples(START, "compile", trials)]),
        }

    @property
    def reference(self) -> dict[str, TimingStats]:
        return self._reference

    def evaluate(self, kernel: KernelSource) -> EvalResult:
        with self._lock:
            self.calls[kernel.digest] += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            return self._evaluate(kernel)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _evaluate(self, kernel: KernelSource) -> EvalResult:
        knobs = read_knobs(kernel.code)
        if knobs is None:
            return EvalResult(EvalStatus.REJECTED, "not a landscape kernel", kernel_digest=kernel.digest)
        failure = self.landscape.failure(knobs)
        if failure is not None:
            status, message = failure
            compile_ = None
            if status is EvalStatus.COMPILE_ERROR:
                compile_ = CompileResult(
                    ok=False,
                    so_path=None,
                    digest=kernel.digest,
                    arch="sm_90",
                    seconds=0.1,
                    cached=False,
                    diagnostics=(CompileDiagnostic("error", message, line=12),),
                )
            return EvalResult(status, message, kernel_digest=kernel.digest, compile=compile_)
        samples = self.landscape.samples(knobs, ("evaluate", kernel.digest), self.trials)
        return EvalResult(
            EvalStatus.OK,
            kernel_digest=kernel.digest,
            verify=VerifyReport(passed=True),
            timing=TimingStats.from_samples([s * (1.0 - self.optimism) for s in samples]),
            reference=dict(self.reference),
        )

    def retime(self, kernels: Sequence[KernelSource], rounds: int) -> list[TimingStats]:
        with self._lock:
            call = len(self.retimes)
            self.retimes.append([k.digest for k in kernels])
        timings = []
        for kernel in kernels:
            knobs = read_knobs(kernel.code)
            if knobs is None:
                raise ValueError(f"kernel {kernel.digest} is not a landscape kernel")
            samples = self.landscape.samples(knobs, ("retime", call, kernel.digest), rounds * 5)
            timings.append(TimingStats.from_samples(samples))
        return timings


def with_knob(kernel: KernelSource, knob: str, value: int) -> KernelSource:
    pattern = re.compile(rf"^#define\s+{knob}\s+\d+\s*$", re.MULTILINE)
    return kernel.with_code(pattern.sub(f"#define {knob} {value}", kernel.code, count=1))


class KnobProposer:
    """Moves one knob one step up or down; seeded order; never re-offers a tried kernel."""

    def __init__(self, seed: int = 0, *, name: str = "knobs", cost_per_call: float = 0.0, unusable_rate: float = 0.0):
        self.name = name
        self.seed = seed
        self.cost_per_call = cost_per_call
        self.unusable_rate = unusable_rate
        self.spent_usd = 0.0
        self._lock = threading.Lock()

    def spent(self) -> Spend:
        """A :class:`~optiml.search.protocols.PaidProposer`: ``cost_per_call`` dollars per request."""
        with self._lock:
            return Spend(usd=self.spent_usd)

    def spent_by_run(self, run_id: str) -> Spend:
        return Spend()  # it records nothing between sessions

    def cap(self, *, calls: int | None, tokens: int | None) -> None:
        """It makes no API calls: nothing to cap."""

    def from_cache(self, proposal: Proposal) -> bool:
        return False

    def propose(self, context: ProposalContext, n: int) -> list[Proposal]:
        with self._lock:
            self.spent_usd += self.cost_per_call
        knobs = read_knobs(context.kernel.code)
        if knobs is None:
            return []
        moves = [
            (name, values[index + step])
            for name, values in KNOBS.items()
            for step in (-1, 1)
            if 0 <= (index := values.index(knobs[name])) + step < len(values)
        ]
        rng = _rng(self.seed, "moves", context.kernel.digest)
        rng.shuffle(moves)
        proposals: list[Proposal] = []
        for name, value in moves:
            if len(proposals) >= n:
                break
            kernel = with_knob(context.kernel, name, value)
            if kernel.digest in context.tried_digests:
                continue
            edit = Edit(
                kind="knob",
                payload=f"{name}={value}",
                category=CATEGORY[name],
                rationale=f"{name} {knobs[name]} → {value}",
                proposer=self.name,
            )
            if _rng(self.seed, "unusable", kernel.digest, len(context.tried_digests)).random() < self.unusable_rate:
                proposals.append(Proposal(edit=edit, kernel=None, error=f"no line `#define {name}` to edit"))
            else:
                proposals.append(Proposal(edit=edit, kernel=kernel))
        return proposals
