from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import make_run


@pytest.fixture(scope="session")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished, profiled search with LLM calls: (store path, run id). Built once, read by every test."""
    return make_run(tmp_path_factory.mktemp("run"))
