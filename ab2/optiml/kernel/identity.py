"""What a build *does*, as a hash: two candidates with equal binary digests run the same code.

A shared object is not bit-reproducible (build id, nvcc's temporary names, the build folder and the
source's line numbers in ``-lineinfo``), so the digest is taken from nvcc's kept intermediates
(``nvcc --keep``) instead:

* **device code** — every section of the cubin except debug information (``.debug_*``,
  ``.nv_debug_*`` and their relocations): machine code, constants, kernel attributes (launch bounds,
  registers, shared memory), symbols;
* **host code** — the host translation unit cudafe++ hands to the host compiler
  (``kernel.cudafe1.cpp``) and its registration stub, with line markers dropped and the module id
  (derived from the build folder) replaced by a constant: macros are expanded in it, so a
  ``#define BLOCK 256`` used by the launch shows as ``256``;
* the flags that change host code without showing in either (``-Xcompiler …``, ``-O``, libraries).

A candidate that differs from an earlier one only in comments, layout, unused macros or dead code
the compilers drop gets the earlier one's digest; its timing can be taken over instead of measured.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

_LINE_MARKER = re.compile(rb"^#(?:line)? ?\d+[^\n]*\n", re.MULTILINE)
_SHT_NOBITS = 8
#: flags whose effect is fully visible in the cubin or in the preprocessed host source
_DEVICE_ONLY = re.compile(
    r"-lineinfo|-w|--?resource-usage|-Wno-deprecated-gpu-targets|--?use_fast_math|--?restrict"
    r"|--?(ftz|prec-div|prec-sqrt|fmad)=\w+|--?maxrregcount=\d+|--?extra-device-vectorization|-[DU].*"
)
_DEVICE_ONLY_WITH_VALUE = ("-Xptxas", "--ptxas-options", "-maxrregcount", "--maxrregcount", "-D", "-U")


class IdentityError(Exception):
    """The kept intermediates are missing or unreadable: no digest (the build itself may be fine)."""


def elf_sections(data: bytes) -> Iterator[tuple[str, int, int, bytes]]:
    """``(name, type, flags, content)`` of each section of a little-endian ELF64 file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise IdentityError("not a little-endian ELF64 file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    for name_off, kind, flags, _addr, offset, size, *_ in headers:
        start = names_at + name_off
        name = data[start : data.index(b"\0", start)].decode("ascii", errors="replace")
        yield name, kind, flags, b"" if kind == _SHT_NOBITS else data[offset : offset + size]


def device_digest(cubins: Sequence[Path]) -> str:
    """Hash of the cubins' sections, debug information left out."""
    digest = hashlib.sha256()
    for cubin in cubins:
        try:
            data = cubin.read_bytes()
            sections = list(elf_sections(data))
        except (OSError, struct.error, ValueError) as exc:
            raise IdentityError(f"{cubin.name}: {exc}") from exc
        for name, kind, flags, content in sections:
            if "debug" in name:
                continue
            digest.update(name.encode() + struct.pack("<IQQ", kind, flags, len(content)) + content)
    return digest.hexdigest()


def host_digest(host_sources: Sequence[Path], module_id: str) -> str:
    """Hash of the host translation unit(s), without line markers and with the module id neutralised."""
    digest = hashlib.sha256()
    for source in host_sources:
        try:
            text = source.read_bytes()
        except OSError as exc:
            raise IdentityError(f"{source.name}: {exc}") from exc
        if module_id:
            text = text.replace(module_id.encode(), b"MODULE_ID")
        digest.update(_LINE_MARKER.sub(b"", text))
    return digest.hexdigest()


def host_flags(flags: Sequence[str]) -> list[str]:
    """The flags that may change host code without showing in the preprocessed host source."""
    kept, index = [], 0
    while index < len(flags):
        flag = flags[index]
        if flag in _DEVICE_ONLY_WITH_VALUE:
            index += 2
            continue
        if not (_DEVICE_ONLY.fullmatch(flag) or flag.split("=", 1)[0] in _DEVICE_ONLY_WITH_VALUE):
            kept.append(flag)
        index += 1
    return kept


def binary_digest(keep_dir: Path, stem: str, flags: Sequence[str], libraries: Sequence[str]) -> str:
    """The identity of the build whose intermediates ``nvcc --keep`` left in ``keep_dir``."""
    cubins = sorted(p for p in keep_dir.glob(f"{stem}*.cubin") if "_dlink" not in p.name)
    hosts = [keep_dir / f"{stem}.cudafe1.cpp", keep_dir / f"{stem}.cudafe1.stub.c"]
    if not cubins:
        raise IdentityError(f"nvcc kept no cubin in {keep_dir}")
    try:
        module_id = (keep_dir / f"{stem}.module_id").read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        module_id = ""
    digest = hashlib.sha256()
    digest.update(device_digest(cubins).encode())
    digest.update(host_digest(hosts, module_id).encode())
    digest.update("\0".join(host_flags(flags)).encode() + b"\1" + ",".join(libraries).encode())
    return digest.hexdigest()[:24]
