"""A candidate kernel: CUDA C++ source in the OptiML ABI plus its extra nvcc flags."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from optiml.errors import KernelSourceError

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"//[^\n]*")
_SPACE = re.compile(r"\s+")
_FLAGS_LINE = re.compile(r"^//\s*optiml-flags:(?P<flags>.*)$", re.MULTILINE)
FLAGS_MARKER = "// optiml-flags:"


def normalize_source(code: str) -> str:
    """Source with comments removed and whitespace collapsed.

    Two candidates that differ only in comments or layout normalise to the same text, so the
    search's transposition table never evaluates the same kernel twice. (String literals that
    contain ``//`` are rare in kernels and merely make two equal kernels look different.)
    """
    code = _BLOCK_COMMENT.sub(" ", code)
    code = _LINE_COMMENT.sub(" ", code)
    return _SPACE.sub(" ", code).strip()


@dataclass(frozen=True)
class KernelSource:
    """Source code and the extra flags a candidate is built with; its identity is their hash.

    In a file, the flags travel in a first line ``// optiml-flags: -Xptxas -dlcm=ca`` (written by
    :meth:`to_file_text`, read back by :meth:`from_file`).
    """

    code: str
    flags: tuple[str, ...] = field(default=())

    @cached_property
    def digest(self) -> str:
        """Identity used by the transposition table and the run store (computed once per source)."""
        payload = normalize_source(self.code) + "\0" + "\0".join(self.flags)
        return hashlib.sha256(payload.encode()).hexdigest()[:20]

    def with_code(self, code: str) -> KernelSource:
        return replace(self, code=code)

    def with_flags(self, flags: tuple[str, ...]) -> KernelSource:
        return replace(self, flags=tuple(flags))

    @classmethod
    def from_file(cls, path: str | Path, flags: tuple[str, ...] = ()) -> KernelSource:
        file = Path(path)
        try:
            code = file.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise KernelSourceError(f"{file}: no such kernel file") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise KernelSourceError(f"{file}: cannot read: {exc}") from exc
        if "optiml_forward" not in code:
            raise KernelSourceError(
                f"{file}: does not define `optiml_forward`; run `optiml init-kernel TASK` for a skeleton"
            )
        recorded = _FLAGS_LINE.search(code)
        if not flags and recorded is not None:
            flags = tuple(recorded["flags"].split())
        return cls(code=code, flags=tuple(flags))

    def to_file_text(self) -> str:
        """The source with its extra nvcc flags recorded, so :meth:`from_file` restores both."""
        code = _FLAGS_LINE.sub("", self.code).lstrip("\n") if _FLAGS_LINE.search(self.code) else self.code
        if not self.flags:
            return code
        return f"{FLAGS_MARKER} {' '.join(self.flags)}\n{code}"
