"""The timed window's end on the device: the judge's stream waits for a word the candidate's stream writes.

A window that ends on the host (the judge records its end event once the candidate process has
replied) holds, beyond the call, the candidate's wake-up from its device synchronisation, its reply
and the judge's reading of it. An empty call's window has the same steps, but after a wait of
milliseconds they cost more than after none: a one-call window on a 3.3 ms kernel read ~0.3 ms above
the kernel's own events, whatever the kernel (H200, 2026-12-05, ``docs/evaluation.md``), while the
user's clock — CUDA events around the call in one process — has no host in it at all.

So before it sends a timed request the judge enqueues on its stream: the start event, a wait until a
32-bit word of a shared block equals a fresh token (``cuStreamWaitValue32``), the end event and the
output check. The request names the word and the token; the candidate process writes the token on
its own stream behind the call's work (``cuStreamWriteValue32``, with a memory barrier). The end
event then runs when the GPU has finished the call. Once the reply is in (or the candidate failed),
the judge writes the token itself from a stream of its own, so a candidate that never writes it, or
writes another value, cannot hold the judge's stream: its window then ends as a host-ended one
would, later, never earlier. A candidate that writes the token *early* gains nothing, for the reason
a host-ended window's early reply gains nothing: contexts of different processes take turns on the
GPU, so the end event and the check behind it run either after the call's remaining work (counted)
or while it is suspended unfinished (and the check sees an unfinished output).
"""

from __future__ import annotations

import secrets

import torch

from optiml.evaluate.arena import Block
from optiml.evaluate.candidate_process import DriverError, StreamMemoryOps


class DeviceEnd:
    """The shared word, the driver's stream memory operations and the judge's releasing stream."""

    def __init__(self, device: torch.device, directory: str) -> None:
        self.ops = StreamMemoryOps()
        self.block = Block(4, device, directory)
        self.block.bytes[:4].zero_()
        self.release_stream = torch.cuda.Stream(device)
        torch.cuda.synchronize(device)
        self._last = 0

    def signal(self, token: int) -> list[int]:
        """The request's ``signal`` field for ``token``: [block, offset, token]."""
        return [self.block.id, 0, token]

    def arm(self, stream: torch.cuda.Stream) -> int:
        """Enqueue on ``stream`` a wait for a fresh token (drawn from OS entropy, never the last one)."""
        token = self._last
        while token in (0, self._last):
            token = secrets.randbits(32)
        code = self.ops.wait(stream.cuda_stream, self.block.base, token)
        if code != 0:
            raise DriverError("cuStreamWaitValue32", code)
        self._last = token
        return token

    def release(self, token: int) -> None:
        """Write ``token`` from the judge's own stream: the armed wait ends even if the candidate never wrote it."""
        code = self.ops.write(self.release_stream.cuda_stream, self.block.base, token)
        if code != 0:
            raise DriverError("cuStreamWriteValue32", code)

    def close(self) -> None:
        torch.cuda.synchronize(self.release_stream.device)
        self.block.close()
