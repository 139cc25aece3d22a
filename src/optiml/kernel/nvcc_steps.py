"""nvcc's own steps, with the host front end and the device compile run side by side.

nvcc runs its steps one after the other. For a candidate they form two independent chains and a
tail (``nvcc --time``, a 60-line layernorm, nvcc 13.0, 2-core machine):

* **host chain** — host preprocessing (0.11 s) and cudafe++ (0.26 s);
* **device chain** — device preprocessing (0.08 s), cicc (0.22 s), ptxas (0.04 s), fatbinary;
* **tail** — the host compile of cudafe++'s output, which embeds the fatbinary (0.25 s), the
  device link and the final link (0.11 s).

The chains share one file: the *module id*, which cudafe++ writes (``--gen_module_id_file``) and
cicc reads. Writing it first ourselves (and dropping that flag) lets both chains run at once; the
shared object comes out byte-identical to nvcc's (checked on nvcc 13.0), and the build takes
0.65–0.82 s instead of 0.92–1.30 s there.

:func:`parallel_script` turns ``nvcc -dryrun``'s listing (nvcc's exact commands and environment)
into that schedule as a POSIX shell script, or returns None when the listing does not have the
shape described here (another nvcc, unusual flags), and nvcc then runs as usual. Output keeps
nvcc's order: the host chain's, then the device chain's (only the host chain's when it fails, as
nvcc stops there), then the tail's.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

_DRYRUN_PREFIX = "#$ "
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MODULE_ID_FILE = re.compile(r'--module_id_file_name\s+("[^"]*"|\S+)')
_GEN_MODULE_ID = " --gen_module_id_file"


@dataclass(frozen=True)
class NvccSteps:
    """nvcc's listing, cut into the parts that can run side by side."""

    environment: tuple[str, ...]  # VAR=value lines, in order
    notes: tuple[str, ...]  # what nvcc itself printed besides its commands (its own warnings)
    prelude: tuple[str, ...]  # leading ``rm`` of stale outputs
    host: tuple[str, ...]  # host preprocessing .. cudafe++ (which no longer writes the module id)
    device: tuple[str, ...]  # device preprocessing .. the first fatbinary
    tail: tuple[str, ...]  # host compile, device link, final link
    module_id_file: str  # as written in the commands (quoted or not)


def dryrun(command: Sequence[str]) -> list[str]:
    """``command`` (an nvcc build) as nvcc's listing of its steps, run nowhere."""
    return [command[0], "-dryrun", *command[1:]]


def tool_name(command: str) -> str:
    """The program a listed command runs (``"$CICC_PATH/cicc" …`` → ``cicc``)."""
    first = command.split(None, 1)[0].strip('"').strip("'") if command.strip() else ""
    return first.rsplit("/", 1)[-1]


def parse_dryrun(listing: str) -> NvccSteps | None:
    """Cut ``nvcc -dryrun``'s output into :class:`NvccSteps`; None when it has another shape."""
    environment: list[str] = []
    notes: list[str] = []
    commands: list[str] = []
    for line in listing.splitlines():
        if not line.startswith(_DRYRUN_PREFIX):
            if line.strip():
                notes.append(line)
            continue
        text = line[len(_DRYRUN_PREFIX) :].strip()
        if not commands and _ASSIGNMENT.match(text):
            environment.append(text)
        elif text:
            commands.append(text)
    tools = [tool_name(command) for command in commands]
    start = next((i for i, tool in enumerate(tools) if tool != "rm"), len(tools))
    if "cudafe++" not in tools[start:]:
        return None
    cudafe = tools.index("cudafe++", start)
    if "fatbinary" not in tools[cudafe:]:
        return None
    fatbinary = tools.index("fatbinary", cudafe)
    host, device, tail = commands[start : cudafe + 1], commands[cudafe + 1 : fatbinary + 1], commands[fatbinary + 1 :]
    module = _MODULE_ID_FILE.search(commands[cudafe])
    if (
        module is None
        or _GEN_MODULE_ID not in f" {commands[cudafe]}"
        or not tail
        or {"cicc", "ptxas"} - set(tools[cudafe + 1 : fatbinary])
        or not all(module.group(1) in c for c in device if tool_name(c) == "cicc")
    ):
        return None
    host[-1] = f" {host[-1]}".replace(_GEN_MODULE_ID, "", 1).strip()
    return NvccSteps(
        environment=tuple(environment),
        notes=tuple(notes),
        prelude=tuple(commands[:start]),
        host=tuple(host),
        device=tuple(device),
        tail=tuple(tail),
        module_id_file=module.group(1),
    )


def module_id(key: str, source_name: str) -> str:
    """A module id in nvcc's form (``_<hex>_<len>_<name>_<hex>``), unique per build key."""
    mangled = re.sub(r"\W", "_", source_name)
    return f"_{key[:8]}_{len(source_name)}_{mangled}_{key[8:16]}"


def parallel_script(steps: NvccSteps, module: str, log_dir: str) -> str:
    """A POSIX sh script that runs ``steps`` with the two chains at once; its exit status is nvcc's
    (the first failing step's), its output nvcc's, in nvcc's order, on standard error."""
    host_log, device_log = shlex.quote(f"{log_dir}/host.log"), shlex.quote(f"{log_dir}/device.log")
    lines = [_export(assignment) for assignment in steps.environment]
    lines += [f"printf '%s\\n' {shlex.quote(note)} >&2" for note in steps.notes]
    lines += [_forced_rm(command) for command in steps.prelude]
    lines += [
        f"printf '%s' {shlex.quote(module)} > {steps.module_id_file}",  # as cudafe++ writes it: no newline
        f"( {_chain(steps.host)} ) > {host_log} 2>&1 &",
        "host=$!",
        f"( {_chain(steps.device)} ) > {device_log} 2>&1 &",
        "device=$!",
        'wait "$host"; host_status=$?',
        'wait "$device"; device_status=$?',
        f"cat {host_log} >&2",
        'if [ "$host_status" -ne 0 ]; then exit "$host_status"; fi',
        f"cat {device_log} >&2",
        'if [ "$device_status" -ne 0 ]; then exit "$device_status"; fi',
        _chain(steps.tail),
    ]
    return "\n".join(lines) + "\n"


def _export(assignment: str) -> str:
    """``export NAME='value'`` with the value as nvcc holds it (nvcc.profile's text, quotes included)."""
    name, value = assignment.split("=", 1)
    return f"export {name}={shlex.quote(value)}"


def _chain(commands: tuple[str, ...]) -> str:
    return " && ".join(f"{{ {command} ; }}" for command in commands)


def _forced_rm(command: str) -> str:
    """nvcc ignores a failed ``rm`` of a file that is not there yet; so does ``rm -f``."""
    return "rm -f" + command[2:] if command.startswith("rm ") else f"{command} || true"
