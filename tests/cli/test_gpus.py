"""`--gpus`: parsing, and a search session that evaluates on several GPUs through one pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.cli.gpus import parse_gpus
from optiml.errors import OptimlError
from optiml.evaluate.gpu_pool import GPUPool
from optiml.session import SessionOptions, open_session
from optiml.task import load_task

ROOT = Path(__file__).resolve().parents[2]


def test_indices_are_parsed_and_bad_lists_are_one_line_errors() -> None:
    assert parse_gpus("0,1") == (0, 1) and parse_gpus(" 3 ") == (3,)
    for bad in ("zero", "", "1,-1", "2,2"):
        with pytest.raises(OptimlError, match="--gpus"):
            parse_gpus(bad)


def test_a_session_on_several_gpus_shares_one_pool_and_profiles_on_the_first(tmp_path: Path) -> None:
    task = load_task(ROOT / "tasks" / "silu.py")
    (tmp_path / "optiml.toml").write_text("")  # no LLM configured
    options = SessionOptions(gpus=(3, 5), store_path=tmp_path / "runs.db", llm_toml=tmp_path / "optiml.toml")
    with open_session(task, options) as session:
        pool = session.costs.inner
        assert isinstance(pool, GPUPool) and pool.primary is session.evaluator
        assert [m.worker.gpu for m in pool.members] == [3, 5] and pool.names == ["GPU 3", "GPU 5"]
        assert pool.members[1].compiler is pool.members[0].compiler  # one compile cache for all
        assert session.profiler is not None and session.profiler._config.gpu == 3
    with open_session(task, SessionOptions(store_path=tmp_path / "runs.db", llm_toml=tmp_path / "optiml.toml")) as one:
        assert one.costs.inner is one.evaluator and one.evaluator.worker.gpu is None
