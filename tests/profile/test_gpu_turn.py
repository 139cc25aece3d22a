"""The profiler's turn on the GPU: a real child process that says "ready" and waits for its gate,
run through process.run with a GpuTurn holding a real lock."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from profile_data import plain_launch

from optiml.integrity import process
from optiml.profile.ncu import GpuTurn

# The child: optional noise on stderr, then (unless told to quit) a ready event, the wait for the gate,
# and the time its "GPU work" began, written to started.txt.
CHILD = """
import json, os, sys, time
mode, report, gate = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "noisy":
    sys.stderr.write("x" * 400_000)
    sys.stderr.flush()
if mode == "quit":
    sys.exit(3)
with open(report, "a") as events:
    events.write(json.dumps({"event": "ready"}) + "\\n")
while not os.path.exists(gate):
    time.sleep(0.002)
with open("started.txt", "w") as out:
    out.write(repr(time.time()))
print("done")
"""


def run_child(tmp_path: Path, mode: str, turn: GpuTurn, timeout_s: float = 20.0) -> process.Outcome:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    argv = [sys.executable, str(script), mode, str(turn.report), str(turn.gate)]
    return process.run(argv, plain_launch, tmp_path, timeout_s, hold=turn)


def release_later(lock: threading.Lock, seconds: float) -> tuple[threading.Thread, list[float]]:
    released: list[float] = []

    def hold() -> None:
        time.sleep(seconds)
        released.append(time.time())
        lock.release()

    thread = threading.Thread(target=hold)
    thread.start()
    return thread, released


def test_a_ready_target_waits_for_the_lock_and_the_wait_does_not_count_against_its_timeout(tmp_path: Path) -> None:
    lock = threading.Lock()
    lock.acquire()  # an evaluation is timing
    turn = GpuTurn(lock, tmp_path / "events.jsonl", tmp_path / "gate")
    thread, released = release_later(lock, 1.5)
    outcome = run_child(tmp_path, "plain", turn, timeout_s=1.0)
    thread.join()
    assert outcome.returncode == 0 and not outcome.timed_out, outcome.stderr
    assert outcome.stdout.strip() == "done"
    started = float((tmp_path / "started.txt").read_text())
    assert started >= released[0]  # its GPU work began after the lock was free
    assert turn.waited_s > 0.5 and turn.held_s > 0
    assert not lock.locked()  # released once the process ended


def test_a_target_that_ends_before_it_is_ready_never_takes_the_lock(tmp_path: Path) -> None:
    lock = threading.Lock()
    lock.acquire()  # held throughout: taking it would hang the run
    turn = GpuTurn(lock, tmp_path / "events.jsonl", tmp_path / "gate")
    start = time.perf_counter()
    outcome = run_child(tmp_path, "quit", turn)
    assert outcome.returncode == 3 and time.perf_counter() - start < 10
    assert turn.held_s == 0.0 and not (tmp_path / "gate").exists()
    lock.release()


def test_a_target_that_writes_much_before_it_is_ready_does_not_block(tmp_path: Path) -> None:
    turn = GpuTurn(threading.Lock(), tmp_path / "events.jsonl", tmp_path / "gate")
    outcome = run_child(tmp_path, "noisy", turn)
    assert outcome.returncode == 0 and len(outcome.stderr) == 400_000
    assert (tmp_path / "started.txt").exists()


def test_without_a_gate_the_lock_is_held_for_the_whole_run(tmp_path: Path) -> None:
    lock = threading.Lock()
    turn = GpuTurn(lock)
    seen: list[bool] = []
    script = tmp_path / "sleep.py"
    script.write_text("import time; time.sleep(0.5)\n", encoding="utf-8")
    watcher = threading.Thread(target=lambda: (time.sleep(0.25), seen.append(lock.locked())))
    watcher.start()
    outcome = process.run([sys.executable, str(script)], plain_launch, tmp_path, 20.0, hold=turn)
    watcher.join()
    assert outcome.returncode == 0 and seen == [True] and not lock.locked()
    assert turn.held_s >= 0.4
