"""Reading one table of ``optiml.toml`` (``[llm]``, ``[generate]``, …)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_CONFIG = Path("optiml.toml")


def read_toml_section(path: Path, section: str, *, required: bool, error: type[Exception]) -> dict[str, Any]:
    """The ``[section]`` table of ``path`` ({} when absent); ``error`` for an unreadable file, a
    missing one that was asked for by name (``required``), or a section that is not a table."""
    if not path.is_file():
        if required:
            raise error(f"config file {path} does not exist")
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}") from exc
    except UnicodeDecodeError as exc:  # tomllib decodes the whole file first; TOML is UTF-8
        raise error(f"cannot read {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    table = data.get(section, {})
    if not isinstance(table, dict):
        raise error(f"{path}: [{section}] must be a table")
    return dict(table)
