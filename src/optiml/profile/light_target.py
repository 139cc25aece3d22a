"""The torch-free program ncu profiles: candidates called on a case written by ``case_dump``.

Launched as::

    ncu --profile-from-start off … python -I -S light_target.py --case DIR --so a.so [--so b.so …] \\
        --report EVENTS.jsonl

Standard library and ctypes only, runnable as a plain script (no package import, no torch), so the
process ncu starts costs a Python start-up (tens of ms) and a CUDA context instead of importing
torch under ncu's injection (the bulk of the ~6 s per launch the torch target costs on the H200).
CUDA comes from the driver library (``libcuda.so.1``): the primary context is made current, so a
candidate's statically linked runtime uses the same one; buffers are ``cuMemAlloc`` allocations
filled from the case files.

With ``--gate FILE`` the target writes a ``ready`` event once its context exists and the case is on
the GPU, and waits for ``FILE`` before any candidate is loaded: the profiler takes the GPU lock then
(:class:`optiml.profile.ncu.GpuTurn`), so ncu's and the target's start overlap the evaluator's timings.

Same protocol as :mod:`optiml.profile.target`: every candidate is loaded, bound and called once
for warm-up outside the profiled range, then once inside ``cuProfilerStart``/``Stop``, right
after a marker kernel (``optiml_profile_marker``, JIT-compiled from a few lines of PTX) that
opens the candidate's group of kernels in ncu's list. The JSON-lines report names what was
profiled, in order; a candidate's output on fd 1 is sent to stderr (ncu's CSV is on stdout).
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import sys
import time
from typing import IO, Any

MANIFEST = "case.json"  # written by optiml.profile.case_dump
MARKER_NAME = "optiml_profile_marker"
MARKER_PTX = f"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry {MARKER_NAME}()
{{
    ret;
}}
"""
CHUNK_BYTES = 1 << 26
STREAM_NON_BLOCKING = 1
POISON = 0xFF
EXIT_CONTEXT_LOST = 3
GATE_POLL_S = 0.002
READY_EVENT = "ready"  # the report's event after which the profiler may open the gate (GpuTurn)


class CudaError(Exception):
    def __init__(self, call: str, code: int, sticky: bool) -> None:
        super().__init__(f"{call} failed with CUDA error {code}")
        self.sticky = sticky


class Driver:
    """The few driver API calls the target needs, on the primary context of device 0."""

    STICKY = frozenset({700, 701, 702, 714, 715, 716, 717, 718, 719, 720})  # illegal address, launch failure, …

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check("cuInit", self.lib.cuInit(0))
        device = ctypes.c_int()
        self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(device), 0))
        self.context = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.context), device))
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(self.context))
        name = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(name, 256, device)
        self.name = name.value.decode(errors="replace")
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cuMemsetD8_v2.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t]
        self.lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3

    def check(self, call: str, code: int) -> None:
        if code != 0:
            raise CudaError(call, code, code in self.STICKY)

    def alloc(self, size: int) -> int:
        pointer = ctypes.c_uint64()
        self.check("cuMemAlloc", self.lib.cuMemAlloc_v2(ctypes.byref(pointer), max(1, size)))
        return pointer.value

    def fill_from(self, pointer: int, path: str, size: int) -> None:
        chunk = bytearray(min(CHUNK_BYTES, max(1, size)))
        view = memoryview(chunk)
        address = ctypes.addressof(ctypes.c_char.from_buffer(chunk))
        done = 0
        with open(path, "rb") as file:
            while done < size:
                got = file.readinto(view[: min(len(chunk), size - done)])
                if not got:
                    raise OSError(f"{path}: {size - done} bytes short")
                self.check("cuMemcpyHtoD", self.lib.cuMemcpyHtoD_v2(pointer + done, address, got))
                done += got

    def poison(self, pointer: int, size: int) -> None:
        self.check("cuMemsetD8", self.lib.cuMemsetD8_v2(pointer, POISON, size))

    def stream(self) -> ctypes.c_void_p:
        stream = ctypes.c_void_p()
        self.check("cuStreamCreate", self.lib.cuStreamCreate(ctypes.byref(stream), STREAM_NON_BLOCKING))
        return stream

    def marker(self) -> ctypes.c_void_p:
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        self.check("cuModuleLoadData", self.lib.cuModuleLoadData(ctypes.byref(module), MARKER_PTX.encode() + b"\0"))
        self.check(
            "cuModuleGetFunction", self.lib.cuModuleGetFunction(ctypes.byref(function), module, MARKER_NAME.encode())
        )
        return function

    def launch_marker(self, function: ctypes.c_void_p, stream: ctypes.c_void_p) -> None:
        self.check("cuLaunchKernel", self.lib.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, stream, None, None))

    def synchronize(self) -> None:
        self.check("cuCtxSynchronize", self.lib.cuCtxSynchronize())


class Arrays:
    """The case's input and output ``optiml_tensor`` arrays, relocated onto fresh allocations."""

    def __init__(self, driver: Driver, case_dir: str, manifest: dict[str, Any]) -> None:
        self.entry = int(manifest["entry_bytes"])
        self._keep: list[Any] = []
        self.outputs: list[tuple[int, int]] = []
        self.inputs = self._array(driver, case_dir, manifest["inputs"], fill=True)
        self.shapes_only = self._array(driver, case_dir, manifest["inputs"], fill=False, null_device=True)
        self.output_array = self._array(driver, case_dir, manifest["outputs"], fill=False)
        self.n_inputs, self.n_outputs = len(manifest["inputs"]), len(manifest["outputs"])

    def _array(
        self, driver: Driver, case_dir: str, entries: list[dict[str, Any]], *, fill: bool, null_device: bool = False
    ) -> ctypes.Array[ctypes.c_char]:
        array = ctypes.create_string_buffer(self.entry * max(1, len(entries)))
        for index, entry in enumerate(entries):
            struct = base64.b64decode(entry["struct"])
            if entry["data"] == "host":
                host = ctypes.create_string_buffer(base64.b64decode(entry["host"]))
                self._keep.append(host)
                pointer = ctypes.addressof(host)
            elif null_device:
                pointer = 0
            else:
                pointer = driver.alloc(int(entry["bytes"]))
                if fill and "file" in entry:
                    driver.fill_from(pointer, os.path.join(case_dir, entry["file"]), int(entry["bytes"]))
                elif not fill:
                    self.outputs.append((pointer, int(entry["bytes"])))
            struct = pointer.to_bytes(8, sys.byteorder) + struct[8:]
            ctypes.memmove(ctypes.addressof(array) + index * self.entry, struct, len(struct))
        self._keep.append(array)
        return array


class Candidate:
    def __init__(self, so_path: str, arrays: Arrays, driver: Driver, stream: ctypes.c_void_p) -> None:
        self.lib = ctypes.CDLL(so_path, mode=ctypes.RTLD_LOCAL)
        self.forward = self.lib.optiml_forward
        self.forward.restype = ctypes.c_int
        pointer, count = ctypes.c_void_p, ctypes.c_int  # (inputs, n, outputs, n, workspace, bytes, stream)
        self.forward.argtypes = [pointer, count, pointer, count, pointer, ctypes.c_size_t, pointer]
        self.arrays, self.stream = arrays, stream
        self.workspace, self.workspace_bytes = 0, 0
        sizer = getattr(self.lib, "optiml_workspace_bytes", None)
        if sizer is not None:
            sizer.restype, sizer.argtypes = ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int]
            self.workspace_bytes = int(sizer(arrays.shapes_only, arrays.n_inputs))
            if self.workspace_bytes:
                self.workspace = driver.alloc(self.workspace_bytes)

    def __call__(self) -> int:
        a = self.arrays
        return int(
            self.forward(
                a.inputs,
                a.n_inputs,
                a.output_array,
                a.n_outputs,
                self.workspace or None,
                self.workspace_bytes,
                self.stream,
            )
        )


def run(args: argparse.Namespace, events: IO[str]) -> int:
    with open(os.path.join(args.case, MANIFEST), encoding="utf-8") as file:
        manifest = json.load(file)
    driver = Driver()
    stream = driver.stream()
    marker = driver.marker()
    arrays = Arrays(driver, args.case, manifest)
    _event(
        events, "case", input_bytes=manifest["input_bytes"], output_bytes=manifest["output_bytes"], device=driver.name
    )
    if args.gate:  # our turn on the GPU: no candidate code runs before it
        wait_for_turn(events, args.gate)
    ready: list[tuple[int, str, Candidate]] = []
    for index, so_path in enumerate(args.so):
        label = f"candidate {index}"
        try:
            candidate = Candidate(so_path, arrays, driver, stream)
            _call(candidate, arrays, driver)  # warm-up, outside the profiled range
        except (OSError, AttributeError, RuntimeError, CudaError) as exc:
            _event(events, "failed", index=index, label=label, error=str(exc).splitlines()[0])
            if isinstance(exc, CudaError) and exc.sticky:
                return EXIT_CONTEXT_LOST
            continue
        ready.append((index, label, candidate))
    for index, label, candidate in ready:
        _event(events, "profiling", index=index, label=label)
        driver.check("cuProfilerStart", driver.lib.cuProfilerStart())
        try:
            driver.launch_marker(marker, stream)
            _call(candidate, arrays, driver)
        except (RuntimeError, CudaError) as exc:
            _event(events, "failed", index=index, label=label, error=str(exc).splitlines()[0])
            if isinstance(exc, CudaError) and exc.sticky:
                return EXIT_CONTEXT_LOST
            continue
        finally:
            driver.lib.cuProfilerStop()
        _event(events, "profiled", index=index, label=label)
    _event(events, "done")
    return 0


def wait_for_turn(events: IO[str], gate: str) -> None:
    """Say ``ready`` in the report, then wait until the profiler has written ``gate`` (its GPU turn)."""
    _event(events, READY_EVENT)
    while not os.path.exists(gate):
        time.sleep(GATE_POLL_S)


def _call(candidate: Candidate, arrays: Arrays, driver: Driver) -> None:
    for pointer, size in arrays.outputs:
        driver.poison(pointer, size)
    rc = candidate()
    driver.synchronize()
    if rc != 0:
        raise RuntimeError(f"optiml_forward returned {rc}")


def _event(stream: IO[str], kind: str, **fields: Any) -> None:
    stream.write(json.dumps({"event": kind, **fields}) + "\n")
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="light_target.py")
    parser.add_argument("--case", required=True, help="folder written by optiml.profile.case_dump")
    parser.add_argument("--so", action="append", default=[], help="a candidate shared object (repeatable)")
    parser.add_argument("--report", required=True, help="JSON-lines file of what was profiled")
    parser.add_argument("--gate", help="say 'ready' once the case is on the GPU, then wait for this file to exist")
    args = parser.parse_args(argv)
    os.dup2(2, 1)  # a candidate's printf must not mix into ncu's CSV on stdout
    sys.stdout = sys.stderr
    with open(args.report, "a", encoding="utf-8") as events:
        try:
            return run(args, events)
        except (OSError, CudaError, ValueError, KeyError) as exc:
            _event(events, "error", error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            print(f"profile target: {exc}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
