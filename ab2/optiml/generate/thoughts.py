"""Thoughts: the generation strategies of the Mixture-of-Thoughts, defined as data.

A :class:`Thought` is a name, a one-paragraph strategy the prompt commits the model to, and the
jinja2 template that renders the prompt (the built-in ``thought_v1.j2`` unless a thought brings its
own). The built-in four cover the usual ways into a kernel; users add or replace thoughts in
``optiml.toml`` or in thought files (see docs/generate.md)::

    # thoughts.toml
    [[thought]]
    name = "tensor_cores"
    strategy = "Map the inner products onto tensor cores with WMMA ..."
    template = "my_thought.j2"        # optional, relative to this file
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optiml.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_TEMPLATE = "thought_v1.j2"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_KEYS = {"name", "strategy", "template"}
#: Names the pipeline itself uses for its own steps; a thought may not take them.
RESERVED_NAMES = ("aggregate", "adapt", "task")


@dataclass(frozen=True)
class Thought:
    """One generation strategy.

    ``template`` is a built-in template name (``thought_v1.j2``) or the absolute path of a user's
    jinja2 file; it is rendered with ``task`` (a :class:`~optiml.generate.prompts.TaskBrief`) and
    ``thought`` (this object).
    """

    name: str
    strategy: str
    template: str = DEFAULT_TEMPLATE


BUILTIN_THOUGHTS: tuple[Thought, ...] = (
    Thought(
        "direct",
        "Write the straightforward, obviously correct parallel implementation: one thread per output "
        "element (or per independent row) with a grid-stride loop, simple index arithmetic and no "
        "clever tricks. Make it correct for every size first; get its speed from full occupancy and "
        "from consecutive threads touching consecutive addresses.",
    ),
    Thought(
        "memory_first",
        "Design around the memory hierarchy first. Count the bytes the operation must move and aim to "
        "read each input byte from DRAM once and write each output byte once: coalesced accesses "
        "(consecutive threads, consecutive addresses), 16-byte vector loads and stores (float4) where "
        "alignment allows with a scalar tail, data that is reused staged in registers or shared memory "
        "(padded against bank conflicts). Arithmetic is secondary.",
    ),
    Thought(
        "parallel_first",
        "Design around the parallel decomposition first. Decide how the work maps onto threads, warps "
        "and blocks so that every SM stays busy (enough blocks for several waves, no thread looping "
        "serially over a long dimension while others idle), give each warp or block a balanced share, "
        "and do reductions with warp shuffles (__shfl_xor_sync) and then shared memory rather than "
        "atomics or serial loops.",
    ),
    Thought(
        "fusion_first",
        "Design around fusion. Compute the whole forward pass in as few kernel launches as possible, "
        "ideally one: keep intermediate values in registers or shared memory instead of writing them to "
        "global memory, fold elementwise steps into the kernel that produces their input, and prefer "
        "one-pass (online) formulations where they remove a pass over the data.",
    ),
)

DEFAULT_THOUGHT_NAMES: tuple[str, ...] = tuple(t.name for t in BUILTIN_THOUGHTS)


def parse_thought(raw: Mapping[str, Any], origin: str, base_dir: Path | None = None) -> Thought:
    """A :class:`Thought` from a TOML table; ``origin`` names the file for error messages.

    A relative ``template`` is resolved against ``base_dir`` and must exist.
    """
    unknown = set(raw) - _KEYS
    if unknown:
        raise ConfigError(f"{origin}: thought has unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{origin}: thought name {name!r} must be lower-case letters, digits, '_' or '-' (max 40)")
    if name in RESERVED_NAMES:
        raise ConfigError(f"{origin}: thought name {name!r} is reserved for the pipeline's own steps")
    strategy = raw.get("strategy")
    if not isinstance(strategy, str) or not strategy.strip():
        raise ConfigError(f"{origin}: thought {name!r} needs a non-empty `strategy` paragraph")
    template = raw.get("template", DEFAULT_TEMPLATE)
    if not isinstance(template, str) or not template:
        raise ConfigError(f"{origin}: thought {name!r}: `template` must be a file name")
    if template != DEFAULT_TEMPLATE:
        path = Path(template)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise ConfigError(f"{origin}: thought {name!r}: template {path} does not exist")
        template = str(path.resolve())
    return Thought(name=name, strategy=" ".join(strategy.split()), template=template)


def load_thought_file(path: Path) -> tuple[Thought, ...]:
    """Every ``[[thought]]`` table of a TOML file."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such thought file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read thought file: {exc}") from exc
    tables = data.get("thought")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{path}: expected one or more [[thought]] tables")
    return tuple(parse_thought(t, str(path), path.parent) for t in tables)


def select_thoughts(names: Sequence[str] | None, extra: Sequence[Thought]) -> tuple[Thought, ...]:
    """The thoughts to run, in order.

    ``names`` None means every built-in thought, then every extra one. An extra thought with a
    built-in's name replaces it. An unknown name is a :class:`ConfigError` listing the known ones.
    """
    registry: dict[str, Thought] = {t.name: t for t in BUILTIN_THOUGHTS}
    registry.update({t.name: t for t in extra})
    if names is None:
        names = list(dict.fromkeys([*DEFAULT_THOUGHT_NAMES, *(t.name for t in extra)]))
    if not names:
        raise ConfigError("generation needs at least one thought; [generate] thoughts is empty")
    missing = [n for n in names if n not in registry]
    if missing:
        raise ConfigError(f"unknown thought(s) {missing}; known: {', '.join(sorted(registry))}")
    if len(set(names)) != len(names):
        raise ConfigError(f"thought names repeat in {list(names)}")
    return tuple(registry[n] for n in names)
