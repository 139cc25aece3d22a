"""Memory the judge owns and lends to a candidate process, and the ABI arrays that point into it.

A :class:`Block` is one allocation made for sharing and nothing else: on a GPU a ``cudaMalloc``
outside torch's caching allocator (whose IPC handles would expose the whole cached segment,
reference outputs included), shared by its CUDA IPC handle; on a host without a GPU a file
mapping (how the CPU tests run the real protocol). The judge works on it through torch views.

:class:`SharedBuffers` lays a call's input copies and outputs out in one block, each followed by
a guard region, and :func:`abi_spec` marshals an ``optiml_tensor`` array with abi.py and turns
every ``data`` pointer into a relocation the candidate process resolves in its own address space.
"""

from __future__ import annotations

import base64
import ctypes
import functools
import itertools
import mmap
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch

from optiml.evaluate import cudart
from optiml.evaluate.abi import DTYPE_CODES, OptimlTensor, TensorArray
from optiml.evaluate.candidate_process import DriverError, Failure, VirtualMemory
from optiml.evaluate.checks import GUARD_BYTE, GUARD_BYTES, poison_

ALIGN = 256  # every buffer starts on a 256-byte boundary (vector loads, TMA)
_SCALAR_BYTES = {DTYPE_CODES[torch.bool]: 1, DTYPE_CODES[torch.int64]: 8, DTYPE_CODES[torch.float64]: 8}
_ids = itertools.count(1)


class _DeviceMemory:
    """``__cuda_array_interface__`` over a device allocation; ``release`` frees it when the last view dies."""

    def __init__(self, address: int, nbytes: int, release: Callable[[], None]) -> None:
        self.address = address
        self._release = release
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 2,
        }

    def __del__(self) -> None:
        self._release()


@functools.cache
def _virtual_memory(device: int) -> VirtualMemory | None:
    """The virtual-memory API on ``device`` where it can share allocations as file descriptors
    (tried once, for real, with the smallest allocation); None: blocks fall back to CUDA IPC handles."""
    with torch.cuda.device(device):
        torch.cuda.synchronize()  # the device's primary context exists and is current on this thread
        try:
            memory = VirtualMemory(device)  # keeps that context, made current again where memory is released
            nbytes = memory.rounded(1)
            handle, address = memory.create(nbytes)
            try:
                os.close(memory.export_fd(handle))
            finally:
                memory.release(handle, address, nbytes)
        except (Failure, OSError, AttributeError):
            return None
    return memory


def sharing_note(device: torch.device) -> str:
    """How this judge shares its blocks with candidate processes (for the isolation notes)."""
    if device.type != "cuda":
        return "blocks are shared as file mappings (no GPU)"
    if _virtual_memory(_index(device)) is not None:
        return "blocks are shared as virtual-memory allocations (file descriptors), mapped at 2 MiB pages"
    return "blocks are shared as CUDA IPC handles: the virtual-memory API is unavailable here"


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


class Block:
    """One shared allocation: ``bytes`` (a uint8 tensor over all of it) and what a candidate needs to map it.

    On a GPU the allocation comes from CUDA's virtual-memory API and is shared as a file descriptor
    (:meth:`export_fd`, sent over the candidate process's socket), so the candidate maps it at the
    allocation's own page size (:class:`~optiml.evaluate.candidate_process.VirtualMemory` says why);
    where that API is unavailable, a ``cudaMalloc`` shared by its IPC handle. Without a GPU, a file.
    """

    def __init__(self, nbytes: int, device: torch.device, directory: str | None = None) -> None:
        self.id = next(_ids)
        self.nbytes = max(1, nbytes)
        self._export: Callable[[], int] | None = None
        if device.type == "cuda":
            self.bytes = torch.as_tensor(self._device_memory(device), device=device)
        else:
            fd, path = tempfile.mkstemp(prefix="optiml-block-", dir=directory)
            os.ftruncate(fd, self.nbytes)
            mapping = mmap.mmap(fd, self.nbytes)
            os.close(fd)
            self.share = {"id": self.id, "file": path, "size": self.nbytes}
            self._path = path
            self.bytes = torch.frombuffer(mapping, dtype=torch.uint8)
        self.base = self.bytes.data_ptr()

    def _device_memory(self, device: torch.device) -> _DeviceMemory:
        """The block's device allocation. Where the card looks full, torch's cached but unused blocks (a reference's
        freed temporaries, the compiled baseline's buffers) are handed back to the driver and the allocation is tried
        once more: this allocation goes to the driver directly and cannot use them."""
        try:
            return self._allocate(device)
        except cudart.CudaError as exc:
            if not exc.out_of_memory:
                raise
        torch.cuda.empty_cache()
        return self._allocate(device)

    def _allocate(self, device: torch.device) -> _DeviceMemory:
        memory = _virtual_memory(_index(device))
        if memory is None:
            address = cudart.malloc(self.nbytes)
            try:
                self.share = {"id": self.id, "ipc": cudart.ipc_handle(address).hex()}
            except cudart.CudaError:
                cudart.free(address)
                raise
            return _DeviceMemory(address, self.nbytes, functools.partial(cudart.free, address))
        try:
            rounded = memory.rounded(self.nbytes)
            handle, address = memory.create(rounded)
        except DriverError as exc:
            raise cudart.CudaError(exc.what, exc.code) from exc  # 2: out of memory, as the runtime says
        self.share = {"id": self.id, "vmm": rounded}
        self._export = functools.partial(memory.export_fd, handle)
        return _DeviceMemory(address, self.nbytes, functools.partial(memory.release, handle, address, rounded))

    def export_fd(self) -> int:
        """A new file descriptor of this block's allocation, for a candidate process to map (close it once sent)."""
        if self._export is None:
            raise ValueError("this block is not shared by file descriptor")
        return self._export()

    def view(self, offset: int, like: torch.Tensor) -> torch.Tensor:
        """A contiguous tensor shaped like ``like`` at ``offset``."""
        nbytes = like.numel() * like.element_size()
        raw = self.bytes[offset : offset + nbytes]
        return raw.view(like.dtype).view(like.shape) if nbytes else torch.empty_like(like)

    def close(self) -> None:
        if "file" in self.share:
            os.unlink(self._path)


def _align(value: int) -> int:
    return (value + ALIGN - 1) // ALIGN * ALIGN


class SharedBuffers:
    """A candidate's input copies and its outputs, each followed by a guard region, in one block.

    The same buffers serve every call of one shape set (addresses repeat while contents change,
    so a cache keyed on addresses returns stale answers); ``key`` says which calls they fit.
    """

    def __init__(self, args: Sequence[Any], expected: Sequence[torch.Tensor], directory: str | None = None):
        self.key = layout_key(args, expected)
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + list(expected)
        offsets, cursor = [], 0
        for tensor in tensors:
            offset = _align(cursor)
            offsets.append(offset)
            cursor = offset + tensor.numel() * tensor.element_size() + GUARD_BYTES
        device = tensors[0].device if tensors else torch.device("cpu")
        self.block = Block(cursor, device, directory)
        views = [self.block.view(o, t) for o, t in zip(offsets, tensors, strict=True)]
        self.guards = [
            self.block.bytes[o + t.numel() * t.element_size() : o + t.numel() * t.element_size() + GUARD_BYTES]
            for o, t in zip(offsets, tensors, strict=True)
        ]
        n_in = len(tensors) - len(expected)
        inputs = iter(views[:n_in])
        self.args: list[Any] = [next(inputs) if isinstance(a, torch.Tensor) else a for a in args]
        self.outputs: list[torch.Tensor] = views[n_in:]
        self._n_in = n_in

    def refill(self, args: Sequence[Any]) -> None:
        """New input values at the same addresses, outputs poisoned, guards re-armed."""
        for index, value in enumerate(args):
            if isinstance(value, torch.Tensor):
                self.args[index].copy_(value)
            else:
                self.args[index] = value
        self.poison_outputs()
        for guard in self.guards:
            guard.fill_(GUARD_BYTE)

    def poison_outputs(self) -> None:
        for out in self.outputs:
            poison_(out)

    def overrun(self) -> str | None:
        """Which buffer's guard region was written, if any (outputs first)."""
        names = [f"input {i}" for i, a in enumerate(self.args) if isinstance(a, torch.Tensor)]
        names += [f"output {i}" for i in range(len(self.outputs))]
        order = list(range(self._n_in, len(self.guards))) + list(range(self._n_in))
        for index in order:
            if not bool((self.guards[index] == GUARD_BYTE).all().item()):
                return names[index]
        return None


def layout_key(args: Sequence[Any], expected: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """What must match for two calls to share buffers: every tensor's shape and dtype, in order."""
    parts: list[Any] = [(tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else type(a).__name__ for a in args]
    parts += [("out", tuple(e.shape), e.dtype) for e in expected]
    return tuple(parts)


def abi_spec(values: Sequence[Any], block: Block | None) -> dict[str, Any]:
    """An ``optiml_tensor`` array for the candidate process (see ``candidate_process``).

    Tensors must live in ``block``; with ``block=None`` their data pointers are null (the
    shapes-only call of ``optiml_workspace_bytes``). Scalars travel as their bytes.
    """
    array = TensorArray(values)
    size = ctypes.sizeof(OptimlTensor)
    data: list[list[Any]] = []
    for index, value in enumerate(values):
        slot = array.array[index]
        if isinstance(value, torch.Tensor):
            if block is None or value.numel() == 0:
                data.append(["null"])
                continue
            offset = value.data_ptr() - block.base
            if not 0 <= offset < block.nbytes:
                raise ValueError(f"argument {index} is not in the shared block")
            data.append(["arena", block.id, offset])
        else:
            payload = ctypes.string_at(slot.data, _SCALAR_BYTES[slot.dtype])
            data.append(["host", base64.b64encode(payload).decode()])
    raw = ctypes.string_at(ctypes.addressof(array.array), size * len(values))
    return {"structs": base64.b64encode(raw).decode(), "size": size, "data": data}
