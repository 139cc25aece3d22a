"""Replayed landscapes: strategies compared on recorded GPU results, without a GPU.

Kernel Tuner's simulation runner is the model: a :class:`ReplayEvaluator` answers every
evaluation from a record — the same kernel always gets its recorded result, and its timing is
jittered by the run-to-run noise measured when the record was made — so a strategy can be run on
a real landscape many seeds at a time, on a CPU. Two records answer it:

* :class:`RecordedLandscape` (:mod:`~optiml.search.replay.record`): every configuration of a
  task's template kernels (:mod:`optiml.templates`) timed once on a GPU
  (``benchmarks/record_landscape.py``). Template kernels carry their configuration in their first
  line, so any kernel the structural proposer can reach is answered by configuration — exhaustively
  recorded spaces exactly, multi-kernel plans by an additive model of per-kernel sweeps. This is
  how replay handles a kernel no search run ever proposed: the whole space was measured up front.
* :class:`StoredResults` (:mod:`~optiml.search.replay.stored`): every evaluation a run store holds
  for a task, by kernel digest (LLM-written kernels included). A kernel it has not seen is a miss:
  the evaluator answers ``rejected`` ("not in the record") and counts it, so a comparison can say
  how much of it was replayed.
"""

from optiml.search.replay.evaluator import ReplayEvaluator
from optiml.search.replay.record import Measurement, RecordedLandscape, load_landscapes
from optiml.search.replay.stored import StoredResults

__all__ = ["Measurement", "RecordedLandscape", "ReplayEvaluator", "StoredResults", "load_landscapes"]
