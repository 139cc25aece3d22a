"""The candidate process: runs one candidate's ``optiml_forward`` on buffers the judge owns.

The judge (``optiml.evaluate.worker``) never loads a candidate's shared object. It starts this
script as a child (``python -I -S candidate_process.py --cudart PATH --device N``), shares its
buffers with it (CUDA IPC handles of blocks the judge allocated, or file mappings on a host
without a GPU) and sends requests; this process loads the candidate, calls it and answers. Its
answers are *claims*: the candidate's host code runs here with full access to this interpreter
and may rewrite any of it, so the judge decides nothing from them that it cannot check itself —
outputs are compared, inputs and guards checked, time taken, by the judge on its own clock.

Standard library and ctypes only (no torch, no package import): it starts in tens of
milliseconds plus the CUDA context. JSON lines: one request on stdin, one reply on the
original stdout (fd 1 is pointed at stderr first, so a candidate's ``printf`` cannot forge a
reply — though a candidate may of course write to the reply pipe on purpose, which is why
replies are only claims). Requests (``op``):

    load       {"so": PATH}                                  → {}   (or {"error": ...})
    map        {"id": K, "vmm": BYTES} | {"id": K, "ipc": HEX} | {"id": K, "file": PATH, "size": N}
               ("vmm": the allocation's descriptor arrives first on the ``--fd-socket`` socket)
    workspace  {"inputs": SPEC}                              → {"bytes": N}   shapes only: no data
    bind       {"id": B, "inputs": SPEC, "outputs": SPEC, "workspace": [K, OFFSET, BYTES] | null}
    call       {"id": B} | {"ids": [B1, B2, …]}              → {"rc", "sync", "inner_ms", "l2", "host_us"}
               optional "signal": [K, OFFSET, TOKEN]: write TOKEN to that 32-bit word of block K on this
               process's stream behind the call's work (reply "signal": the driver's return code)
    exit

``call`` with ``ids`` runs the bindings back to back on this process's stream, in order, and
synchronises once: the judge times several calls (each on inputs of its own) in one window, so
the window's fixed cost is shared (see ``optiml.evaluate.harness``). ``inner_ms`` is the whole
run's, on this process's own events. ``load`` also resets the persisting-L2 carve-out once, after
the library's static constructors ran; each call's reply says the carve-out's size after it
(``l2``), which the judge rejects when it is not zero. ``host_us`` is the process's own host clock
(microseconds) around the call's prologue (the start event), its launch (the candidate's host
code), the device synchronisation, and of that the ``tail``: the device-wide wait after the stream's
last event had happened, i.e. work of the call that ran outside the given stream. Claims like
``inner_ms``: the judge convicts on a tail (an honest shim's is evidence; a rewritten shim can hide it,
never make the judge's clock read less).

SPEC is an ``optiml_tensor`` array as the judge marshalled it (``structs``: base64 of the array,
``size``: bytes per entry) and one relocation per entry for its ``data`` field, the struct's
first member: ``["arena", K, OFFSET]`` (a shared block), ``["host", BASE64]`` (a scalar's
bytes, kept in this process) or ``["null"]``. ``call`` with ``id`` -1 launches an empty
kernel and with -2 a kernel that spins ``cycles`` clock cycles (both from :data:`PTX`, through
the driver API): the judge calibrates its round trip on a process of its own that never loads a
candidate, with real kernel launches so the context switches a candidate's call costs are in it.
"""

from __future__ import annotations

import base64
import ctypes
import json
import mmap
import os
import select
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

PR_SET_PDEATHSIG = 1
SIGKILL = 9
NON_BLOCKING = 0x01  # cudaStreamNonBlocking
LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
IPC_LAZY_PEER_ACCESS = 0x01  # cudaIpcMemLazyEnablePeerAccess
#: After each reply the process polls for the next request this long before it blocks (the judge passes
#: it as ``--poll-s``): a timed window's request then finds it awake. Blocked, it would first have to be
#: woken — on a virtual machine 0.1-0.3 ms once it has idled past the hypervisor's halt polling — inside
#: the window, a cost the calibration's back-to-back empty calls never pay. The judge's preparation of a
#: window (fresh inputs, references, poison, the previous window's check) takes tens of milliseconds for
#: GB-sized slots: with 50 ms of polling such windows carried the wake-up (19_ReLU's one-call residual fell
#: from 0.277 to 0.178 ms when only the poll changed, H100, 2026-12-05, ``window_residual_poll_h100.json``).
#: A second covers any preparation; the poll yields the CPU between looks, and a process that waits longer blocks.
POLL_S = 1.0


#: The calibration kernels: JIT-compiled by the driver for whatever GPU this is.
PTX = b"""
.version 7.0
.target sm_52
.address_size 64
.visible .entry optiml_empty() { ret; }
.visible .entry optiml_spin(.param .u64 cycles)
{
  .reg .u64 %rd<5>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
SPIN:
  mov.u64 %rd3, %clock64;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra SPIN;
  ret;
}
"""


class DriverKernels:
    """:data:`PTX` loaded into the current context (the runtime's primary one) via libcuda."""

    def __init__(self) -> None:
        self.driver = ctypes.CDLL("libcuda.so.1")
        module = ctypes.c_void_p()
        code = self.driver.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX + b"\0"))
        if code != 0:
            raise Failure(f"cuModuleLoadData failed with CUDA error {code}")
        self.kernels = {}
        for name in (b"optiml_empty", b"optiml_spin"):
            function = ctypes.c_void_p()
            code = self.driver.cuModuleGetFunction(ctypes.byref(function), module, name)
            if code != 0:
                raise Failure(f"cuModuleGetFunction failed with CUDA error {code}")
            self.kernels[name.decode()] = function
        self.driver.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3

    def launch(self, stream: int | ctypes.c_void_p | None, cycles: int | None = None) -> int:
        """One thread of ``optiml_empty`` (or ``optiml_spin`` for ``cycles``) on ``stream``."""
        if cycles is None:
            return int(
                self.driver.cuLaunchKernel(self.kernels["optiml_empty"], 1, 1, 1, 1, 1, 1, 0, stream, None, None)
            )
        value = ctypes.c_uint64(cycles)
        params = (ctypes.c_void_p * 1)(ctypes.addressof(value))
        return int(self.driver.cuLaunchKernel(self.kernels["optiml_spin"], 1, 1, 1, 1, 1, 1, 0, stream, params, None))


class StreamMemoryOps:
    """A stream that waits for, or writes, a 32-bit word of device memory (``cuStreamWaitValue32`` and
    ``cuStreamWriteValue32``, through the driver API).

    The judge ends a timed window on the device with these: its stream waits for a word the candidate
    process's stream writes after the call's work, so the window's end event runs when the GPU is done,
    not when two processes' host code has noticed (see ``optiml.evaluate.judge``)."""

    WAIT_EQ = 0x1  # CU_STREAM_WAIT_VALUE_EQ
    WRITE_DEFAULT = 0x0  # with a memory barrier: the stream's earlier writes are visible first

    def __init__(self, driver: Any | None = None) -> None:
        self.driver = driver if driver is not None else ctypes.CDLL("libcuda.so.1")
        self._wait = self._entry("cuStreamWaitValue32_v2", "cuStreamWaitValue32")
        self._write = self._entry("cuStreamWriteValue32_v2", "cuStreamWriteValue32")

    def _entry(self, *names: str) -> Any:
        for name in names:
            function = getattr(self.driver, name, None)
            if function is not None:
                function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
                function.restype = ctypes.c_int
                return function
        raise Failure(f"the CUDA driver has no {names[0]}")

    def wait(self, stream: int | ctypes.c_void_p | None, address: int, value: int) -> int:
        """Enqueue on ``stream``: wait until the word at ``address`` equals ``value``."""
        return int(self._wait(stream, address, value, self.WAIT_EQ))

    def write(self, stream: int | ctypes.c_void_p | None, address: int, value: int) -> int:
        """Enqueue on ``stream``: write ``value`` to the word at ``address`` once the stream's earlier work is done."""
        return int(self._write(stream, address, value, self.WRITE_DEFAULT))


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _MemAllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _MemAllocProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _MemLocation),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _MemAllocFlags),
    ]


class _MemAccessDesc(ctypes.Structure):
    _fields_ = [("location", _MemLocation), ("flags", ctypes.c_int)]


class VirtualMemory:
    """Device memory through CUDA's virtual memory API, shareable as a POSIX file descriptor.

    The judge's blocks were shared with ``cudaIpcGetMemHandle``; an importing process maps such an
    allocation with pages smaller than the exporter's once the device has been through many large
    allocations, and a streaming kernel then ran 3.5x slower on the imported mapping than on the same
    memory in the owning process (H200, 2026-12-04: a float4 ReLU over 2 x 6.4 GB, 11.7 ms in the
    candidate process against 3.3 ms in the judge; random gathers 35 % slower on a fresh 12 GiB
    import, benchmarks/results/clock_suspects.json). Here both sides map the same physical
    allocation themselves, at the allocation's granularity (2 MiB on Hopper), so a kernel sees the
    page size it would see in a user's process. Standard library and ctypes only (the shim's rule).
    """

    HANDLE_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    LOCATION_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
    ALLOCATION_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
    ACCESS_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    GRANULARITY_RECOMMENDED = 1

    def __init__(self, device: int) -> None:
        self.driver = ctypes.CDLL("libcuda.so.1")
        self.device = device
        context = ctypes.c_void_p()
        self._check("cuCtxGetCurrent", self.driver.cuCtxGetCurrent(ctypes.byref(context)))
        self.context = context  # made current again where memory is released (any thread)

    def _check(self, what: str, code: int) -> None:
        if code != 0:
            raise DriverError(what, code)

    def _prop(self) -> _MemAllocProp:
        prop = _MemAllocProp()
        prop.type = self.ALLOCATION_PINNED
        prop.requestedHandleTypes = self.HANDLE_POSIX_FD
        prop.location = _MemLocation(self.LOCATION_DEVICE, self.device)
        return prop

    def rounded(self, nbytes: int) -> int:
        """``nbytes`` rounded up to the allocation granularity."""
        granularity = ctypes.c_size_t()
        self._check(
            "cuMemGetAllocationGranularity",
            self.driver.cuMemGetAllocationGranularity(
                ctypes.byref(granularity), ctypes.byref(self._prop()), self.GRANULARITY_RECOMMENDED
            ),
        )
        step = max(1, int(granularity.value))
        return -(-max(1, nbytes) // step) * step

    def create(self, nbytes: int) -> tuple[int, int]:
        """A new allocation of ``nbytes`` (rounded) mapped here: (handle, address)."""
        handle = ctypes.c_uint64()
        self._check(
            "cuMemCreate",
            self.driver.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(nbytes), ctypes.byref(self._prop()), 0),
        )
        try:
            return handle.value, self._map(handle.value, nbytes)
        except Failure:
            self.driver.cuMemRelease(ctypes.c_uint64(handle.value))
            raise

    def export_fd(self, handle: int) -> int:
        """A new file descriptor for ``handle`` (the caller closes it once sent)."""
        fd = ctypes.c_int(-1)
        self._check(
            "cuMemExportToShareableHandle",
            self.driver.cuMemExportToShareableHandle(
                ctypes.byref(fd), ctypes.c_uint64(handle), self.HANDLE_POSIX_FD, ctypes.c_ulonglong(0)
            ),
        )
        return int(fd.value)

    def import_fd(self, fd: int, nbytes: int) -> tuple[int, int]:
        """The allocation behind ``fd`` mapped here: (handle, address)."""
        handle = ctypes.c_uint64()
        self._check(
            "cuMemImportFromShareableHandle",
            self.driver.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), self.HANDLE_POSIX_FD),
        )
        return handle.value, self._map(handle.value, nbytes)

    def _map(self, handle: int, nbytes: int) -> int:
        address = ctypes.c_uint64()
        self._check(
            "cuMemAddressReserve",
            self.driver.cuMemAddressReserve(
                ctypes.byref(address),
                ctypes.c_size_t(nbytes),
                ctypes.c_size_t(0),
                ctypes.c_uint64(0),
                ctypes.c_ulonglong(0),
            ),
        )
        try:
            self._check(
                "cuMemMap",
                self.driver.cuMemMap(
                    ctypes.c_uint64(address.value),
                    ctypes.c_size_t(nbytes),
                    ctypes.c_size_t(0),
                    ctypes.c_uint64(handle),
                    ctypes.c_ulonglong(0),
                ),
            )
            access = _MemAccessDesc(_MemLocation(self.LOCATION_DEVICE, self.device), self.ACCESS_READ_WRITE)
            self._check(
                "cuMemSetAccess",
                self.driver.cuMemSetAccess(
                    ctypes.c_uint64(address.value), ctypes.c_size_t(nbytes), ctypes.byref(access), ctypes.c_size_t(1)
                ),
            )
        except Failure:
            self.driver.cuMemUnmap(ctypes.c_uint64(address.value), ctypes.c_size_t(nbytes))
            self.driver.cuMemAddressFree(ctypes.c_uint64(address.value), ctypes.c_size_t(nbytes))
            raise
        return int(address.value)

    def release(self, handle: int, address: int, nbytes: int) -> None:
        """Unmap ``address`` and drop this process's reference to the allocation."""
        self.driver.cuCtxSetCurrent(self.context)
        self.driver.cuMemUnmap(ctypes.c_uint64(address), ctypes.c_size_t(nbytes))
        self.driver.cuMemAddressFree(ctypes.c_uint64(address), ctypes.c_size_t(nbytes))
        self.driver.cuMemRelease(ctypes.c_uint64(handle))


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class Failure(Exception):
    """A request this process could not carry out (the reply says why)."""


class DriverError(Failure):
    """A driver call of :class:`VirtualMemory` failed; ``code`` is its ``CUresult``."""

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} failed with CUDA error {code}")
        self.what, self.code = what, code


class Cuda:
    """The few runtime calls the candidate process makes itself, on its own context and stream."""

    def __init__(self, path: str, device: int) -> None:
        self.lib = ctypes.CDLL(path)
        self.device = device
        self._check("cudaSetDevice", self.lib.cudaSetDevice(ctypes.c_int(device)))
        self._check("cudaFree(0)", self.lib.cudaFree(ctypes.c_void_p(0)))  # creates the context now
        self.stream = ctypes.c_void_p()
        self._check(
            "cudaStreamCreateWithFlags",
            self.lib.cudaStreamCreateWithFlags(ctypes.byref(self.stream), ctypes.c_uint(NON_BLOCKING)),
        )
        self.start, self.end = ctypes.c_void_p(), ctypes.c_void_p()
        for event in (self.start, self.end):
            self._check("cudaEventCreate", self.lib.cudaEventCreate(ctypes.byref(event)))
        self.kernels = DriverKernels()
        self._signals: StreamMemoryOps | None = None
        self.lib.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), IpcHandle, ctypes.c_uint]
        self.synchronize()

    def _check(self, what: str, code: int) -> None:
        if code != 0:
            raise Failure(f"{what} failed with CUDA error {code}")

    def open_ipc(self, handle_hex: str) -> int:
        handle = IpcHandle.from_buffer_copy(bytes.fromhex(handle_hex))
        ptr = ctypes.c_void_p()
        self._check(
            "cudaIpcOpenMemHandle",
            self.lib.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, ctypes.c_uint(IPC_LAZY_PEER_ACCESS)),
        )
        return int(ptr.value or 0)

    def synchronize(self) -> int:
        return int(self.lib.cudaDeviceSynchronize())

    def wait(self, event: ctypes.c_void_p) -> int:
        """Until ``event`` (recorded on this process's stream) has happened: the stream's work is done."""
        return int(self.lib.cudaEventSynchronize(event))

    def reset_persisting_l2(self) -> None:
        self.lib.cudaCtxResetPersistingL2Cache()
        self.lib.cudaDeviceSetLimit(ctypes.c_int(LIMIT_PERSISTING_L2), ctypes.c_size_t(0))

    def persisting_l2(self) -> int:
        value = ctypes.c_size_t(0)
        if self.lib.cudaDeviceGetLimit(ctypes.byref(value), ctypes.c_int(LIMIT_PERSISTING_L2)) != 0:
            return 0
        return int(value.value)

    def record(self, event: ctypes.c_void_p) -> None:
        self.lib.cudaEventRecord(event, self.stream)

    def elapsed_ms(self) -> float:
        value = ctypes.c_float(0.0)
        if self.lib.cudaEventElapsedTime(ctypes.byref(value), self.start, self.end) != 0:
            return -1.0
        return float(value.value)

    def empty_call(self, cycles: int | None) -> int:
        return self.kernels.launch(self.stream, cycles)

    def signal(self, address: int, token: int) -> int:
        """Write ``token`` to the word at ``address`` on this process's stream, behind the call's work."""
        if self._signals is None:
            self._signals = StreamMemoryOps(self.kernels.driver)
        return self._signals.write(self.stream, address, token)


class Binding:
    """One call's marshalled arguments, relocated into this process's address space."""

    def __init__(self, inputs: tuple[Any, int], outputs: tuple[Any, int], workspace: int, workspace_bytes: int):
        (self.inputs, self.n_inputs), (self.outputs, self.n_outputs) = inputs, outputs
        self.workspace, self.workspace_bytes = workspace, workspace_bytes


class Runner:
    def __init__(self, cuda: Cuda | None, fd_socket: socket.socket | None = None) -> None:
        self.cuda = cuda
        self.fd_socket = fd_socket  # the judge sends the file descriptors of shared allocations here
        self._memory: VirtualMemory | None = None
        self.blocks: dict[int, int] = {}  # shared block id → base address here
        self._mappings: list[Any] = []  # file mappings (host mode), kept alive
        self._keep: list[Any] = []  # scalar buffers and struct arrays the bindings point into
        self.bindings: dict[int, Binding] = {}
        self.forward: Any = None
        self.workspace_fn: Any = None

    # -- requests ------------------------------------------------------------------------------
    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            lib = ctypes.CDLL(request["so"], mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as exc:
            raise Failure(f"cannot load the shared object: {exc}") from exc
        try:
            forward = lib.optiml_forward
        except AttributeError as exc:
            raise Failure("the library does not export `optiml_forward` (use OPTIML_EXPORT)") from exc
        forward.restype = ctypes.c_int
        forward.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
        forward.argtypes += [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.forward = forward
        workspace_fn = getattr(lib, "optiml_workspace_bytes", None)
        if workspace_fn is not None:
            workspace_fn.restype = ctypes.c_size_t
            workspace_fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.workspace_fn = workspace_fn
        self._keep.append(lib)
        if self.cuda is not None:  # whatever the library's constructors set aside is undone, untimed
            self.cuda.reset_persisting_l2()
            self.cuda.synchronize()
        return {}

    def map(self, request: dict[str, Any]) -> dict[str, Any]:
        if "vmm" in request:
            self.blocks[int(request["id"])] = self._map_virtual(int(request["vmm"]))
            return {}
        if "ipc" in request:
            if self.cuda is None:
                raise Failure("a CUDA IPC handle was sent to a process without CUDA")
            self.blocks[int(request["id"])] = self.cuda.open_ipc(request["ipc"])
            return {}
        with open(request["file"], "r+b") as handle:
            mapping = mmap.mmap(handle.fileno(), int(request["size"]))
        self._mappings.append(mapping)
        self.blocks[int(request["id"])] = ctypes.addressof(ctypes.c_char.from_buffer(mapping))
        return {}

    def _map_virtual(self, nbytes: int) -> int:
        """Map the allocation whose descriptor the judge sent on the socket just before the request."""
        if self.cuda is None or self.fd_socket is None:
            raise Failure("a shared allocation was sent to a process without CUDA or a descriptor socket")
        _, fds, _, _ = socket.recv_fds(self.fd_socket, 1, 1)
        if len(fds) != 1:
            raise Failure("the judge's descriptor for a shared allocation did not arrive")
        try:
            if self._memory is None:
                self._memory = VirtualMemory(self.cuda.device)
            return self._memory.import_fd(fds[0], nbytes)[1]
        finally:
            for fd in fds:
                os.close(fd)

    def workspace(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.workspace_fn is None:
            return {"bytes": 0}
        array, count = self._relocate(request["inputs"])
        return {"bytes": int(self.workspace_fn(ctypes.addressof(array), count))}

    def bind(self, request: dict[str, Any]) -> dict[str, Any]:
        workspace, workspace_bytes = 0, 0
        if request.get("workspace"):
            block, offset, workspace_bytes = request["workspace"]
            workspace = self.blocks[int(block)] + int(offset)
        self.bindings[int(request["id"])] = Binding(
            self._relocate(request["inputs"]), self._relocate(request["outputs"]), workspace, int(workspace_bytes)
        )
        return {}

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        ids = request["ids"] if "ids" in request else [request.get("id", -1)]
        bindings = [self.bindings.get(int(i)) for i in ids]
        runnable = self.forward is not None and all(b is not None for b in bindings)
        cuda = self.cuda
        if cuda is None:  # host mode: a CPU library, timed by the host clock
            start = time.perf_counter()
            rc = self._forward_all(bindings, None) if runnable else 0
            inner_ms = (time.perf_counter() - start) * 1e3
            signal = self._signal_word(request)
            if signal is not None:  # no stream here: the word is stored once the call has returned
                ctypes.c_uint32.from_address(signal[0]).value = signal[1]
            return {"rc": rc, "sync": 0, "inner_ms": inner_ms, "l2": 0}
        signal = self._signal_word(request)
        t0 = time.perf_counter()
        cuda.record(cuda.start)
        t1 = time.perf_counter()
        if runnable:
            rc = self._forward_all(bindings, cuda.stream)
        else:
            rc = cuda.empty_call(int(request["cycles"]) if "cycles" in request else None)
        cuda.record(cuda.end)
        signalled = cuda.signal(*signal) if signal is not None else None
        t2 = time.perf_counter()
        stream_sync = cuda.wait(cuda.end)
        t3 = time.perf_counter()
        sync = cuda.synchronize() or stream_sync
        t4 = time.perf_counter()
        inner = cuda.elapsed_ms() if sync == 0 else -1.0
        # tail: the device-wide wait after the stream's last event, i.e. work left outside the given stream
        host_us = {"prologue": (t1 - t0) * 1e6, "launch": (t2 - t1) * 1e6, "sync": (t4 - t2) * 1e6}
        host_us["tail"] = (t4 - t3) * 1e6
        reply = {"rc": rc, "sync": sync, "inner_ms": inner, "l2": cuda.persisting_l2(), "host_us": host_us}
        if signalled is not None:
            reply["signal"] = signalled
        return reply

    # -- helpers -------------------------------------------------------------------------------
    def _signal_word(self, request: dict[str, Any]) -> tuple[int, int] | None:
        """The address and token of the request's ``signal`` ([block, offset, token]), if it names one."""
        if request.get("signal") is None:
            return None
        block, offset, token = (int(v) for v in request["signal"])
        if block not in self.blocks:
            raise Failure(f"the signal names block {block}, which was not mapped")
        return self.blocks[block] + offset, token & 0xFFFFFFFF

    def _forward_all(self, bindings: list[Any], stream: ctypes.c_void_p | None) -> int:
        """Each binding's call in order on ``stream``; the first nonzero return code ends the run."""
        for binding in bindings:
            rc = self._forward(binding, stream)
            if rc != 0:
                return rc
        return 0

    def _forward(self, binding: Binding, stream: ctypes.c_void_p | None) -> int:
        return int(
            self.forward(
                ctypes.addressof(binding.inputs),
                binding.n_inputs,
                ctypes.addressof(binding.outputs),
                binding.n_outputs,
                binding.workspace or None,
                binding.workspace_bytes,
                stream,
            )
        )

    def _relocate(self, spec: dict[str, Any]) -> tuple[Any, int]:
        raw = base64.b64decode(spec["structs"])
        array = (ctypes.c_char * max(1, len(raw))).from_buffer_copy(raw or b"\0")
        size = int(spec["size"])
        for index, where in enumerate(spec["data"]):
            if where[0] == "arena":
                address = self.blocks[int(where[1])] + int(where[2])
            elif where[0] == "host":
                payload = base64.b64decode(where[1])
                host = ctypes.create_string_buffer(payload, max(8, len(payload)))
                self._keep.append(host)
                address = ctypes.addressof(host)
            else:
                address = 0
            ctypes.c_void_p.from_buffer(array, index * size).value = address or None
        self._keep.append(array)
        return array, len(spec["data"])


def _die_with_parent() -> None:
    """Ask the kernel to kill this process when the judge dies (it runs in its own session)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def serve(cuda: Cuda | None, requests: Any, reply_fd: int, fd_socket: socket.socket | None = None) -> int:
    runner = Runner(cuda, fd_socket)
    handlers = {
        "load": runner.load,
        "map": runner.map,
        "workspace": runner.workspace,
        "bind": runner.bind,
        "call": runner.call,
    }
    _reply(reply_fd, {"ok": True, "result": {"pid": os.getpid()}})
    for line in requests:
        request = json.loads(line)
        op = request.get("op")
        if op == "exit":
            return 0
        try:
            result = handlers[op](request)
        except (Failure, KeyError, ValueError, OSError) as exc:
            _reply(reply_fd, {"ok": False, "error": str(exc) or type(exc).__name__})
            continue
        _reply(reply_fd, {"ok": True, "result": result})
    return 0


def polled_lines(fd: int, poll_s: float = POLL_S) -> Iterator[bytes]:
    """The lines of ``fd``, each waited for by polling up to ``poll_s`` and then by blocking (see POLL_S)."""
    os.set_blocking(fd, False)
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = _read_polled(fd, poll_s)
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line


def _read_polled(fd: int, poll_s: float) -> bytes:
    until = time.perf_counter() + poll_s
    while True:
        try:
            return os.read(fd, 1 << 16)
        except BlockingIOError:
            if time.perf_counter() > until:
                select.select([fd], [], [])
            else:
                os.sched_yield()


def _reply(fd: int, message: dict[str, Any]) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def main(argv: list[str]) -> int:
    _die_with_parent()
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # the candidate's printf goes to stderr
    try:
        path = options.get("--cudart", "none")
        cuda = None if path == "none" else Cuda(path, int(options.get("--device", "0")))
    except (Failure, OSError) as exc:
        _reply(reply_fd, {"ok": False, "error": f"the candidate process could not start CUDA: {exc}"})
        return 1
    fd_socket = socket.socket(fileno=int(options["--fd-socket"])) if "--fd-socket" in options else None
    poll_s = float(options.get("--poll-s", POLL_S)) if cuda is not None else 0.0  # host mode: no timing to spare
    requests = polled_lines(0, poll_s)
    return serve(cuda, requests, reply_fd, fd_socket)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
