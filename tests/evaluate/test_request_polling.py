"""The candidate process waits for its next request by polling first, then by blocking (``POLL_S``)."""

from __future__ import annotations

import os
import threading
import time

from optiml.evaluate.candidate_process import polled_lines


def _write_later(fd: int, pieces: list[tuple[float, bytes]]) -> threading.Thread:
    def write() -> None:
        for delay, data in pieces:
            time.sleep(delay)
            os.write(fd, data)
        os.close(fd)

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_lines_come_whether_they_arrive_while_it_polls_or_after_it_blocked() -> None:
    read_fd, write_fd = os.pipe()
    # the first line within the poll, the second split across writes long after it (the reader has blocked)
    writer = _write_later(write_fd, [(0.01, b"first\n"), (0.3, b"sec"), (0.05, b"ond\nthird\n")])
    try:
        lines = polled_lines(read_fd, poll_s=0.1)
        assert next(lines) == b"first"
        began = time.perf_counter()
        assert next(lines) == b"second"
        assert time.perf_counter() - began > 0.2  # it waited (blocked) for the late line, it did not end
        assert list(lines) == [b"third"]  # the writer closed: the lines end
    finally:
        writer.join()
        os.close(read_fd)


def test_a_process_that_polls_yields_the_cpu_and_costs_no_more_than_the_poll() -> None:
    """Polling for 0.2 s with nothing to read uses at most about that much CPU time, then it blocks."""
    read_fd, write_fd = os.pipe()
    writer = _write_later(write_fd, [(0.6, b"late\n")])
    try:
        cpu = time.process_time()
        assert next(polled_lines(read_fd, poll_s=0.2)) == b"late"
        assert time.process_time() - cpu < 0.45  # 0.6 s of waiting, of which only the poll can spin
    finally:
        writer.join()
        os.close(read_fd)
