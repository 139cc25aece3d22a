"""Fixtures for the profile tests: rows and static facts recorded on the H200 machine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("optiml") is None:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from profile_data import read

from optiml.kernel.ptxas import parse_resources
from optiml.profile.ncu_csv import NcuRow, parse_raw_csv
from optiml.profile.sass import SassReport, parse_sass
from optiml.profile.static import StaticAnalysis, analyse
from optiml.values import CompileResult


@pytest.fixture(scope="session")
def raw_rows() -> dict[str, NcuRow]:
    """The four probe kernels' rows from ncu_raw.csv, by function name."""
    rows = parse_raw_csv(read("ncu_raw.csv"))
    return {row.kernel_name.split("(")[0]: row for row in rows}


@pytest.fixture(scope="session")
def probe_static() -> StaticAnalysis:
    """ptxas resources and SASS of probe.cu, as recorded on the H200 machine."""
    resources = parse_resources(read("ptxas.txt"))
    compiled = CompileResult(
        ok=True, so_path=None, digest="probe", arch="sm_90", seconds=0.0, cached=False, resources=tuple(resources)
    )
    return analyse(compiled, SassReport(kernels=tuple(parse_sass(read("probe_sass.txt")))))
