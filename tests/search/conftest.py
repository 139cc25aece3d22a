from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from search_helpers import write_task

from optiml.store import RunStore
from optiml.task import Task


@pytest.fixture
def task(tmp_path: Path) -> Task:
    return write_task(tmp_path)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.db") as run_store:
        yield run_store
