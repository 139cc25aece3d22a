"""Parse ``ncu --csv --page raw`` output: one row per profiled kernel launch.

What ncu prints is not clean CSV: ``==PROF==``/``==WARNING==`` lines and the profiled
program's own output come first, then a header row, a units row (empty under the
identification columns), and one row per kernel. Numbers carry thousands separators
(``"1,980,000"``). This module turns that into :class:`NcuRow` values with numbers parsed
and, where ncu scaled a unit (``usecond``, ``Mbyte``…), converted to the base unit.
Standard library only.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

_HEADER_START = '"ID",'
_IDENTITY_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)

#: unit → (base unit, factor). ncu's raw page prints base units, as recorded on the H200; these
#: cover ``--print-units auto`` output too.
_UNIT_SCALE = {
    "nsecond": ("ns", 1.0),
    "usecond": ("ns", 1e3),
    "us": ("ns", 1e3),
    "msecond": ("ns", 1e6),
    "ms": ("ns", 1e6),
    "second": ("ns", 1e9),
    "s": ("ns", 1e9),
    "Kbyte": ("byte", 1e3),
    "Mbyte": ("byte", 1e6),
    "Gbyte": ("byte", 1e9),
    "Tbyte": ("byte", 1e12),
    "khz": ("hz", 1e3),
    "Khz": ("hz", 1e3),
    "mhz": ("hz", 1e6),
    "Mhz": ("hz", 1e6),
    "ghz": ("hz", 1e9),
    "Ghz": ("hz", 1e9),
}


@dataclass(frozen=True)
class NcuRow:
    """One profiled kernel launch as ncu reported it."""

    launch_id: int
    kernel_name: str
    block: tuple[int, ...]
    grid: tuple[int, ...]
    values: dict[str, float | str | None] = field(default_factory=dict)  # metric → number (base unit)
    units: dict[str, str] = field(default_factory=dict)


class NcuCsvError(ValueError):
    """The text has a result header but rows that do not fit it."""


def parse_raw_csv(text: str) -> list[NcuRow]:
    """All kernel rows in ``text`` (empty when ncu profiled nothing); noise lines are skipped."""
    rows: list[NcuRow] = []
    header: list[str] | None = None
    units: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_HEADER_START):
            header, units = _cells(line), None
            continue
        if header is None or not line.startswith('"'):
            continue
        cells = _cells(line)
        if len(cells) != len(header):
            raise NcuCsvError(f"ncu CSV row has {len(cells)} columns, header has {len(header)}: {line[:80]!r}")
        if units is None and cells[0] == "":
            units = cells
            continue
        rows.append(_row(header, units or [""] * len(header), cells))
    return rows


def _cells(line: str) -> list[str]:
    return next(csv.reader([line]))


def _row(header: list[str], units: list[str], cells: list[str]) -> NcuRow:
    named = dict(zip(header, cells, strict=True))
    values: dict[str, float | str | None] = {}
    unit_of: dict[str, str] = {}
    for name, unit, cell in zip(header, units, cells, strict=True):
        if name in _IDENTITY_COLUMNS:
            continue
        value = parse_number(cell)
        base, factor = _UNIT_SCALE.get(unit, (unit, 1.0))
        if isinstance(value, float):
            value *= factor
        values[name] = value
        unit_of[name] = base
    try:
        launch_id = int(named.get("ID", ""))
    except ValueError as exc:
        raise NcuCsvError(f"ncu CSV row without a numeric ID: {cells[:5]!r}") from exc
    return NcuRow(
        launch_id=launch_id,
        kernel_name=named.get("Kernel Name", ""),
        block=_dims(named.get("Block Size", "")),
        grid=_dims(named.get("Grid Size", "")),
        values=values,
        units=unit_of,
    )


def parse_number(cell: str) -> float | str | None:
    """``"1,980,000"`` → 1980000.0; ``""``/``"n/a"`` → None; other text is returned as it is."""
    text = cell.strip()
    if not text or text.lower() in {"n/a", "nan", "-"}:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text


def _dims(cell: str) -> tuple[int, ...]:
    """``"(256, 1, 1)"`` → (256, 1, 1); anything else → ()."""
    inner = cell.strip().strip("()")
    try:
        return tuple(int(part.replace(",", "").strip()) for part in inner.split(", ") if part.strip())
    except ValueError:
        return ()
