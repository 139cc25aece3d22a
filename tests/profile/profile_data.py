"""Helpers for the profile tests: the recorded H200 data (see data/README.md) and a plain launch."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from optiml.profile.metrics import KernelMetrics
from optiml.profile.ncu_csv import NcuRow
from optiml.profile.results import KernelProfile, Profile

DATA = Path(__file__).resolve().parent / "data"
SRC = Path(__file__).resolve().parents[2] / "src"


def read(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def kernel_profile(row: NcuRow) -> KernelProfile:
    return KernelProfile(row.kernel_name, row.launch_id, row.block, row.grid, KernelMetrics.from_values(row.values))


def single_profile(row: NcuRow) -> Profile:
    return Profile(label="candidate 0", kernel_digest="d", kernels=(kernel_profile(row),))


def plain_launch(argv: list[str], workdir: Path) -> Any:
    """A launch without the sandbox: the tests' processes are our own scripts."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return SimpleNamespace(argv=argv, env=env, cwd=workdir, preexec_fn=None)


MARKER_NAME = "void at::cuda::<unnamed>::spin_kernel(long)"


def multi_candidate_csv(groups: list[list[str]]) -> str:
    """ncu_raw.csv re-cut as one ncu run over several candidates: a marker row, then each group's kernels.

    ``groups`` holds, per profiled entry, the function names (vecadd, transpose_naive, matmul_naive,
    smem_conflict) of the recorded rows it launched; marker rows are copies of a recorded row renamed
    to ATen's spin_kernel, as the profile target launches them. IDs are renumbered in launch order.
    """
    lines = read("ncu_raw.csv").splitlines()
    noise = [line for line in lines if not line.startswith('"')]
    table = list(csv.reader([line for line in lines if line.startswith('"')]))
    header, units, records = table[0], table[1], table[2:]
    id_col, name_col = header.index("ID"), header.index("Kernel Name")
    by_name = {r[name_col].split("(")[0]: r for r in records}
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(header)
    writer.writerow(units)
    launch = 0
    for group in groups:
        for name in ["marker", *group]:
            row = list(by_name["smem_conflict" if name == "marker" else name])
            row[id_col] = str(launch)
            if name == "marker":
                row[name_col] = MARKER_NAME
            writer.writerow(row)
            launch += 1
    return "\n".join(noise[:2]) + "\n" + out.getvalue() + "\n".join(noise[2:]) + "\n"
