"""The judge's side of a candidate: its process, the buffers it is lent, and the judge's clock.

The judge process (``optiml.evaluate.worker``) computes every verdict; a candidate's shared
object only ever runs in a :class:`CandidateProcess` that the judge starts. :class:`Judge` keeps
what lasts across candidates on one device (shared buffers per shape set, a workspace block, a
spare process already holding its CUDA context, the calibrated round trip); a
:class:`CandidateSession` is one candidate's process with its mappings and bindings.

**The judge's window.** A timed call is ``e0`` recorded on the judge's stream, the host clock
read, the request written, the reply read (the host clock's end), ``e1`` recorded, the output
check enqueued behind ``e1``, then ``e1`` awaited (the event window's end). The candidate process synchronises
the whole device before it replies, so all the call's device work — on the given stream, the
legacy stream, any other stream — lies inside the window. Where the GPU allows, ``e1`` is enqueued
*before* the request, behind a wait for a word the candidate's stream writes after the call's work
(:mod:`optiml.evaluate.device_end`): the event window then ends when the GPU has done the call, as
the user's events would, instead of when two processes' host code has noticed. A candidate that replies early
(rewriting the candidate process's own code so it does not synchronise) gains nothing: contexts
of different processes take turns on the GPU, so ``e1`` and the check behind it run either after
the leftover work (which is then counted) or while it is suspended half done (and the check sees
an unfinished output). Both ends are the judge's: host time ``t1 − t0`` and event time
``e0 → e1``, each minus the same window measured around an *empty* call — a real, empty kernel
launch — in a process of the judge's own that never loads a candidate (:meth:`Judge.calibration`),
so a candidate cannot inflate the part that is subtracted. The calibration also times a kernel
that spins a fixed number of cycles through that window and directly on the judge's stream: what
the window adds beyond the empty call's cost (``excess_ms``) is measured, not assumed to be zero.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import torch

from optiml.evaluate import cudart
from optiml.evaluate.arena import Block, SharedBuffers, abi_spec, layout_key
from optiml.evaluate.calibration_check import calibration_plausible, device_end_problem
from optiml.evaluate.candidate_link import CandidateFailure, CandidateProcess
from optiml.evaluate.candidate_process import Failure
from optiml.evaluate.device_end import DeviceEnd
from optiml.evaluate.timing import DeviceTimer
from optiml.values import EvalStatus

T = TypeVar("T")

CALIBRATION_CALLS = 41
CALIBRATION_ATTEMPTS = 3
SPIN_CALLS = 15
SPIN_CYCLES = 200_000  # ~0.1 ms at H200 clocks
EMPTY_CALL = {"op": "call", "id": -1}  # the candidate process's empty kernel (candidate_process.PTX)
SPIN_CALL = {"op": "call", "id": -2, "cycles": SPIN_CYCLES}
SHARED_STRETCH = 1.5  # the spin kernel's slowest call over its fastest: another context's time slice
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
POISON_WORKSPACE = 0xFF
#: The judge polls for a timed window's reply this long before it blocks. Blocked for the length of a
#: long call it can be woken late (a virtual machine's idle halt), and the window's end event, recorded
#: after the wake-up, would carry latency the calibration's short empty calls never pay: a one-call
#: window on a 3.3 ms kernel read ~0.35 ms over the call (H200, 2026-12-04; the poll's own share of that
#: is not measured yet). The candidate process polls for requests for the same reason.
REPLY_SPIN_S = 0.5


@dataclass(frozen=True)
class Calibration:
    """The judge's window around an empty call: what every timed call's window has on top of its work."""

    event_ms: float
    host_ms: float
    host_spread_ms: float  # half the inter-quartile range of the host window
    calls: int
    excess_ms: float = 0.0  # window(spin) − window(empty) − spin timed directly: what calibration misses
    spin_direct_ms: float = 0.0
    #: the calibration process's own host clock around an empty call (median µs per phase; diagnostics)
    claimed_host_us: dict[str, float] = field(default_factory=dict)
    #: where a timed window ends: "device" (the judge's stream waits for the candidate's word) or "host"
    window_end: str = "host"
    host_end_event_ms: float = 0.0  # the empty call's window ended on the host, for comparison
    #: another context took time slices while it was taken (the spin kernel, timed directly, varied by one):
    #: its round trip holds some of them, so a reading it pushes below the physics floor convicts nobody
    shared: bool = False

    def event_ms_for(self, end: str) -> float:
        """The round trip to subtract from a window that ended at ``end``."""
        return self.event_ms if end == self.window_end else self.host_end_event_ms

    def note(self) -> str:
        """One line for the task notes: where timed windows end and what the round trip subtracted is."""
        if self.window_end == "device":
            return (
                f"timed windows end on the device (the judge's stream waits for the candidate stream's word): "
                f"{self.event_ms:.3f} ms round trip subtracted ({self.host_end_event_ms:.3f} ms ended on the host)"
            )
        return f"timed windows end on the host (the candidate's reply): {self.event_ms:.3f} ms round trip subtracted"


@dataclass(frozen=True)
class Window:
    """One timed call as the judge saw it (raw, before the calibration is removed)."""

    event_ms: float
    host_ms: float
    reply: dict[str, Any]
    check: Any  # what the check enqueued behind e1 returned (a device tensor, usually)
    end: str = "host"  # where e1 was decided: "device" or "host"


class Judge:
    """Per-device state of the judge; one candidate at a time."""

    def __init__(self, device: torch.device, workdir: Path, flush_l2: bool = True) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.workdir = workdir
        self.flush_l2 = flush_l2
        self.cudart_path = cudart.library_path() if self.cuda else None
        self._timer: DeviceTimer | None = None
        self._buffers: dict[tuple[Any, ...], SharedBuffers] = {}
        self._workspace: Block | None = None
        self._spare: CandidateProcess | None = None
        self._closing: list[threading.Thread] = []  # killed candidate processes being reaped
        self._calibration: Calibration | None = None
        self._least_host_ms = math.inf  # the shortest empty-call round trip of any calibration (host clock)
        self._device_end: DeviceEnd | None = None
        self._device_end_tried = False
        self._names = itertools.count()
        self.notes: list[str] = []  # isolation facts found on the way

    def note(self, line: str) -> None:
        """Add ``line`` to the isolation and clock notes once (a recalibration may find the same again)."""
        if line not in self.notes:
            self.notes.append(line)

    # -- processes ---------------------------------------------------------------------------
    def spawn(self) -> CandidateProcess:
        index = self.device.index if self.device.index is not None else 0
        return CandidateProcess(self.cudart_path, index, self.workdir, f"candidate-{next(self._names)}")

    def take_process(self) -> CandidateProcess:
        """The spare process (started earlier, so its CUDA context is likely up), or a new one."""
        process, self._spare = self._spare, None
        if process is None or not process.alive:
            if process is not None:
                process.close()
            process = self.spawn()
        process.wait_ready()
        return process

    def close_in_background(self, process: CandidateProcess) -> None:
        """Kill ``process`` now and reap it on a thread: its CUDA context's teardown (60-110 ms on the H200,
        2026-12-03) leaves the evaluation's critical path. The next timed window waits for it, so no
        teardown overlaps a measurement."""
        process.stop()
        reaper = threading.Thread(target=process.close, name="optiml-reap", daemon=True)
        reaper.start()
        self._closing.append(reaper)

    def wait_for_closes(self) -> None:
        """Until every process handed to close_in_background is reaped."""
        while self._closing:
            self._closing.pop().join()

    def keep_spare(self) -> None:
        """Start the next candidate's process now (called after a reply, while the orchestrator compiles)."""
        if self._spare is None or not self._spare.alive:
            self._spare = self.spawn()

    # -- memory ------------------------------------------------------------------------------
    def buffers(self, args: list[Any], expected: list[torch.Tensor], slot: int = 0) -> SharedBuffers:
        """The shared buffers for calls shaped like these; ``slot`` tells apart the sets one timed
        window holds at once (each call of a window has inputs and outputs of its own)."""
        key = (*layout_key(args, expected), ("slot", slot))
        if key not in self._buffers:
            self._buffers[key] = SharedBuffers(args, expected, str(self.workdir))
        return self._buffers[key]

    def workspace(self, nbytes: int) -> Block:
        """A shared block of at least ``nbytes``; a larger request replaces it (sessions keep the old alive)."""
        if self._workspace is None or self._workspace.nbytes < nbytes:
            if self._workspace is not None:
                self._workspace.close()
            self._workspace = Block(nbytes, self.device, str(self.workdir))
        return self._workspace

    def forget_buffers(self) -> None:
        """Drop the shared buffers (another task is coming)."""
        for buffers in self._buffers.values():
            buffers.block.close()
        self._buffers = {}

    # -- the clock ---------------------------------------------------------------------------
    def before_call(self) -> None:
        """Untimed, before every call: L2 flushed by the judge, persisting L2 reset, device idle."""
        self.prepare_call(lambda: None)

    def prepare_call(self, last: Callable[[], T]) -> T:
        """:meth:`before_call`, with ``last`` enqueued behind the flush and finished, like the rest, before it
        returns (its result): nothing it reads can race the call the candidate is sent next."""
        if not self.cuda:
            return last()
        if self._timer is None:
            self._timer = DeviceTimer(torch.cuda.current_stream(self.device), flush_l2=self.flush_l2)
        return self._timer._before_call(None, last)

    def window(
        self,
        process: CandidateProcess,
        message: dict[str, Any],
        deadline: float,
        check: Callable[[], Any],
        end: str = "host",
    ) -> Window:
        """Time one request on the judge's clock; ``check`` is enqueued right behind the end event.

        ``end`` "device": the end event waits for the word the candidate process writes behind the call's
        work (``process`` must have the judge's signal block mapped: :meth:`share_device_end`)."""
        if self._closing:
            self.wait_for_closes()
        if not self.cuda:
            t0 = time.perf_counter()
            process.send(message)
            reply = process.receive(deadline)
            host = (time.perf_counter() - t0) * 1e3
            return Window(host, host, reply, check())
        stream = torch.cuda.current_stream(self.device)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        device_end = self._device_end if end == "device" else None
        if device_end is None:
            t0 = time.perf_counter()
            process.send(message)
            reply = process.receive(deadline, REPLY_SPIN_S)
            host = (time.perf_counter() - t0) * 1e3  # the candidate process synchronised before replying
            stop.record(stream)
            pending = check()
        else:
            token = device_end.arm(stream)
            try:
                stop.record(stream)
                t0 = time.perf_counter()
                process.send({**message, "signal": device_end.signal(token)})
                # Enqueued behind e1 while the call runs, after the request: should an allocation in it
                # synchronise the device, the request is out, so the wait ends with the call.
                pending = check()
                reply = process.receive(deadline, REPLY_SPIN_S)
            finally:
                device_end.release(token)  # whatever the candidate did, the judge's stream goes on
            host = (time.perf_counter() - t0) * 1e3  # holds the check's enqueueing if the reply came during it
        stop.synchronize()
        return Window(start.elapsed_time(stop), host, reply, pending, "host" if device_end is None else "device")

    def share_device_end(self, process: CandidateProcess, deadline: float) -> bool:
        """Map the signal block into ``process``; False where this judge has no device end."""
        if self._device_end is None:
            return False
        self.map_block(process, self._device_end.block, deadline)
        return True

    def map_block(self, process: CandidateProcess, block: Block, deadline: float) -> None:
        """Map ``block`` into ``process`` (its descriptor first, where it is shared by one)."""
        if "vmm" in block.share:  # the allocation's descriptor goes first, on the process's socket
            fd = block.export_fd()
            try:
                process.send_fd(fd)
            finally:
                os.close(fd)
        try:
            process.request({"op": "map", **block.share}, deadline)
        except CandidateFailure:
            if "ipc" not in block.share or not set_dumpable(True):
                raise
            # A driver whose IPC import inspects the exporting process needs the judge dumpable;
            # the judge then stays so (said in the isolation notes) rather than judging nothing.
            self.notes.append("the judge is dumpable: CUDA IPC on this driver needs it")
            process.request({"op": "map", **block.share}, deadline)

    def _start_device_end(self) -> None:
        """The signal block and stream operations, once per judge; a GPU or driver without them keeps the
        host's end (said in the notes)."""
        if self._device_end_tried or not self.cuda:
            return
        self._device_end_tried = True
        try:
            self._device_end = DeviceEnd(self.device, str(self.workdir))
        except (Failure, OSError, RuntimeError) as exc:
            self.note(f"timed windows end on the host: stream memory operations are unavailable ({exc})")

    def recalibrate(self) -> Calibration:
        """A fresh calibration, for a verdict that rests on it: the device's load may have changed
        since the cached one was taken (another process's work stretches or shrinks every window)."""
        self._calibration = None
        return self.calibration()

    def calibration(self) -> Calibration:
        """The window around an empty call, in a process of the judge's own (never a candidate's).

        A calibration out of the bounds honest ones keep (:func:`calibration_plausible`: a process
        stopped or slowed while it ran) is taken again, up to :data:`CALIBRATION_ATTEMPTS` times; if none
        is plausible, the one with the shortest round trip is kept (subtracting less only ever makes a
        candidate read slower), and the notes say so."""
        if self._calibration is None:
            attempts: list[Calibration] = []
            for _ in range(CALIBRATION_ATTEMPTS):
                attempts.append(self._calibrate())
                if attempts[-1].host_ms > 0:
                    self._least_host_ms = min(self._least_host_ms, attempts[-1].host_ms)
                reason = calibration_plausible(attempts[-1], cuda=self.cuda)
                if reason is None:
                    break
                self.notes.append(f"a calibration was taken again: {reason}")
            # none plausible: something stalled or shared every attempt, so none may convict (``shared``)
            chosen = attempts[-1] if reason is None else replace(min(attempts, key=lambda c: c.event_ms), shared=True)
            self._calibration = chosen
        return self._calibration

    def least_round_trip_ms(self) -> float:
        """The shortest round trip (host clock, empty call) any calibration of this judge has read: no window
        carries less overhead than that, whatever the load when the current calibration was taken."""
        return self._least_host_ms if math.isfinite(self._least_host_ms) else 0.0

    def _calibrate(self) -> Calibration:
        """Empty calls through windows ended on the host and, where the GPU allows, on the device; the device
        end is kept only if :func:`device_end_problem` finds nothing wrong with it."""
        self._start_device_end()
        process = self.spawn()
        try:
            process.wait_ready()
            deadline = time.monotonic() + 60
            empty = host_empty = self._windows(process, EMPTY_CALL, CALIBRATION_CALLS, "host")
            direct_times = self._spin_times() if self.cuda else [0.0]
            direct = statistics.median(direct_times)
            end = "host"
            if self._share_for_calibration(process, deadline):
                tried = self._device_end_windows(process, host_empty, direct)
                if isinstance(tried, str):
                    self.note(f"timed windows end on the host: {tried}")
                else:
                    end, (empty, spin) = "device", tried
            if end == "host":
                spin = self._windows(process, SPIN_CALL, SPIN_CALLS, "host")
        finally:
            process.close()
        hosts = [w.host_ms for w in empty]
        quartiles = statistics.quantiles(hosts, n=4)
        event_ms = low_quantile([w.event_ms for w in empty])
        spin_ms = low_quantile([w.event_ms for w in spin]) if self.cuda else event_ms
        return Calibration(
            event_ms=event_ms,
            host_ms=low_quantile(hosts),
            host_spread_ms=(quartiles[2] - quartiles[0]) / 2,
            calls=len(hosts),
            excess_ms=spin_ms - event_ms - direct,
            spin_direct_ms=direct,
            claimed_host_us=median_phases([w.reply.get("result", {}) for w in empty]),
            window_end=end,
            host_end_event_ms=low_quantile([w.event_ms for w in host_empty]),
            shared=_stretched(direct_times),
        )

    def _share_for_calibration(self, process: CandidateProcess, deadline: float) -> bool:
        """The signal block mapped into the calibration process; a failure keeps the host's end (noted)."""
        try:
            return self.share_device_end(process, deadline)
        except (CandidateFailure, Failure, OSError) as exc:
            self.note(f"timed windows end on the host: the signal block could not be shared ({exc})")
            return False

    def _device_end_windows(
        self, process: CandidateProcess, host_empty: list[Window], spin_direct_ms: float
    ) -> tuple[list[Window], list[Window]] | str:
        """The empty and spin calls through windows that end on the device, or why the judge cannot trust them."""
        try:
            empty = self._windows(process, EMPTY_CALL, CALIBRATION_CALLS, "device")
            spin = self._windows(process, SPIN_CALL, SPIN_CALLS, "device")
        except (Failure, CandidateFailure) as exc:  # the driver refused the stream wait or the write
            return str(exc)
        codes = {int(w.reply.get("result", {}).get("signal", 0)) for w in empty + spin} - {0}
        if codes:
            return f"the calibration process could not write the word (CUDA error {min(codes)})"
        problem = device_end_problem(
            low_quantile([w.event_ms for w in host_empty]),
            low_quantile([w.event_ms for w in empty]),
            low_quantile([w.event_ms for w in spin]),
            spin_direct_ms,
        )
        return problem if problem is not None else (empty, spin)

    def _windows(self, process: CandidateProcess, message: dict[str, Any], count: int, end: str) -> list[Window]:
        deadline = time.monotonic() + 60
        windows = []
        for index in range(count + 5):
            self.before_call()
            window = self.window(process, message, deadline, lambda: None, end)
            CandidateProcess.result(window.reply)
            if index >= 5:
                windows.append(window)
        return windows

    def gpu_shared(self) -> bool:
        """Whether another process's context is taking time slices of the GPU now: the judge's own
        spin kernel, timed on its own stream, then varies by whole slices (alone, within a few percent)."""
        if not self.cuda:
            return False
        return _stretched(self._spin_times())

    def _spin_times(self) -> list[float]:
        from optiml.evaluate.candidate_process import DriverKernels

        kernels = DriverKernels()
        stream = torch.cuda.current_stream(self.device)
        times = []
        for _ in range(SPIN_CALLS):
            self.before_call()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            kernels.launch(stream.cuda_stream, SPIN_CYCLES)
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end))
        return times

    def close(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None
        self.wait_for_closes()
        self.forget_buffers()
        if self._workspace is not None:
            self._workspace.close()
            self._workspace = None
        if self._device_end is not None:
            self._device_end.close()
            self._device_end = None


class CandidateSession:
    """One candidate's process: its library, the blocks it has mapped, its bindings."""

    def __init__(self, judge: Judge, process: CandidateProcess, deadline: float) -> None:
        self.judge = judge
        self.process = process
        self.deadline = deadline
        self._mapped: dict[int, Block] = {}  # kept alive while the process may touch them
        self._workspace_needs: dict[tuple[Any, ...], int] = {}
        self._bindings: dict[tuple[Any, ...], tuple[int, Block | None, int]] = {}  # (block id, scalars)
        self._ids = itertools.count(1)
        self._device_end_shared = False

    def load(self, so_path: str) -> None:
        threads = self._threads()
        self.process.send({"op": "load", "so": so_path})
        CandidateProcess.result(self.process.receive(self.deadline), EvalStatus.LOAD_ERROR)
        self._no_new_thread(threads, "when its library was loaded")

    def workspace_bytes(self, values: list[Any]) -> int:
        """``optiml_workspace_bytes`` on shapes only (null data pointers), once per layout."""
        key = layout_key(values, [])
        if key not in self._workspace_needs:
            spec = abi_spec(values, None)
            threads = self._threads()
            result = self.process.request({"op": "workspace", "inputs": spec}, self.deadline)
            self._no_new_thread(threads, "when asked for its workspace size")
            self._workspace_needs[key] = int(result["bytes"])
        return self._workspace_needs[key]

    def _threads(self) -> int:
        """The candidate process's threads once it is ready (its CUDA context's own threads started)."""
        self.process.wait_ready(self.deadline)
        return self.process.thread_count()

    def _no_new_thread(self, before: int, when: str) -> None:
        """Calls are counted around themselves (``harness``); a thread started outside any call would be
        taken for the process's own by those counts, and could work beside every later call."""
        if self.process.thread_count() > before:
            raise CandidateFailure(
                EvalStatus.INTEGRITY, f"the candidate started a host thread or process {when}, still running after it"
            )

    def bind(self, buffers: SharedBuffers) -> int:
        """A binding id for the current contents' scalars of ``buffers`` (cached)."""
        scalars = tuple(a for a in buffers.args if not isinstance(a, torch.Tensor))
        key = (buffers.block.id, scalars)
        if key in self._bindings:
            return self._bindings[key][0]
        need = self.workspace_bytes(buffers.args)
        workspace: Block | None = None
        if need:
            try:
                workspace = self.judge.workspace(need)
            except (torch.cuda.OutOfMemoryError, cudart.CudaError) as exc:
                raise CandidateFailure(
                    EvalStatus.OUT_OF_MEMORY, f"the candidate asked for {need} bytes of workspace: {exc}"
                ) from exc
            self._map(workspace)
        self._map(buffers.block)
        binding = next(self._ids)
        self.process.request(
            {
                "op": "bind",
                "id": binding,
                "inputs": abi_spec(buffers.args, buffers.block),
                "outputs": abi_spec(buffers.outputs, buffers.block),
                "workspace": [workspace.id, 0, need] if workspace is not None else None,
            },
            self.deadline,
        )
        self._bindings[key] = (binding, workspace, need)
        return binding

    def poison_workspace(self, *buffers: SharedBuffers) -> None:
        """Overwrite the workspace of the calls on ``buffers`` before they run: nothing a previous call
        left there survives. Calls that share a workspace block (a timed window's) poison it once."""
        poisoned: dict[int, int] = {}  # block id → bytes
        for one in buffers:
            scalars = tuple(a for a in one.args if not isinstance(a, torch.Tensor))
            _, workspace, need = self._bindings[(one.block.id, scalars)]
            if workspace is not None and need > poisoned.get(workspace.id, 0):
                workspace.bytes[:need].fill_(POISON_WORKSPACE)
                poisoned[workspace.id] = need

    def call(self, binding: int) -> dict[str, Any]:
        """An untimed call (verification); raises for a nonzero return code or a CUDA error."""
        return self.judge_reply(self.process.request({"op": "call", "id": binding}, self.deadline))

    def timed_calls(self, bindings: list[int], check: Callable[[], Any], end: str = "host") -> Window:
        """One window over the calls of ``bindings``, run back to back by the candidate process; ``end``: the
        calibration's (a window that ends on the device needs the judge's signal block mapped first)."""
        if end == "device" and not self._device_end_shared:
            self._device_end_shared = self.judge.share_device_end(self.process, self.deadline)
        if not self._device_end_shared:
            end = "host"
        window = self.judge.window(self.process, {"op": "call", "ids": bindings}, self.deadline, check, end)
        self.judge_reply(CandidateProcess.result(window.reply))
        return window

    @staticmethod
    def judge_reply(result: dict[str, Any]) -> dict[str, Any]:
        """What the candidate process says about the call, checked for what it can tell us."""
        rc, sync = int(result.get("rc", 0)), int(result.get("sync", 0))
        if rc != 0:
            raise CandidateFailure(EvalStatus.RUNTIME_ERROR, f"optiml_forward returned {rc} ({cudart.error_name(rc)})")
        if sync != 0:
            raise CandidateFailure(
                EvalStatus.RUNTIME_ERROR, f"CUDA error after the call: {cudart.error_name(sync)} ({sync})"
            )
        if int(result.get("l2", 0)) > 0:
            raise CandidateFailure(
                EvalStatus.INTEGRITY, "the candidate set a persisting-L2 carve-out (cudaLimitPersistingL2CacheSize)"
            )
        return result

    def close(self) -> None:
        """Kill the candidate process; it is reaped in the background (Judge.close_in_background)."""
        self.judge.close_in_background(self.process)
        self._mapped = {}

    def _map(self, block: Block) -> None:
        if block.id in self._mapped:
            return
        self.judge.map_block(self.process, block, self.deadline)
        self._mapped[block.id] = block


def low_quantile(values: list[float]) -> float:
    """The 10th percentile: what is subtracted as the round trip. Another process's work on a shared GPU
    only ever lengthens a window, so the low end is the round trip itself; a median taken while
    the GPU was busy was subtracted from windows taken while it was not and read honest kernels as
    below the physics floor (H200, 2026-12-01, four pytest workers on one GPU)."""
    return statistics.quantiles(values, n=10)[0] if len(values) > 1 else min(values)


def median_phases(results: list[dict[str, Any]]) -> dict[str, float]:
    """Per-phase medians of the ``host_us`` the candidate process reports with each call (none: {})."""
    phases = [r["host_us"] for r in results if isinstance(r.get("host_us"), dict)]
    names = {name for p in phases for name in p}
    return {name: round(statistics.median(float(p.get(name, 0.0)) for p in phases), 2) for name in sorted(names)}


def set_dumpable(on: bool) -> bool:
    """``prctl(PR_SET_DUMPABLE)``: off, other processes of this user cannot ptrace this one or read
    its memory through /proc. Returns whether the setting changed (False where it was already so)."""
    libc = ctypes.CDLL(None)
    if bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) == on:
        return False
    return libc.prctl(PR_SET_DUMPABLE, int(on), 0, 0, 0) == 0


def _stretched(spin_times: list[float]) -> bool:
    """Whether the spin kernel's calls varied by another context's time slice."""
    return max(spin_times) > SHARED_STRETCH * min(spin_times)
