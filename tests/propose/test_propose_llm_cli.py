"""``optiml propose --proposer llm`` against loopback servers: Ctrl-C, dead servers, exit status, budgets
that cannot bind, and answers served from the cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from propose_helpers import TASKS
from typer.testing import CliRunner, Result

from llm_servers import OpenAIServer, RecordedRequest, Reply, answer, slow
from optiml.cli import app

TASK = TASKS / "silu.py"
KERNEL = TASKS / "silu.naive.cu"
EDIT = """RATIONALE: more threads per block for more loads in flight.
CATEGORY: launch configuration
EDIT:
<<<<<<< SEARCH
#define BLOCK_SIZE 256  // threads per block
=======
#define BLOCK_SIZE 512  // threads per block
>>>>>>> REPLACE
"""


def good(request: RecordedRequest) -> Reply:
    return answer(*[EDIT] * request.n)


def prose(request: RecordedRequest) -> Reply:
    return answer(*["Use shared memory, it is faster."] * request.n)


@pytest.fixture(autouse=True)
def no_llm_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No optiml.toml and no OPTIML_LLM_* variable from the machine running the tests."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("OPTIML_LLM_")]:
        monkeypatch.delenv(name)
    yield


def propose(base_url: str, tmp_path: Path, *args: str, temperature: str = "0.7") -> Result:
    env = {"OPTIML_LLM_BASE_URL": base_url, "OPTIML_LLM_MODEL": "test-model", "OPTIML_LLM_TEMPERATURE": temperature}
    env["COLUMNS"] = "200"  # one line per proposal
    argv = ["propose", str(TASK), str(KERNEL), "--proposer", "llm", "-n", "2", "--store", str(tmp_path / "runs.db")]
    return CliRunner().invoke(app, [*argv, "-o", str(tmp_path / "out"), *args], env=env, terminal_width=200)


def test_usable_proposals_exit_0_and_report_the_llm_calls(tmp_path: Path) -> None:
    with OpenAIServer(responder=good) as server:
        result = propose(server.base_url, tmp_path)
    assert result.exit_code == 0, result.output
    assert "1 of 2 proposals usable" in result.output and "[launch configuration]" not in result.output
    assert "1. ok [launch_config] more threads" in result.output  # the category is shown, not eaten as markup
    assert "LLM: 1 answer, 1 API call, 100 tokens in, 40 out, $0 (no price known for test-model)" in result.output


def test_no_usable_proposal_is_a_failure_exit(tmp_path: Path) -> None:
    with OpenAIServer(responder=prose) as server:
        result = propose(server.base_url, tmp_path)
        assert server.request_count == 2  # one request of two samples, one retry
    assert result.exit_code == 1, result.output
    assert "0 of 2 proposals usable" in result.output and "no usable proposal" in result.output


def test_answers_from_the_cache_are_marked(tmp_path: Path) -> None:
    with OpenAIServer(responder=good) as server:
        first = propose(server.base_url, tmp_path, temperature="0")
        second = propose(server.base_url, tmp_path, temperature="0")
        assert server.request_count == 1
    assert "cached answer" not in first.output
    assert "1. ok (cached answer) [launch_config]" in second.output
    assert "1 answer (1 from the cache, free), 0 API calls" in second.output


def test_a_dollar_budget_for_an_unpriced_model_is_refused_unless_allowed(tmp_path: Path) -> None:
    with OpenAIServer(responder=good) as server:
        refused = propose(server.base_url, tmp_path, "--budget-usd", "1")
        assert server.request_count == 0
        allowed = propose(server.base_url, tmp_path, "--budget-usd", "1", "--allow-unpriced")
        by_calls = propose(server.base_url, tmp_path, "--max-llm-calls", "5", "--max-llm-tokens", "10000")
    assert refused.exit_code == 2
    [line] = [x for x in refused.output.splitlines() if x.strip()]
    assert "cannot be enforced: no price is known for openai model 'test-model'" in line
    assert "--allow-unpriced" in line
    assert allowed.exit_code == 0, allowed.output
    assert by_calls.exit_code == 0, by_calls.output


def test_a_server_that_is_down_is_one_line_and_exit_2(tmp_path: Path) -> None:
    server = OpenAIServer().start()
    base_url = server.base_url
    server.stop()  # nothing listens on its port any more
    result = propose(base_url, tmp_path)
    assert result.exit_code == 2, result.output
    errors = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "connection refused: is the server running" in errors[0]


def test_ctrl_c_stops_propose_within_seconds_against_a_server_that_never_answers(tmp_path: Path) -> None:
    with OpenAIServer(responder=lambda _r: slow(3600.0)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPTIML_LLM_")}
        env.update(OPTIML_LLM_BASE_URL=server.base_url, OPTIML_LLM_MODEL="test-model", PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "optiml.cli", "propose", str(TASK), str(KERNEL), "--proposer", "llm"]
        argv += ["-n", "4", "--store", str(tmp_path / "runs.db"), "-o", str(tmp_path / "out")]
        proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while server.request_count == 0:  # start-up: imports, compiling the kernel for its evidence
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the request never reached the server"
                time.sleep(0.05)
            time.sleep(0.3)  # well inside the wait for the answer
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            elapsed = time.monotonic() - start
        finally:
            if proc.poll() is None:
                proc.kill()
    assert elapsed < 3.0, f"took {elapsed:.1f} s to stop; stderr: {err}"
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, out, err)
    assert "Traceback" not in err
