"""Where the judge's extra time on large memory-bound kernels comes from: each suspect timed alone.

Issue 38 (H200, 2026-12-04): through the judge, 19_ReLU (two 6.4 GB tensors) read 9.6 ms against 3.4 ms
for the same kernel in a user's process. The candidate process differs from a user's process in a few
ways; this script times a memory-bound op (``y = relu(x)``, one read and one write per element) with
CUDA events and the L2 flushed before each call, at several sizes, in each setting:

* ``owner_torch``: this process, tensors from torch's allocator (what a user's process does);
* ``owner_block``: this process, both tensors in one ``cudaMalloc`` block (the judge's arena);
* ``child_own``: a second process, its own torch tensors, while this one holds an idle context;
* ``child_ipc``: the second process on this process's block imported with ``cudaIpcOpenMemHandle``;
* ``child_vmm``: the second process on memory this process made with ``cuMemCreate`` (2 MiB
  granularity) and exported as a POSIX file descriptor, mapped there with ``cuMemMap``;
* ``pingpong_*``: as the judge times: this process rewrites the input, poisons the output, flushes
  and synchronises, then asks the child for one call; the child's own events (``inner``) and this
  process's window (``window``, minus the same window around an empty request) are both kept;
* ``gather_*``: 4 M random reads over the whole input (bound by address translation, not bandwidth).

    python3 benchmarks/clock_suspects.py --out benchmarks/results/clock_suspects.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from optiml.evaluate import cudart  # noqa: E402
from optiml.evaluate.candidate_process import VirtualMemory  # noqa: E402

MIB = 1 << 20
WARMUP = 2


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _Raw:
    def __init__(self, address: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False), "version": 2}


def pair(address: int, elements: int) -> tuple[torch.Tensor, torch.Tensor]:
    raw = torch.as_tensor(_Raw(address, 2 * elements * 4), device="cuda")
    flat = raw.view(torch.float32)
    return flat[:elements], flat[elements:]


def flush_buffer() -> torch.Tensor:
    return torch.empty(
        max(256 * MIB, 2 * torch.cuda.get_device_properties(0).L2_cache_size), dtype=torch.uint8, device="cuda"
    )


def one_call(x: torch.Tensor, y: torch.Tensor, gather: torch.Tensor | None = None) -> float:
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    if gather is None:
        run_op(x, y)
    else:
        torch.take(x, gather)
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


_LIBRARY: list[Any] = []  # the candidate library timed instead of torch's op (--so)


def run_op(x: torch.Tensor, y: torch.Tensor) -> None:
    """``y = relu(x)``: torch's kernel, or the ``--so`` library's ``optiml_forward`` on the current stream."""
    if not _LIBRARY:
        torch.clamp_min(x, 0.0, out=y)
        return
    from optiml.evaluate.abi import TensorArray

    rc = _LIBRARY[0].forward(TensorArray([x]), TensorArray([y]), None, torch.cuda.current_stream())
    if rc != 0:
        raise RuntimeError(f"optiml_forward returned {rc}")


def load_library(path: str | None) -> None:
    if path:
        from optiml.evaluate.abi import KernelLibrary

        _LIBRARY.append(KernelLibrary(path))


def timed(
    x: torch.Tensor, y: torch.Tensor, flush: torch.Tensor, trials: int, gather: torch.Tensor | None = None
) -> float:
    samples = []
    for index in range(trials + WARMUP):
        flush.zero_()
        torch.cuda.synchronize()
        ms = one_call(x, y, gather)
        if index >= WARMUP:
            samples.append(ms)
    return statistics.median(samples)


def indices(elements: int) -> torch.Tensor:
    generator = torch.Generator(device="cuda").manual_seed(0)
    return torch.randint(0, elements, (1 << 22,), device="cuda", generator=generator)


# -- the child ------------------------------------------------------------------------------------
def child(sock_fd: int, so: str | None) -> int:
    load_library(so)
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    sock = socket.socket(fileno=sock_fd)
    flush = flush_buffer()
    libcudart = ctypes.CDLL(cudart.library_path())
    driver = VirtualMemory(torch.cuda.current_device())
    tensors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    gathers: dict[int, torch.Tensor] = {}
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        reply: dict[str, Any] = {}
        if op == "exit":
            return 0
        elements = int(request.get("elements", 0))
        if op == "own":
            x = torch.rand(elements, device="cuda")
            y = torch.empty_like(x)
            reply["ms"] = timed(x, y, flush, request["trials"])
            reply["gather_ms"] = timed(x, y, flush, request["trials"], gathers.setdefault(elements, indices(elements)))
            del x, y
            torch.cuda.empty_cache()
        elif op == "map_ipc":
            handle = _IpcHandle.from_buffer_copy(bytes.fromhex(request["handle"]))
            ptr = ctypes.c_void_p()
            libcudart.cudaIpcOpenMemHandle.argtypes = [ctypes.POINTER(ctypes.c_void_p), _IpcHandle, ctypes.c_uint]
            code = libcudart.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, ctypes.c_uint(1))
            if code != 0:
                raise RuntimeError(f"cudaIpcOpenMemHandle: {code}")
            tensors["ipc"] = pair(int(ptr.value or 0), elements)
            reply["address"] = int(ptr.value or 0)
        elif op == "map_vmm":
            _, fds, _, _ = socket.recv_fds(sock, 16, 1)
            address = driver.import_fd(fds[0], int(request["bytes"]))[1]
            os.close(fds[0])
            tensors["vmm"] = pair(address, elements)
        elif op == "time":
            x, y = tensors[request["which"]]
            reply["ms"] = timed(x, y, flush, request["trials"])
            reply["gather_ms"] = timed(
                x, y, flush, request["trials"], gathers.setdefault(x.numel(), indices(x.numel()))
            )
        elif op == "call":
            if request.get("which"):
                x, y = tensors[request["which"]]
                reply["inner_ms"] = one_call(x, y)
            torch.cuda.synchronize()
        elif op == "unmap":
            tensors.clear()
            torch.cuda.synchronize()
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


# -- the parent -----------------------------------------------------------------------------------
class Child:
    def __init__(self, so: str | None) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", str(theirs.fileno()), *([so] if so else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
            text=True,
        )
        theirs.close()

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the child died ({self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self.ask_nowait()

    def ask_nowait(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write('{"op": "exit"}\n')
        self.proc.stdin.flush()
        self.proc.wait(timeout=60)


def pingpong(
    child_: Child, which: str, x: torch.Tensor, y: torch.Tensor, flush: torch.Tensor, trials: int, rewrite: bool
) -> dict[str, float]:
    stream = torch.cuda.current_stream()

    def window(name: str | None) -> tuple[float, float]:
        if rewrite:
            x.mul_(1.0)
            y.fill_(float("nan"))
        flush.zero_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        reply = child_.ask(op="call", which=name)
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end), float(reply.get("inner_ms", 0.0))

    empty = statistics.median([window(None)[0] for _ in range(trials + WARMUP)][WARMUP:])
    calls = [window(which) for _ in range(trials + WARMUP)][WARMUP:]
    return {
        "window_ms": statistics.median(c[0] for c in calls) - empty,
        "inner_ms": statistics.median(c[1] for c in calls),
        "empty_window_ms": empty,
    }


def measure(size_mib: int, trials: int, child_: Child, driver: VirtualMemory) -> dict[str, Any]:
    elements = size_mib * MIB // 4
    flush = flush_buffer()
    out: dict[str, Any] = {"size_mib": size_mib}
    x = torch.rand(elements, device="cuda")
    y = torch.empty_like(x)
    gather = indices(elements)
    out["owner_torch"] = timed(x, y, flush, trials)
    out["gather_owner_torch"] = timed(x, y, flush, trials, gather)
    del x, y
    torch.cuda.empty_cache()

    address = cudart.malloc(2 * elements * 4)
    bx, by = pair(address, elements)
    bx.uniform_()
    out["owner_block"] = timed(bx, by, flush, trials)
    own = child_.ask(op="own", elements=elements, trials=trials)
    out["child_own"], out["gather_child_own"] = own["ms"], own["gather_ms"]
    child_.ask(op="map_ipc", handle=cudart.ipc_handle(address).hex(), elements=elements)
    ipc = child_.ask(op="time", which="ipc", trials=trials)
    out["child_ipc"], out["gather_child_ipc"] = ipc["ms"], ipc["gather_ms"]
    out["pingpong_ipc"] = pingpong(child_, "ipc", bx, by, flush, trials, rewrite=True)
    out["pingpong_ipc_no_rewrite"] = pingpong(child_, "ipc", bx, by, flush, trials, rewrite=False)
    out["owner_block_after"] = timed(bx, by, flush, trials)

    nbytes = driver.rounded(2 * elements * 4)
    handle, vaddr = driver.create(nbytes)
    vx, vy = pair(vaddr, elements)
    vx.uniform_()
    out["owner_vmm"] = timed(vx, vy, flush, trials)
    fd = driver.export_fd(handle)
    socket.send_fds(child_.sock, [b"x"], [fd])
    os.close(fd)
    child_.ask(op="map_vmm", bytes=nbytes, elements=elements)
    vmm = child_.ask(op="time", which="vmm", trials=trials)
    out["child_vmm"], out["gather_child_vmm"] = vmm["ms"], vmm["gather_ms"]
    out["pingpong_vmm"] = pingpong(child_, "vmm", vx, vy, flush, trials, rewrite=True)
    out["granularity"] = driver.rounded(1)
    child_.ask(op="unmap")
    # the block and the VMM mapping stay mapped until this process exits (a probe: a few GB, freed then)
    cudart.free(address)
    return out


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    from result_file import head_commit, write_result

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "clock_suspects.json")
    parser.add_argument("--sizes-mib", default="256,1024,4096,6144")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--so", default=None, help="time this candidate library's optiml_forward instead of torch's op")
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()
    torch.zeros(1, device="cuda")
    load_library(args.so)
    driver = VirtualMemory(torch.cuda.current_device())
    child_ = Child(args.so)
    rows = []
    try:
        for size in (int(s) for s in args.sizes_mib.split(",")):
            row = measure(size, args.trials, child_, driver)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        child_.close()
    write_result(args.out, "clock_suspects", head_commit(args.commit), trials=args.trials, so=args.so, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
