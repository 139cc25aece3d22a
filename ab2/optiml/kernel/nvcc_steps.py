"""nvcc's own steps, rescheduled: the host and device front ends side by side, the host compile
beside ptxas, and no device link.

nvcc runs its steps one after the other. For a whole-program candidate (``nvcc --shared``, no
``-rdc``) they are (``nvcc --time``, the softmax starter, nvcc 13.0, 2-core machine):

* **host front** — host preprocessing (0.05 s) and cudafe++ (0.18 s), which writes the host
  translation unit ``kernel.cudafe1.cpp``;
* **device front** — device preprocessing (0.05 s) and cicc (0.15 s), which also writes the
  registration stub ``kernel.cudafe1.stub.c`` that the host translation unit includes;
* **device back** — ptxas (0.03 s) and fatbinary (3 ms), which writes the fatbinary and its C
  wrapper ``kernel.fatbin.c`` (the stub includes it: an asm block with the fatbinary's bytes);
* **tail** — the host compile (0.16 s), the device link (nvlink, ``fatbinary -link`` and a compile of
  ``crt/link.stub``: 0.02 s) and the final link (0.04 s).

The fronts share one file: the *module id*, which cudafe++ writes (``--gen_module_id_file``) and
cicc reads. Writing it first ourselves (and dropping that flag) lets both fronts run at once.

The host compile needs the fatbinary's *address*, not its bytes. So the wrapper the stub includes is
ours, written beforehand (:func:`fatbin_wrapper`: nvcc's ``__fatDeviceText`` pointing at a hidden
symbol), fatbinary no longer writes one, and the bytes go into a small object the host compiler
assembles from :func:`fatbin_data_source` (``.incbin`` of the fatbinary into nvcc's ``.nv_fatbin``
section). The host compile then starts once cudafe++ and cicc are done, beside the device back. The
device link registers nothing in a whole-program build (its ``kernel_dlink.reg.c`` is
``#define NUM_PRELINKED_OBJECTS 0``), so it is dropped: nvcc's final link takes the data object in
place of the device link's. Relocatable device code (``-rdc=true``, ``-dc``, ``-ewp``), more than one
cicc, or a tail of another shape keeps nvcc's tail (:attr:`NvccSteps.split` is None).

Measured through :class:`~optiml.kernel.compiler.Compiler` (nvcc 13.0, 2-core machine, medians of 5
builds; serial nvcc / fronts at once with nvcc's tail / fronts at once and the overlapped tail):
the softmax starter 0.71–0.73 / 0.48–0.49 / 0.46 s, the matmul starter 0.69 / 0.45–0.46 / 0.45 s.
With nvcc's tail the shared object is byte-identical to nvcc's; with the overlapped one it lacks the
(empty) device link object and holds the fatbinary at another symbol, while the kept intermediates
(cubin, host translation unit, stub, module id), and so the binary digest
(:mod:`optiml.kernel.identity`), stay those of nvcc.

:func:`parallel_script` turns ``nvcc -dryrun``'s listing (nvcc's exact commands and environment)
into that schedule as a POSIX shell script; :func:`parse_dryrun` returns None when the listing does
not have the shape described here (another nvcc, unusual flags), and nvcc then runs as usual.
Output and exit status are nvcc's: the host front's output, then the device chain's (only the host
front's when it fails, as nvcc stops there), then the host compile's (not when the device chain
fails: nvcc never gets to it), then the link's; the first failing step's status.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

_DRYRUN_PREFIX = "#$ "
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MODULE_ID_FILE = re.compile(r'--module_id_file_name\s+("[^"]*"|\S+)')
_GEN_MODULE_ID = " --gen_module_id_file"
_EMBEDDED_FATBIN = re.compile(r'\s--embedded-fatbin=("[^"]*"|\S+)')
_OUTPUT = re.compile(r'\s-o\s+("[^"]*"|\S+)')
_FIRST_WORD = re.compile(r'^\s*("[^"]*"|\S+)')
#: device-chain flags of relocatable device code, which the device link must link and register
_RELOCATABLE = frozenset({"--device-c", "-dc", "--compile-only", "-c", "-ewp", "--extensible-whole-program"})
#: the hidden symbol the fatbinary's bytes are placed at (nvcc's own is a local label, ``fatbinData``)
FATBIN_SYMBOL = "__optiml_fatbinData"


@dataclass(frozen=True)
class SplitTail:
    """A whole-program build's steps from cicc on, re-cut so the host compile runs beside ptxas."""

    device_front: tuple[str, ...]  # device preprocessing .. cicc (which writes the registration stub)
    device_back: tuple[str, ...]  # ptxas .. fatbinary (without its C wrapper), the data object's assembly
    host_compile: str  # the host compile of cudafe++'s output, as nvcc lists it
    link: str  # nvcc's final link, the fatbinary's data object in place of the device link's object
    fatbin_file: str  # the fatbinary (``--create``), placed into the data object by ``.incbin``
    wrapper_file: str  # the fatbinary wrapper the stub includes: written by us, before anything runs
    data_source_file: str  # the assembly that places the fatbinary's bytes, assembled after fatbinary


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
    split: SplitTail | None = None  # the overlapped tail; None: nvcc's tail, after both chains


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
        split=split_tail(device, tail),
    )


def split_tail(device: Sequence[str], tail: Sequence[str]) -> SplitTail | None:
    """The device chain and nvcc's tail re-cut for the overlapped tail; None where they are not one
    whole-program device compile (one cicc, no relocatable device code) followed by exactly [host
    compile, nvlink, ``fatbinary -link``, compile of the link stub, final link]."""
    tools = [tool_name(command) for command in device]
    words = _words([*device, *tail])
    if words is None or tools.count("cicc") != 1 or tools[-1] != "fatbinary" or len(tail) != 5:
        return None
    device_words, tail_words = words[: len(device)], words[len(device) :]
    compiled = [w for w, tool in zip(device_words, tools, strict=True) if tool in ("cicc", "ptxas", "fatbinary")]
    if any(_RELOCATABLE.intersection(w) for w in compiled):
        return None
    if [tool_name(c) for c in tail[1:3]] != ["nvlink", "fatbinary"] or "-link" not in tail_words[2]:
        return None
    cicc = tools.index("cicc")
    fatbin, wrapper = _option(device_words[-1], "--create"), _option(device_words[-1], "--embedded-fatbin")
    stub, included = _option(device_words[cicc], "--stub_file_name"), _option(device_words[cicc], "--include_file_name")
    compiler, dlink_object = _FIRST_WORD.match(tail[0]), _OUTPUT.search(tail[3])
    if (
        fatbin is None
        or wrapper is None
        or stub is None
        or included is None
        or posixpath.join(posixpath.dirname(stub), included) != wrapper  # not the wrapper the stub includes
        or "-c" not in tail_words[0]
        or compiler is None
        or dlink_object is None
        or tail[4].count(f" {dlink_object.group(1)} ") != 1
    ):
        return None
    data_source, data_object = shlex.quote(f"{fatbin}.s"), shlex.quote(f"{fatbin}.o")
    return SplitTail(
        device_front=tuple(device[: cicc + 1]),
        device_back=(
            *device[cicc + 1 : -1],
            _EMBEDDED_FATBIN.sub("", device[-1], count=1),
            f"{compiler.group(1)} -c {data_source} -o {data_object}",  # the host compiler's driver assembles
        ),
        host_compile=tail[0],
        link=tail[4].replace(f" {dlink_object.group(1)} ", f" {data_object} ", 1),
        fatbin_file=fatbin,
        wrapper_file=wrapper,
        data_source_file=f"{fatbin}.s",
    )


def fatbin_wrapper() -> str:
    """The ``kernel.fatbin.c`` the registration stub includes: nvcc's, but for the fatbinary's bytes,
    which it declares (at :data:`FATBIN_SYMBOL`) instead of holding them."""
    return f"""#ifndef __SKIP_INTERNAL_FATBINARY_HEADERS
#include "fatbinary_section.h"
#endif
#define __CUDAFATBINSECTION  ".nvFatBinSegment"
#define __CUDAFATBINDATASECTION  ".nv_fatbin"
#ifdef __cplusplus
extern "C" {{
#endif
extern const unsigned long long {FATBIN_SYMBOL}[] __attribute__ ((visibility ("hidden")));
static const __fatBinC_Wrapper_t __fatDeviceText __attribute__ ((aligned (8)))
    __attribute__ ((section (__CUDAFATBINSECTION))) = {{ 0x466243b1, 1, {FATBIN_SYMBOL}, 0 }};
#ifdef __cplusplus
}}
#endif
"""


def fatbin_data_source(fatbin_file: str) -> str:
    """Assembly that places the bytes of ``fatbin_file`` where nvcc's wrapper would (section
    ``.nv_fatbin``, 8-byte aligned), at :data:`FATBIN_SYMBOL`."""
    path = fatbin_file.replace("\\", "\\\\").replace('"', '\\"')
    return "\n".join(
        [
            '.section .nv_fatbin,"a"',
            ".align 8",
            f".globl {FATBIN_SYMBOL}",
            f".hidden {FATBIN_SYMBOL}",
            f".type {FATBIN_SYMBOL},@object",
            f"{FATBIN_SYMBOL}:",
            f'.incbin "{path}"',
            f".size {FATBIN_SYMBOL},.-{FATBIN_SYMBOL}",
            '.section .note.GNU-stack,"",@progbits',
            "",
        ]
    )


def module_id(key: str, source_name: str) -> str:
    """A module id in nvcc's form (``_<hex>_<len>_<name>_<hex>``), unique per build key."""
    mangled = re.sub(r"\W", "_", source_name)
    return f"_{key[:8]}_{len(source_name)}_{mangled}_{key[8:16]}"


def parallel_script(steps: NvccSteps, module: str, log_dir: str) -> str:
    """A POSIX sh script that runs ``steps`` on the schedule above (the overlapped tail where
    ``steps.split`` allows it); its exit status is nvcc's (the first failing step's), its output
    nvcc's, in nvcc's order, on standard error."""
    lines = [_export(assignment) for assignment in steps.environment]
    lines += [f"printf '%s\\n' {shlex.quote(note)} >&2" for note in steps.notes]
    lines += [_forced_rm(command) for command in steps.prelude]
    lines.append(_write(steps.module_id_file, module))  # as cudafe++ writes it: no newline (nvcc's quoting)
    logs = _Logs.under(log_dir)
    if steps.split is None:
        lines += _fronts(steps.host, steps.device, logs)
        lines += [f"cat {logs.device} >&2", _chain(steps.tail)]
    else:
        lines += _overlapped(steps.host, steps.split, logs)
    return "\n".join(lines) + "\n"


class _Logs(NamedTuple):
    """Where each part's output waits until nvcc would have printed it (shell-quoted paths)."""

    host: str
    device: str
    compile: str

    @classmethod
    def under(cls, folder: str) -> _Logs:
        return cls(*(shlex.quote(f"{folder}/{name}.log") for name in cls._fields))


def _fronts(host: Sequence[str], device: Sequence[str], logs: _Logs) -> list[str]:
    """The host chain in the background, the device chain in the foreground; then the host chain's
    output and, where it failed, its status. The device chain's output stays in its log."""
    return [
        f"( {_chain(host)} ) > {logs.host} 2>&1 &",
        "host=$!",
        f"( {_chain(device)} ) > {logs.device} 2>&1",
        "device_status=$?",
        'wait "$host"; host_status=$?',
        f"cat {logs.host} >&2",
        'if [ "$host_status" -ne 0 ]; then exit "$host_status"; fi',
        f'if [ "$device_status" -ne 0 ]; then cat {logs.device} >&2; exit "$device_status"; fi',
    ]


def _overlapped(host: Sequence[str], split: SplitTail, logs: _Logs) -> list[str]:
    """Our fatbinary wrapper and data source first; both fronts at once; then the host compile in the
    background beside the device back; then, in nvcc's order, their outputs and the final link."""
    return [
        _write(shlex.quote(split.wrapper_file), fatbin_wrapper()),
        _write(shlex.quote(split.data_source_file), fatbin_data_source(split.fatbin_file)),
        *_fronts(host, split.device_front, logs),
        f"( {_chain([split.host_compile])} ) > {logs.compile} 2>&1 &",
        "compile=$!",
        f"( {_chain(split.device_back)} ) >> {logs.device} 2>&1",
        "device_status=$?",
        'wait "$compile"; compile_status=$?',
        f"cat {logs.device} >&2",
        'if [ "$device_status" -ne 0 ]; then exit "$device_status"; fi',
        f"cat {logs.compile} >&2",
        'if [ "$compile_status" -ne 0 ]; then exit "$compile_status"; fi',
        _chain([split.link]),
    ]


def _write(target: str, text: str) -> str:
    """Write ``text`` as it is (no newline added) to ``target``, a path as the shell reads it."""
    return f"printf '%s' {shlex.quote(text)} > {target}"


def _export(assignment: str) -> str:
    """``export NAME='value'`` with the value as nvcc holds it (nvcc.profile's text, quotes included)."""
    name, value = assignment.split("=", 1)
    return f"export {name}={shlex.quote(value)}"


def _chain(commands: Sequence[str]) -> str:
    return " && ".join(f"{{ {command} ; }}" for command in commands)


def _forced_rm(command: str) -> str:
    """nvcc ignores a failed ``rm`` of a file that is not there yet; so does ``rm -f``."""
    return "rm -f" + command[2:] if command.startswith("rm ") else f"{command} || true"


def _words(commands: Sequence[str]) -> list[list[str]] | None:
    """Each command's words as the shell reads them; None when one does not parse."""
    try:
        return [shlex.split(command) for command in commands]
    except ValueError:
        return None


def _option(words: Sequence[str], name: str) -> str | None:
    """The value of ``name=VALUE`` or ``name VALUE`` among ``words``."""
    for index, word in enumerate(words):
        if word.startswith(f"{name}="):
            return word[len(name) + 1 :]
        if word == name and index + 1 < len(words):
            return words[index + 1]
    return None
