"""The judge's import path never includes where candidates write (issue 39, class 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import optiml
from optiml.evaluate.calibration_check import calibration_plausible
from optiml.evaluate.judge import Calibration
from optiml.evaluate.worker import UnsafeImportPath, secure_import_path

SRC = str(Path(optiml.__file__).resolve().parent.parent)


def test_the_working_directory_is_dropped(tmp_path: Path) -> None:
    path = ["", ".", str(tmp_path), SRC]
    assert secure_import_path(path, tmp_path, confined=True) == []
    assert path == [SRC]


def test_an_entry_under_the_candidates_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "candidates" / "c0").mkdir(parents=True)
    with pytest.raises(UnsafeImportPath, match="candidates write"):
        secure_import_path([SRC, str(tmp_path / "candidates" / "c0")], tmp_path, confined=True)


def test_unconfined_candidates_name_the_writable_entries(tmp_path: Path) -> None:
    writable = tmp_path.parent / f"{tmp_path.name}-site"
    writable.mkdir()
    notes = secure_import_path([str(writable)], tmp_path, confined=False)
    assert notes and str(writable) in notes[0]


def _start_worker(cwd: Path, pythonpath: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": pythonpath, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "optiml.evaluate.worker"],
        input="",
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    return dict(json.loads(done.stdout.splitlines()[0]))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="-P is Python 3.11+")
def test_the_worker_refuses_a_pythonpath_into_its_folder(tmp_path: Path) -> None:
    (tmp_path / "candidates").mkdir()
    refused = _start_worker(tmp_path, os.pathsep.join([SRC, str(tmp_path / "candidates")]))
    assert not refused["ok"] and "import path" in str(refused["error"])
    started = _start_worker(tmp_path, SRC)  # the control: the same start without that entry gets further
    assert "import path" not in str(started.get("error", ""))


def _calibration(**changes: float) -> Calibration:
    values = {"event_ms": 0.4, "host_ms": 0.35, "host_spread_ms": 0.02, "calls": 41, "excess_ms": -0.03}
    values.update(changes)
    return Calibration(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "phrase"),
    [
        ({}, None),
        ({"host_ms": 60.0}, "above"),  # a stopped calibration process
        ({"host_spread_ms": 2.0}, "interrupted"),
        ({"event_ms": float("nan")}, "not a number"),
        ({"excess_ms": 9.0}, "excess"),
        ({"calls": 3}, "calls"),
    ],
)
def test_calibration_bounds(changes: dict[str, float], phrase: str | None) -> None:
    reason = calibration_plausible(_calibration(**changes))
    assert reason is None if phrase is None else phrase in (reason or "")
