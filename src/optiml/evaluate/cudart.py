"""A few CUDA runtime calls torch does not expose, through the libcudart torch already loaded."""

from __future__ import annotations

import ctypes
import threading
from functools import lru_cache
from pathlib import Path

_LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


@lru_cache(maxsize=1)
def _cudart() -> ctypes.CDLL | None:
    """The libcudart mapped into this process (torch's), or any findable one."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        if "libcudart" in Path(path).name:
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def error_name(code: int) -> str:
    """``cudaErrorIllegalAddress``-style name for a runtime error code (or the number)."""
    lib = _cudart()
    if lib is None or code < 0:
        return str(code)
    fn = lib.cudaGetErrorName
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_int]
    name = fn(code)
    return name.decode() if name else str(code)


def reset_persisting_l2() -> bool:
    """Drop persisting-L2 lines and set the persisting carve-out to zero. False if unavailable."""
    lib = _cudart()
    if lib is None:
        return False
    ok = lib.cudaCtxResetPersistingL2Cache() == 0
    ok = lib.cudaDeviceSetLimit(ctypes.c_int(_LIMIT_PERSISTING_L2), ctypes.c_size_t(0)) == 0 and ok
    return ok


def persisting_l2_limit() -> int:
    """Current persisting-L2 carve-out in bytes (a candidate that raises it is cheating the timer)."""
    lib = _cudart()
    if lib is None:
        return 0
    value = ctypes.c_size_t(0)
    if lib.cudaDeviceGetLimit(ctypes.byref(value), ctypes.c_int(_LIMIT_PERSISTING_L2)) != 0:
        return 0
    return int(value.value)


def thread_count() -> int:
    """OS threads in this process (a candidate must not leave any behind)."""
    try:
        return len(list(Path("/proc/self/task").iterdir()))
    except OSError:
        return threading.active_count()
