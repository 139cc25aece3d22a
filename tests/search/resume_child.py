"""A search run in its own process, for the resume test to kill with SIGKILL midway.

Usage: python resume_child.py DB TASK
"""

from __future__ import annotations

import sys

from optiml.search import Budgets, SearchConfig, run_search
from optiml.search.landscape import KnobProposer, Landscape, LandscapeEvaluator, landscape_kernel
from optiml.store import RunStore
from optiml.task import load_task

SEED = 4
BUDGET = 40


def main(db: str, task_path: str) -> None:
    config = SearchConfig(parallel_evaluations=2, parallel_proposals=2, budgets=Budgets(max_evaluations=BUDGET))
    evaluator = LandscapeEvaluator(Landscape(seed=SEED), delay_s=0.1)
    with RunStore(db) as store:
        run_search(load_task(task_path), landscape_kernel(), evaluator, [KnobProposer(SEED)], None, store, config)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
