"""The worker sandbox, exercised with real child processes through every recipe this host supports."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optiml.errors import ConfigError
from optiml.integrity import sandbox
from optiml.integrity.sandbox import (
    IsolationSupport,
    ResourceLimits,
    WorkerLaunch,
    build_worker_launch,
    probe_isolation,
    scrub_environment,
)

SECRET = "sk-optiml-planted-secret-0123456789"
RECIPES = ("none", "unshare --net", "unshare+jail", "bwrap")
ISOLATED = ("unshare+jail", "bwrap")  # recipes with mount + pid namespaces


def _support(recipe: str) -> IsolationSupport:
    """The probed support narrowed to one recipe (skips when the host lacks it)."""
    base = probe_isolation()
    available = {
        "none": True,
        "unshare --net": base.unshare_net,
        "unshare+jail": base.unshare_jail,
        "bwrap": base.bwrap,
    }
    if not available[recipe]:
        pytest.skip(f"{recipe} is not available here: {base.describe()}")
    return dataclasses.replace(
        base, bwrap=recipe == "bwrap", unshare_jail=recipe == "unshare+jail", unshare_net=recipe == "unshare --net"
    )


def _launch(code: str, workdir: Path, recipe: str, limits: ResourceLimits | None = None, **kwargs: Any) -> WorkerLaunch:
    launch = build_worker_launch(
        [sys.executable, "-c", code],
        workdir=workdir,
        limits=limits or ResourceLimits(),
        support=_support(recipe),
        **kwargs,
    )
    assert launch.report.backend == recipe
    return launch


def _run(launch: WorkerLaunch, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = launch.popen(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(launch.argv, proc.returncode, out, err)


def _json(launch: WorkerLaunch) -> Any:
    done = _run(launch)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NVIDIA_API_KEY", "GITHUB_TOKEN", "CUDA_SECRET"):
        monkeypatch.setenv(name, SECRET)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")


# -- environment -------------------------------------------------------------------------------------
def test_scrub_keeps_allow_list_and_drops_secrets() -> None:
    kept, dropped = scrub_environment(
        {
            "PATH": "/bin",
            "CUDA_VISIBLE_DEVICES": "1",
            "LC_ALL": "C",
            "NVIDIA_API_KEY": "k",
            "OPENAI_API_KEY": "k",
            "AWS_REGION": "x",
            "HOME": "/root",
            "LD_PRELOAD": "evil.so",
            "OPTIML_LLM_API_KEY": "k",
            "CUDA_TOKEN": "t",
        }
    )
    assert kept == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "1", "LC_ALL": "C"}
    assert dropped == (
        "AWS_REGION",
        "CUDA_TOKEN",
        "HOME",
        "LD_PRELOAD",
        "NVIDIA_API_KEY",
        "OPENAI_API_KEY",
        "OPTIML_LLM_API_KEY",
    )


@pytest.mark.usefixtures("planted")
@pytest.mark.parametrize("recipe", RECIPES)
def test_child_sees_no_secret_and_lives_in_its_directory(recipe: str, workdir: Path) -> None:
    code = (
        "import json, os, tempfile;"
        "print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(), 'tmp': tempfile.gettempdir(),"
        " 'home': os.path.expanduser('~')}))"
    )
    seen = _json(_launch(code, workdir, recipe))
    assert SECRET not in json.dumps(seen["env"])
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NVIDIA_API_KEY", "GITHUB_TOKEN"} & set(seen["env"])
    assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "0" and seen["env"]["LC_ALL"] == "C.UTF-8"
    assert seen["cwd"] == seen["tmp"] == seen["home"] == str(workdir.resolve())


def test_extra_env_is_passed_but_secrets_are_refused(workdir: Path) -> None:
    launch = build_worker_launch(
        ["true"], workdir=workdir, limits=ResourceLimits(), extra_env={"PYTHONPATH": "/x"}, support=_support("none")
    )
    assert launch.env["PYTHONPATH"].split(os.pathsep)[0] == "/x"
    with pytest.raises(ConfigError, match=r"OPENAI_API_KEY.*secret"):
        build_worker_launch(["true"], workdir=workdir, limits=ResourceLimits(), extra_env={"OPENAI_API_KEY": "k"})


def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        build_worker_launch(["true"], workdir=tmp_path / "missing", limits=ResourceLimits())
    with pytest.raises(ConfigError, match="empty"):
        build_worker_launch([], workdir=tmp_path, limits=ResourceLimits())


# -- filesystem and processes ------------------------------------------------------------------------
WRITE_BOTH = """
import json, sys
result = {}
for name, path in (("inside", "inside.txt"), ("outside", sys.argv[1])):
    try:
        open(path, "w").write("x")
        result[name] = "ok"
    except OSError as exc:
        result[name] = exc.strerror
print(json.dumps(result))
"""


@pytest.mark.parametrize("recipe", ISOLATED)
def test_cannot_write_outside_its_directory(recipe: str, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    launch = _launch(WRITE_BOTH, workdir, recipe)
    launch = dataclasses.replace(launch, argv=[*launch.argv, str(outside)])
    assert _json(launch) == {"inside": "ok", "outside": "Read-only file system"}
    assert (workdir / "inside.txt").read_text() == "x"
    assert not outside.exists()
    assert "read-only except" in launch.report.filesystem


NESTED_PROC = """
import json, os, subprocess, sys, tempfile
from pathlib import Path
from optiml.integrity.candidate_sandbox import candidate_argv, prepare, python_view
from optiml.integrity.sandbox import SYSTEM_VIEW
result = {}
try:
    open(".optiml-proc/proc/sysrq-trigger", "w").write("h")
    result["hidden_proc"] = "written"
except OSError as exc:
    result["hidden_proc"] = exc.strerror
root = Path(tempfile.mkdtemp(dir="."))
view = [*SYSTEM_VIEW, *python_view(), "?/proc"]
prepare(root / "c", root / "s", view)
check = "import os; print(sorted(p for p in os.listdir('/proc') if p.isdigit()) == ['1', str(os.getpid())])"
argv = candidate_argv([os.path.realpath(sys.executable), "-I", "-S", "-c", check], root / "c", root / "s", view)
done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
result["candidate_own_proc"] = done.stdout.strip() or done.stderr.strip()[-200:]
print(json.dumps(result))
"""


def test_a_candidate_jail_nested_in_the_worker_gets_a_proc_the_worker_cannot_reach(workdir: Path) -> None:
    """The worker's jail keeps a /proc in full view (the kernel's condition for a nested jail's own /proc,
    which CUDA needs) where the worker itself cannot write through it."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    launch = _launch(NESTED_PROC, workdir, "unshare+jail", extra_env={"PYTHONPATH": src})
    assert _json(launch) == {"hidden_proc": "Permission denied", "candidate_own_proc": "True"}


def test_without_filesystem_isolation_the_write_succeeds_and_is_reported(workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    launch = _launch(WRITE_BOTH, workdir, "none")
    launch = dataclasses.replace(launch, argv=[*launch.argv, str(outside)])
    assert _json(launch) == {"inside": "ok", "outside": "ok"}  # the control: this test can fail
    assert launch.report.filesystem.startswith("filesystem isolation unavailable")


@pytest.fixture
def decoy() -> Iterator[int]:
    """A process whose initial environment holds the secret, like the orchestrator's shell."""
    env = {**os.environ, "OPENAI_API_KEY": SECRET}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


SCAN_PROC = f"""
import glob, json
found = []
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    if b"{SECRET}" in data:
        found.append(path)
print(json.dumps(found))
"""


@pytest.mark.parametrize("recipe", ISOLATED)
def test_other_processes_environments_are_invisible(recipe: str, workdir: Path, decoy: int) -> None:
    assert _json(_launch(SCAN_PROC, workdir, recipe)) == []


def test_without_pid_namespace_the_decoy_is_visible(workdir: Path, decoy: int) -> None:
    assert f"/proc/{decoy}/environ" in _json(_launch(SCAN_PROC, workdir, "none"))  # the control


# -- network -----------------------------------------------------------------------------------------
@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


CONNECT = """
import json, socket, sys
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print(json.dumps("connected"))
except OSError as exc:
    print(json.dumps(type(exc).__name__))
"""


@pytest.mark.parametrize("recipe", ("unshare --net", *ISOLATED))
def test_cannot_reach_a_loopback_server_outside(recipe: str, workdir: Path, loopback_server: int) -> None:
    launch = _launch(CONNECT, workdir, recipe)
    launch = dataclasses.replace(launch, argv=[*launch.argv, str(loopback_server)])
    assert _json(launch) != "connected"
    assert launch.report.network.startswith("private network namespace")


def test_without_network_isolation_the_server_is_reachable(workdir: Path, loopback_server: int) -> None:
    launch = _launch(CONNECT, workdir, "none")
    launch = dataclasses.replace(launch, argv=[*launch.argv, str(loopback_server)])
    assert _json(launch) == "connected"  # the control
    assert launch.report.network.startswith("network isolation unavailable")


def test_network_not_requested_is_reported(workdir: Path) -> None:
    launch = build_worker_launch(
        ["true"],
        workdir=workdir,
        limits=ResourceLimits(),
        isolate_network=False,
        isolate_filesystem=False,
        support=_support("unshare --net"),
    )
    assert launch.report.backend == "none" and launch.report.network == "not isolated (not requested)"


# -- resource limits ---------------------------------------------------------------------------------
@pytest.mark.parametrize("recipe", ("none", *ISOLATED))
def test_file_size_limit(recipe: str, workdir: Path) -> None:
    code = (
        "import json;\n"
        "try:\n"
        "    open('big.bin', 'wb').write(b'x' * (3 << 20)); print(json.dumps('written'))\n"
        "except OSError as exc:\n"
        "    print(json.dumps(exc.strerror))"
    )
    limits = ResourceLimits(file_size_bytes=1 << 20)
    assert _json(_launch(code, workdir, recipe, limits)) == "File too large"
    assert (workdir / "big.bin").stat().st_size <= 1 << 20


def test_limits_are_set_in_the_child(workdir: Path) -> None:
    code = (
        "import json, os, resource;"
        "names = ('RLIMIT_CPU', 'RLIMIT_FSIZE', 'RLIMIT_DATA', 'RLIMIT_NPROC', 'RLIMIT_CORE');"
        "seen = {n: resource.getrlimit(getattr(resource, n)) for n in names};"
        "print(json.dumps(seen | {'sid': os.getsid(0) == os.getpid(), 'nice': os.nice(0)}))"
    )
    limits = ResourceLimits(
        cpu_seconds=77, file_size_bytes=5 << 20, memory_bytes=3 << 30, max_processes=100, niceness=7
    )
    seen = _json(_launch(code, workdir, "none", limits))
    assert seen["nice"] == min(19, os.nice(0) + 7)  # background work yields to the clock
    assert seen["RLIMIT_CPU"] == [77, 87]  # SIGXCPU at 77 s, SIGKILL 10 s later
    assert seen["RLIMIT_FSIZE"] == [5 << 20, 5 << 20]
    assert seen["RLIMIT_DATA"] == [3 << 30, 3 << 30]
    assert seen["RLIMIT_CORE"] == [0, 0]
    # headroom over the user's count of tasks (not counted for root, whom the kernel exempts)
    assert 100 + (os.geteuid() != 0) <= seen["RLIMIT_NPROC"][0] < 100 + 100_000
    assert seen["sid"] is True  # its own session: the client can kill the whole group


def test_memory_limit_stops_a_large_allocation(workdir: Path) -> None:
    code = (
        "import json;\n"
        "try:\n"
        "    block = bytearray(1 << 30); print(json.dumps('allocated'))\n"
        "except MemoryError:\n"
        "    print(json.dumps('MemoryError'))"
    )
    assert _json(_launch(code, workdir, "none", ResourceLimits(memory_bytes=256 << 20))) == "MemoryError"


def test_cpu_limit_kills_a_spinning_child(workdir: Path) -> None:
    launch = _launch("while True: pass", workdir, "none", ResourceLimits(cpu_seconds=1))
    start = time.monotonic()
    done = _run(launch, timeout=30)
    assert done.returncode == -signal.SIGXCPU
    assert launch.describe_exit(done.returncode) == "killed by SIGXCPU"
    assert time.monotonic() - start < 20


@pytest.mark.skipif(os.geteuid() == 0, reason="the kernel never applies RLIMIT_NPROC to root")
def test_process_limit_stops_a_fork_bomb(workdir: Path) -> None:
    code = (
        "import json, os;\n"
        "children = 0\n"
        "try:\n"
        "    for _ in range(500):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            import time; time.sleep(5); os._exit(0)\n"
        "        children += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print(json.dumps(children))"
    )
    assert _json(_launch(code, workdir, "none", ResourceLimits(max_processes=20))) <= 20


# -- exits, reports, probing ---------------------------------------------------------------------------
def _processes_with(token: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("recipe", ISOLATED)
@pytest.mark.parametrize("group", [True, False], ids=["killpg", "kill"])
def test_killing_the_launched_process_ends_everything_inside(recipe: str, group: bool, workdir: Path) -> None:
    token = f"optiml-kill-test-{recipe.replace(' ', '')}-{group}"
    code = (
        "import subprocess, sys, time;"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{token}']);"
        "print('ready', flush=True); time.sleep(300)"
    )
    proc = _launch(code, workdir, recipe).popen(stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(token), "the grandchild never started"
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _processes_with(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(token) == []
    finally:
        for pid in _processes_with(token):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_signal_death_is_described(recipe: str, workdir: Path) -> None:
    launch = _launch("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", workdir, recipe)
    done = _run(launch)
    assert done.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV)
    assert launch.describe_exit(done.returncode) == "killed by SIGSEGV"


@pytest.mark.parametrize("recipe", RECIPES)
def test_exit_codes_pass_through(recipe: str, workdir: Path) -> None:
    launch = _launch("raise SystemExit(3)", workdir, recipe)
    done = _run(launch)
    assert done.returncode == 3 and launch.describe_exit(3) == "exited with code 3"


def test_report_is_one_line_and_lists_dropped_names_only(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    launch = build_worker_launch(["true"], workdir=workdir, limits=ResourceLimits(), support=_support("none"))
    summary = str(launch.report)
    assert "\n" not in summary and summary.startswith("worker isolation (none):")
    assert "OPENAI_API_KEY" in launch.report.dropped_env and SECRET not in json.dumps(launch.report.to_dict())


def test_bwrap_binds_gpu_device_nodes(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = ["/dev/nvidia0", "/dev/nvidia-uvm", "/dev/nvidiactl"]
    monkeypatch.setattr(sandbox.glob, "glob", lambda pattern: nodes if pattern == "/dev/nvidia*" else [])
    support = dataclasses.replace(probe_isolation(), bwrap=True, unshare_jail=False)
    argv = build_worker_launch(["w"], workdir=workdir, limits=ResourceLimits(), support=support).argv
    for node in nodes:
        index = argv.index(node)
        assert argv[index - 1] == "--dev-bind" and argv[index + 1] == node
    assert argv[-2:] == ["--", "w"]


def test_probe_is_cached_and_describable() -> None:
    support = probe_isolation()
    assert probe_isolation() is support
    text = support.describe()
    assert text.startswith("namespaces:") and "\n" not in text
