"""A candidate process cannot see or reach the judge, other processes or files outside its directory.

Real candidate processes (the judge's own ``CandidateProcess``) load host libraries built by gcc
that probe from inside: each probe that succeeds sets a bit of what ``optiml_workspace_bytes``
returns. Every probe is run beside a control process without the sandbox, where it succeeds, so
the test can fail. Issue 39, classes 3, 5 and 6.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from optiml.evaluate.candidate_link import CandidateProcess
from optiml.integrity.candidate_sandbox import (
    candidate_argv,
    candidate_view,
    prepare,
    probe_candidate_isolation,
    python_view,
)
from optiml.integrity.sandbox import SYSTEM_VIEW

pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc"),
    pytest.mark.skipif(not probe_candidate_isolation().isolated, reason=probe_candidate_isolation().note),
]

PROBES = r"""
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <unistd.h>
static int readable(const char* path) { int fd = open(path, O_RDONLY); if (fd < 0) return 0; close(fd); return 1; }
/* a pid number that names this very process in its own namespace is not the judge's */
static int signals(pid_t pid) { return pid != getpid() && kill(pid, 0) == 0; }
size_t optiml_workspace_bytes(const void* in, int n) {
  size_t bits = 0;
  if (readable(TMP_FILE)) bits |= 1;           /* a user's /tmp */
  if (readable(JUDGE_FILE)) bits |= 2;         /* the judge's folder */
  if (readable(CACHE_FILE)) bits |= 4;         /* another kernel's source in a compile cache */
  if (signals(JUDGE_PID)) bits |= 8;           /* signal the judge */
  if (access(JUDGE_PROC, F_OK) == 0) bits |= 16;  /* see the judge in /proc */
  if (signals(OTHER_PID)) bits |= 32;          /* signal another process (a calibration process, say) */
  return bits;
}
int optiml_forward(const void* i, int ni, void* o, int no, void* w, size_t wb, void* s) { return 0; }
"""

EMPTY_SPEC = {"structs": base64.b64encode(b"").decode(), "size": 152, "data": []}


def _build(tmp: Path, source: str, defines: dict[str, str]) -> str:
    path = tmp / "probe.c"
    path.write_text(source)
    library = tmp / "probe.so"
    flags = [f"-D{name}={value}" for name, value in defines.items()]
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *flags, "-o", str(library), str(path)], check=True)
    return str(library)


def _probe(workdir: Path, library: str, isolate: bool | None) -> int:
    process = CandidateProcess(None, 0, workdir, f"probe-{isolate}", isolate=isolate)
    try:
        deadline = time.monotonic() + 60
        process.request({"op": "load", "so": library}, deadline)
        return int(process.request({"op": "workspace", "inputs": EMPTY_SPEC}, deadline)["bytes"])
    finally:
        process.close()


def test_a_candidate_sees_no_other_process_and_no_file_outside_its_directory(tmp_path: Path) -> None:
    workdir = tmp_path / "judge"
    workdir.mkdir()
    (workdir / "secret.txt").write_text("judge")
    (tmp_path / "user-tmp.txt").write_text("tmp")
    cache = tmp_path / "cache" / "kernels" / "other"
    cache.mkdir(parents=True)
    (cache / "kernel.cu").write_text("// another kernel")
    other = subprocess.Popen(["sleep", "60"])
    try:
        library = _build(
            tmp_path,
            PROBES,
            {
                "TMP_FILE": f'"{tmp_path / "user-tmp.txt"}"',
                "JUDGE_FILE": f'"{workdir / "secret.txt"}"',
                "CACHE_FILE": f'"{cache / "kernel.cu"}"',
                "JUDGE_PID": str(os.getpid()),
                "JUDGE_PROC": f'"/proc/{os.getpid()}"',
                "OTHER_PID": str(other.pid),
            },
        )
        assert _probe(workdir, library, isolate=False) == 63  # the control: every probe succeeds
        assert _probe(workdir, library, isolate=None) == 0
    finally:
        other.kill()
        other.wait()


def test_each_candidate_has_a_directory_of_its_own_and_it_is_removed(tmp_path: Path) -> None:
    first = CandidateProcess(None, 0, tmp_path, "first")
    second = CandidateProcess(None, 0, tmp_path, "second")
    try:
        first.wait_ready()
        second.wait_ready()
        assert first.sandboxed and second.sandboxed
        assert first.directory != second.directory and first.directory.parent == second.directory.parent
        assert not first.stderr_path.is_relative_to(first.directory)  # its stderr is out of its reach
        assert first.pid != first.proc.pid and first.thread_count() >= 1  # the shim, below unshare and the jail
    finally:
        first.close()
        second.close()
    assert not first.directory.exists() and not second.directory.exists()


REPLACE_STDERR = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int optiml_forward(const void* i, int ni, void* o, int no, void* w, size_t wb, void* s) { return 0; }
__attribute__((constructor)) static void swap(void) {
  unlink(STDERR_PATH);
  symlink(SECRET_PATH, STDERR_PATH);  /* the judge would read the secret as "the tail of its stderr" */
  abort();
}
"""


@pytest.mark.parametrize("isolate", [False, None])
def test_a_stderr_file_swapped_for_a_link_is_not_followed(tmp_path: Path, isolate: bool | None) -> None:
    """Unconfined, the candidate can replace its stderr file by a link to a secret; the judge then
    refuses to read it. Confined, it cannot reach the file at all."""
    workdir = tmp_path / "judge"
    workdir.mkdir()
    secret = tmp_path / "environ"
    secret.write_text("OPTIML_LLM_API_KEY=canary-stderr-0123456789\n")
    name = f"swap-{isolate}"
    library = _build(
        tmp_path, REPLACE_STDERR, {"STDERR_PATH": f'"{workdir / (name + ".stderr")}"', "SECRET_PATH": f'"{secret}"'}
    )
    process = CandidateProcess(None, 0, workdir, name, isolate=isolate)
    try:
        process.send({"op": "load", "so": library})
        with pytest.raises(Exception) as failure:
            process.receive(time.monotonic() + 60)
        message = str(failure.value)
        assert "SIGABRT" in message and "canary-stderr" not in message
        if isolate is False:
            assert "replaced by a link" in message
    finally:
        process.close()


def test_the_view_holds_optional_paths_where_they_can_be_mounted(tmp_path: Path) -> None:
    """``?/sys`` (what a GPU may read) is shown where the bind works; a path not listed is absent."""
    directory, stage = tmp_path / "candidate", tmp_path / "stage"
    view = [*SYSTEM_VIEW, *python_view(), "?/sys"]
    prepare(directory, stage, view)
    check = "import os,sys; print(os.path.isdir('/sys/class'), os.path.exists(sys.argv[1]), os.path.exists('/proc/1'))"
    done = subprocess.run(
        candidate_argv(
            [os.path.realpath(sys.executable), "-I", "-S", "-c", check, str(tmp_path / "stage")], directory, stage, view
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]


def test_a_view_of_proc_is_the_candidates_own(tmp_path: Path) -> None:
    """``?/proc`` (what CUDA's driver needs) is a procfs of the candidate's pid namespace: it lists only the
    candidate and its jail, not the judge, and the candidate may name its own thread there (as the driver does)."""
    directory, stage = tmp_path / "candidate", tmp_path / "stage"
    view = [*SYSTEM_VIEW, *python_view(), "?/proc"]
    prepare(directory, stage, view)
    check = (
        "import os,sys; pids=sorted(p for p in os.listdir('/proc') if p.isdigit()); "
        "open(f'/proc/self/task/{os.getpid()}/comm', 'w').write('named'); "
        "print(pids == sorted({'1', str(os.getpid())}), os.path.exists('/proc/' + sys.argv[1]), "
        "open('/proc/self/comm').read().strip())"
    )
    done = subprocess.run(
        candidate_argv(
            [os.path.realpath(sys.executable), "-I", "-S", "-c", check, str(os.getpid())], directory, stage, view
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "named"]


def test_a_sandbox_that_breaks_the_start_is_given_up_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injected: a view without the interpreter. The process is started again unconfined, and
    from then on every candidate runs so — which the task notes say."""
    from optiml.evaluate import candidate_link

    monkeypatch.setattr(candidate_link._isolation, "given_up", None)
    monkeypatch.setattr(candidate_link._isolation, "proven", False)
    monkeypatch.setattr(candidate_link, "_view", lambda cudart: (*SYSTEM_VIEW[:2], str(candidate_link.SHIM)))
    process = CandidateProcess(None, 0, tmp_path, "broken")
    try:
        process.wait_ready()
        assert not process.sandboxed
    finally:
        process.close()
    assert "candidate isolation unavailable: a candidate process could not start" in candidate_link.isolation_note()
    assert not candidate_link.candidates_confined()


def _views_that_break(monkeypatch: pytest.MonkeyPatch, starts: int) -> list[tuple[str, ...]]:
    """Fault injected: the first ``starts`` sandboxed starts get a view without the interpreter, later ones a
    whole view; returns the broken views not yet used."""
    from optiml.evaluate import candidate_link

    views = [(*SYSTEM_VIEW[:2], str(candidate_link.SHIM))] * starts

    def view(cudart: str | None) -> tuple[str, ...]:
        return views.pop() if views else candidate_view(str(candidate_link.SHIM), cudart)

    monkeypatch.setattr(candidate_link, "_view", view)
    return views


def test_a_sandbox_that_fails_one_start_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injected: the first start's view lacks the interpreter, later ones are whole (a start that
    failed once under load). The process starts again in the sandbox, which is not given up."""
    from optiml.evaluate import candidate_link

    monkeypatch.setattr(candidate_link._isolation, "given_up", None)
    monkeypatch.setattr(candidate_link._isolation, "proven", False)
    views = _views_that_break(monkeypatch, starts=1)
    process = CandidateProcess(None, 0, tmp_path, "flaky")
    try:
        process.wait_ready()
        assert process.sandboxed and not views
    finally:
        process.close()
    assert candidate_link.candidates_confined()


def test_a_sandbox_that_fails_until_a_start_outside_it_works_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injected: every try in the sandbox fails, then the one outside works, and the machine's fault has
    passed: the sandbox, tried once more at once, works — it is kept and the process runs confined."""
    from optiml.evaluate import candidate_link

    monkeypatch.setattr(candidate_link._isolation, "given_up", None)
    monkeypatch.setattr(candidate_link._isolation, "proven", False)
    monkeypatch.setattr(candidate_link, "SANDBOX_RETRY_DELAYS_S", (0.0, 0.0))
    views = _views_that_break(monkeypatch, starts=3)
    process = CandidateProcess(None, 0, tmp_path, "passing")
    try:
        process.wait_ready()
        assert process.sandboxed and not views
        process.request({"op": "call", "id": -1}, time.monotonic() + 20)  # the confined process answers
    finally:
        process.close()
    assert candidate_link.candidates_confined() and candidate_link._isolation.given_up is None


def test_required_isolation_fails_the_start_instead_of_running_unconfined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OPTIML_ISOLATION=required``: the same broken view as above ends the start with one line, and the
    sandbox is not given up for the candidates after it."""
    from optiml.evaluate import candidate_link
    from optiml.evaluate.candidate_link import CandidateFailure

    monkeypatch.setattr(candidate_link._isolation, "given_up", None)
    monkeypatch.setattr(candidate_link._isolation, "proven", False)
    monkeypatch.setattr(candidate_link._isolation, "required", True)
    monkeypatch.setattr(candidate_link, "SANDBOX_RETRY_DELAYS_S", (0.0,))
    monkeypatch.setattr(candidate_link, "_view", lambda cudart: (*SYSTEM_VIEW[:2], str(candidate_link.SHIM)))
    process = CandidateProcess(None, 0, tmp_path, "required")
    try:
        with pytest.raises(CandidateFailure, match=r"could not start in its sandbox .*OPTIML_ISOLATION=required"):
            process.wait_ready()
    finally:
        process.close()
    assert candidate_link._isolation.given_up is None and candidate_link.candidates_confined()


def test_required_isolation_refuses_where_the_host_has_no_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from optiml.evaluate import candidate_link
    from optiml.evaluate.candidate_link import CandidateFailure
    from optiml.integrity.candidate_sandbox import CandidateIsolation

    monkeypatch.setattr(candidate_link._isolation, "given_up", None)
    monkeypatch.setattr(candidate_link._isolation, "required", True)
    none_here = CandidateIsolation(False, "candidate isolation unavailable: unshare (util-linux) not installed")
    monkeypatch.setattr(candidate_link.candidate_sandbox, "probe_candidate_isolation", lambda: none_here)
    with pytest.raises(CandidateFailure, match="not installed, and OPTIML_ISOLATION=required forbids"):
        CandidateProcess(None, 0, tmp_path, "nowhere")
    control = CandidateProcess(None, 0, tmp_path, "control", isolate=False)  # the tests' own control still runs
    control.close()


def test_a_sandbox_given_up_is_tried_again_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Given up (a start failed in it, as under load) long enough ago, the next process starts confined
    again, and the sandbox stands from then on."""
    from optiml.evaluate import candidate_link

    monkeypatch.setattr(candidate_link._isolation, "proven", False)
    monkeypatch.setattr(candidate_link._isolation, "given_up", "a start failed (test)")
    monkeypatch.setattr(candidate_link._isolation, "given_up_at", time.monotonic())
    assert not candidate_link.candidates_confined()
    monkeypatch.setattr(
        candidate_link._isolation, "given_up_at", time.monotonic() - candidate_link.SANDBOX_RETRY_AFTER_S
    )
    process = CandidateProcess(None, 0, tmp_path, "again")
    try:
        process.wait_ready()
        assert process.sandboxed
    finally:
        process.close()
    assert candidate_link.candidates_confined() and candidate_link._isolation.given_up is None


def test_a_start_that_fails_unconfined_too_keeps_the_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from optiml.evaluate import candidate_link
    from optiml.evaluate.candidate_link import CandidateFailure

    monkeypatch.setattr(candidate_link._isolation, "given_up", None)
    monkeypatch.setattr(candidate_link._isolation, "proven", False)
    process = CandidateProcess(str(tmp_path / "no-libcudart.so"), 0, tmp_path, "no-cuda")
    try:
        with pytest.raises(CandidateFailure, match="could not start CUDA"):
            process.wait_ready()
    finally:
        process.close()
    assert candidate_link.candidates_confined()  # not the sandbox's fault


def test_the_shims_pid_is_found_from_parents_too() -> None:
    """Where the kernel has no /proc/PID/task/TID/children, the judge finds the shim by every process's
    parent instead (it counts the shim's threads, not those of unshare above it)."""
    from optiml.evaluate import candidate_link

    child = subprocess.Popen(["sleep", "30"])
    try:
        by_parents = [pid for pid, parent in candidate_link._parents().items() if parent == os.getpid()]
        assert child.pid in by_parents and child.pid in candidate_link._children(os.getpid())
    finally:
        child.kill()
        child.wait()
