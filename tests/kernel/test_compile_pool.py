"""The compile pool: background builds, joining a build in flight, order and failures."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from tests.kernel.test_compiler import SCALE

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.source import KernelSource

pytestmark = pytest.mark.nvcc


def _variant(i: int) -> KernelSource:
    return KernelSource(SCALE.replace("2.0f", f"{i + 2}.0f"))


def test_prefetch_builds_in_the_background_and_compile_joins_it(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path, jobs=2))
    [future] = compiler.prefetch([_variant(0)])
    start = time.perf_counter()
    joined = compiler.compile(_variant(0))  # the same key: waits for the prefetched build
    assert future.result() is joined
    assert not joined.cached and joined.ok
    assert time.perf_counter() - start < joined.seconds + 0.5
    assert len([p for p in tmp_path.iterdir() if not p.name.startswith(".")]) == 1  # built once (".": listings)


def test_concurrent_compiles_of_one_kernel_build_once(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path))
    results = []
    threads = [threading.Thread(target=lambda: results.append(compiler.compile(_variant(1)))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(r) for r in results}) == 1 and results[0].ok


def test_compile_many_keeps_order_with_failures_and_cache_hits(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path, jobs=2))
    compiler.compile(_variant(2))
    broken = KernelSource(SCALE.replace("y[i] =", "y[i] = undefined_name +"))
    results = compiler.compile_many([_variant(3), broken, _variant(2)])
    assert [r.ok for r in results] == [True, False, True]
    assert results[2].cached and not results[0].cached
    assert "undefined_name" in results[1].error_summary()
    compiler.close()


def test_a_build_that_finishes_before_it_is_tracked_does_not_deadlock(tmp_path: Path) -> None:
    """A cache hit can finish on the pool before :meth:`submit` attaches its done-callback; the
    callback then runs inline, inside submit's lock (CI once hung 600 s on exactly this)."""
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path))
    done: Future = Future()
    done.set_result(None)

    def track_inside_the_lock() -> None:
        with compiler._lock:
            compiler._track("finished-already", done)

    worker = threading.Thread(target=track_inside_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "tracking a finished build deadlocked on the compiler's lock"
    assert "finished-already" not in compiler._in_flight
