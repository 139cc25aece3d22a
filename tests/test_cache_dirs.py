"""One cache root for compiled kernels and roofline peaks, following XDG_CACHE_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.cache_dirs import user_cache_dir
from optiml.kernel.compiler import CompilerConfig
from optiml.profile.profiler import ProfileConfig


def test_caches_live_under_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert CompilerConfig().cache_dir == tmp_path / "optiml" / "kernels"
    assert ProfileConfig().roofline_cache_dir == tmp_path / "optiml" / "roofline"


def test_an_empty_xdg_cache_home_means_the_home_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_cache_dir("kernels") == tmp_path / ".cache" / "optiml" / "kernels"
