"""ncu raw-page CSV parsing and the typed metrics, on CSVs recorded on the H200."""

from __future__ import annotations

import csv
import re

import pytest
from profile_data import kernel_profile, read

from optiml.profile.metrics import DEFAULT_METRICS, KernelMetrics
from optiml.profile.ncu_csv import NcuCsvError, NcuRow, parse_number, parse_raw_csv

HEADER = '"ID","Kernel Name","Block Size","Grid Size","gpu__time_duration.sum","dram__bytes_read.sum"'


def test_recorded_probe_csv_has_the_four_kernels_in_order(raw_rows: dict[str, NcuRow]) -> None:
    rows = parse_raw_csv(read("ncu_raw.csv"))
    assert [r.launch_id for r in rows] == [0, 1, 2, 3]
    assert [r.kernel_name.split("(")[0] for r in rows] == ["vecadd", "transpose_naive", "matmul_naive", "smem_conflict"]
    transpose = raw_rows["transpose_naive"]
    assert transpose.block == (32, 8, 1)
    assert transpose.grid == (256, 1024, 1)


def test_thousands_separators_and_units(raw_rows: dict[str, NcuRow]) -> None:
    vecadd = raw_rows["vecadd"].values
    assert vecadd["gpu__time_duration.sum"] == 229_312.0
    assert vecadd["dram__bytes_read.sum"] == 536_902_144.0
    assert vecadd["sm__cycles_elapsed.avg.per_second"] == pytest.approx(1_981_616_617.08)
    assert vecadd["launch__cluster_scheduling_policy"] == "PolicySpread"  # text stays text
    assert raw_rows["vecadd"].units["gpu__time_duration.sum"] == "ns"
    assert raw_rows["vecadd"].units["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == "sector"


def test_every_default_metric_is_a_column_of_the_recorded_run(raw_rows: dict[str, NcuRow]) -> None:
    assert len(DEFAULT_METRICS) == len(set(DEFAULT_METRICS)) == 57
    columns = raw_rows["vecadd"].values
    assert [m for m in DEFAULT_METRICS if m not in columns] == []


def test_typed_metrics_of_the_transpose(raw_rows: dict[str, NcuRow]) -> None:
    m = KernelMetrics.from_values(raw_rows["transpose_naive"].values)
    assert m.duration_ms == pytest.approx(0.976224)
    assert m.load_sectors_per_request == pytest.approx(4.0)
    assert m.store_sectors_per_request == pytest.approx(32.0, rel=1e-3)
    assert m.l2_pct == pytest.approx(86.86)
    assert m.achieved_occupancy_pct == pytest.approx(74.85)
    assert m.theoretical_occupancy_pct == 100.0
    assert m.block_limit_registers == 16 and m.block_limit_warps == 8
    assert m.waves_per_sm == pytest.approx(248.24) and m.sm_count == 132
    assert m.top_stalls(2) == [("drain", 95.40), ("long_scoreboard", 78.10)]


def test_flops_count_an_fma_as_two(raw_rows: dict[str, NcuRow]) -> None:
    matmul = KernelMetrics.from_values(raw_rows["matmul_naive"].values)
    assert matmul.flops == 2 * 2048**3
    vecadd = KernelMetrics.from_values(raw_rows["vecadd"].values)
    assert vecadd.flops == 2**26  # one FADD per element


def test_raw_figures_agree_with_ncus_own_full_report(raw_rows: dict[str, NcuRow]) -> None:
    """The uncoalesced-access rule of `ncu --set full` counts the same excess sectors we derive."""
    full = [line for line in read("ncu_full_transpose.csv").splitlines() if line.startswith('"')]
    records = list(csv.DictReader(full))
    rule = next(r for r in records if r["Rule Name"] == "UncoalescedGlobalAccess")
    excessive = int(re.search(r"total of (\d+) excessive sectors", rule["Rule Description"]).group(1))
    m = KernelMetrics.from_values(raw_rows["transpose_naive"].values)
    ideal = 4 * (m.global_load_requests + m.global_store_requests)  # 32 threads x 4 B / 32 B sectors
    assert m.global_load_sectors + m.global_store_sectors - ideal == pytest.approx(excessive, rel=1e-3)
    stall = next(r for r in records if r["Metric Name"] == "Warp Cycles Per Issued Instruction")
    assert m.stall_cycles == pytest.approx(float(stall["Metric Value"]), rel=0.01)


def test_python_process_csv_with_prof_noise() -> None:
    rows = parse_raw_csv(read("ncu_torch.csv"))
    assert len(rows) == 1
    row = rows[0]
    assert "cunn_SoftMaxForwardReg" in row.kernel_name
    assert kernel_profile(row).short_name == "cunn_SoftMaxForwardReg"
    m = KernelMetrics.from_values(row.values)
    assert m.duration_ns == 137_472.0
    assert m.dram_read_bytes == 134_236_160.0
    assert m.l2_pct is None  # not collected in that run
    assert m.stalls == {}


def test_scaled_units_are_converted_to_base_units() -> None:
    text = "\n".join(
        [
            "==PROF== Connected to process 1",
            HEADER,
            '"","","","","usecond","Mbyte"',
            '"0","k(float *)","(128, 1, 1)","(4, 1, 1)","1.50","2.5"',
        ]
    )
    (row,) = parse_raw_csv(text)
    assert row.values["gpu__time_duration.sum"] == pytest.approx(1500.0)
    assert row.values["dram__bytes_read.sum"] == pytest.approx(2.5e6)
    assert row.units["gpu__time_duration.sum"] == "ns"


def test_no_header_means_no_rows_and_a_broken_row_is_an_error() -> None:
    assert parse_raw_csv("==PROF== Disconnected\nhello\n") == []
    broken = "\n".join([HEADER, '"0","k","(1, 1, 1)"'])
    with pytest.raises(NcuCsvError, match="columns"):
        parse_raw_csv(broken)


@pytest.mark.parametrize(
    ("cell", "value"), [("1,024", 1024.0), ("0.30", 0.3), ("", None), ("n/a", None), ("all", "all")]
)
def test_parse_number(cell: str, value: float | str | None) -> None:
    assert parse_number(cell) == value
