"""No secret leaves through what a candidate shapes (issue 39, class 6), on the CPU.

Canary secrets are planted in the environment (``OPTIML_LLM_API_KEY``, ``ANTHROPIC_API_KEY``) and in a
config file (an ``api_key`` the LLM client is given), and also in a file standing for the
orchestrator's ``/proc/<pid>/environ``. A candidate (a host library run by the real judge and
candidate process) prints that file and the config to its stderr and crashes, so its crash
message carries the canaries — when it can read them: unconfined, as on a host without
namespaces; confined, it cannot even read them. Then the message goes where messages go: through
the Evaluator's redaction, into the run store, and into the next LLM prompt (a real loopback
server records it). The store file, the result as printed and the prompt's bytes are searched for
every canary.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from llm_servers import OpenAIServer, answer
from optiml.evaluate import candidate_link
from optiml.evaluate.config import EvalConfig
from optiml.evaluate.harness import CaseSeeds, Peaks, evaluate_candidate
from optiml.evaluate.judge import Judge
from optiml.evaluate.runtime import TaskRuntime
from optiml.kernel.source import KernelSource
from optiml.llm import LLMClient
from optiml.propose.base import ProposalContext
from optiml.propose.llm import LLMProposer
from optiml.redact import redact_value
from optiml.store import NodeRecord, RunStore
from optiml.task import load_task
from optiml.values import EvalResult, EvalStatus

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

ENV_CANARY = "canary-env-7f3a9c1e5b2d"
VENDOR_CANARY = "canary-vendor-0b8e4d6a2c"
CONFIG_CANARY = "canary-config-91d2e7f4a3"
CANARIES = (ENV_CANARY, VENDOR_CANARY, CONFIG_CANARY)

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return 2.0 * x


def get_inputs():
    return [torch.rand(1000)]


def get_init_inputs():
    return []


OPTIML = {"dtype": "float32"}
"""

LEAK = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
static void dump(const char* path) {
  FILE* f = fopen(path, "rb"); if (!f) { fprintf(stderr, "cannot read %s\n", path); return; }
  int c; while ((c = fgetc(f)) != EOF) fputc(c == 0 ? '\n' : c, stderr); fclose(f);
}
static void encoded(const char* path) {  /* the same file as hex, then as base64: past a literal search */
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  unsigned char buf[4096]; FILE* f = fopen(path, "rb"); if (!f) return;
  size_t n = fread(buf, 1, sizeof buf, f); fclose(f);
  for (size_t k = 0; k < n; ++k) fprintf(stderr, "%02x", buf[k]);
  fputc('\n', stderr);
  for (size_t k = 0; k + 2 < n; k += 3) {
    unsigned v = buf[k] << 16 | buf[k + 1] << 8 | buf[k + 2];
    fprintf(stderr, "%c%c%c%c", b64[v >> 18], b64[v >> 12 & 63], b64[v >> 6 & 63], b64[v & 63]);
  }
  fputc('\n', stderr);
}
int optiml_forward(const void* i, int ni, void* o, int no, void* w, size_t wb, void* s) {
  dump(ENVIRON_FILE); dump(CONFIG_FILE); encoded(ENVIRON_FILE); encoded(CONFIG_FILE);
  fprintf(stderr, "key was %s\n", CONFIG_VALUE); fflush(stderr); abort();
}
"""


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("OPTIML_LLM_API_KEY", ENV_CANARY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", VENDOR_CANARY)
    environ = tmp_path / "environ"
    environ.write_bytes(f"PATH=/usr/bin\0OPTIML_LLM_API_KEY={ENV_CANARY}\0ANTHROPIC_API_KEY={VENDOR_CANARY}\0".encode())
    config = tmp_path / "optiml.toml"
    config.write_text(f'[llm]\nmodel = "m"\napi_key = "{CONFIG_CANARY}"\n')
    task = tmp_path / "double.py"
    task.write_text(TASK)
    source = tmp_path / "leak.c"
    source.write_text(LEAK)
    library = tmp_path / "leak.so"
    defines = [f'-DENVIRON_FILE="{environ}"', f'-DCONFIG_FILE="{config}"', f'-DCONFIG_VALUE="{CONFIG_CANARY}"']
    subprocess.run(["gcc", "-shared", "-fPIC", *defines, "-o", str(library), str(source)], check=True)
    return {"task": task, "library": library, "root": tmp_path}


def _judge_leak(paths: dict[str, Path], confined: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, EvalResult]:
    if not confined:  # as on a host that allows no namespaces
        monkeypatch.setattr(candidate_link._isolation, "given_up", "no namespaces (test)")
        monkeypatch.setattr(candidate_link._isolation, "given_up_at", time.monotonic())  # not yet retried
    judge = Judge(torch.device("cpu"), paths["root"] / f"judge-{confined}")
    (paths["root"] / f"judge-{confined}").mkdir(exist_ok=True)
    try:
        runtime = TaskRuntime(load_task(paths["task"]), "cpu")
        judged = evaluate_candidate(
            judge, runtime, str(paths["library"]), EvalConfig(timeout_s=30), Peaks(), None, CaseSeeds()
        )
    finally:
        judge.close()
    assert judged.result.status is EvalStatus.CRASH, judged.result.message
    return judged.result.message, judged.result


def _readable_forms(canary: str) -> list[str]:
    """The canary as printed, as hex, and the middle of its base64 at each offset a longer text can put it."""
    raw = canary.encode()
    middles = [base64.b64encode(bytes(k) + raw).decode()[4:-4] for k in range(3)]
    return [canary, raw.hex(), *middles]


@pytest.mark.parametrize("confined", [False, True])
def test_canaries_reach_no_message_store_or_prompt(
    planted: dict[str, Path], confined: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OpenAIServer(api_key=CONFIG_CANARY) as server:
        server.script(answer("RATIONALE: nothing.\nCATEGORY: other\n"))
        proposer = LLMProposer(LLMClient(server.config(), sleep=lambda _s: None))  # registers the config key
        message, raw = _judge_leak(planted, confined, monkeypatch)
        assert "[redacted]" in message if not confined else "cannot read" in message  # the attempt was made
        shown = redact_value(raw)  # what the Evaluator hands on (and the CLI prints)
        store_path = planted["root"] / "runs.db"
        with RunStore(store_path) as store:
            kernel = KernelSource("// leak")
            run = store.create_run(
                task_name="double",
                task_path="double.py",
                task_digest="d",
                strategy="greedy",
                config_json="{}",
                root=kernel,
            )
            node = NodeRecord(kernel.digest, None, None, 0, 1.0, 0, None, "")
            raw.message += f" (and unredacted: {ENV_CANARY} {CONFIG_CANARY})"  # as if the judge had missed them
            store.record_evaluation(run.id, node=node, kernel=kernel, result=raw, elapsed_s=1.0, cost_usd=0.0)
        task = load_task(planted["task"])
        proposer.propose(ProposalContext(task=task, kernel=kernel, result=raw), 1)
        prompt = b"".join(request.raw for request in server.requests)
    stored = b"".join(p.read_bytes() for p in planted["root"].glob("runs.db*"))
    for canary in CANARIES:
        for form in _readable_forms(canary):
            assert form not in json.dumps(shown.to_dict()), (canary, form)
            assert form.encode() not in stored, (canary, form)
            assert form.encode() not in prompt, (canary, form)
    assert b"[redacted]" in prompt  # the prompt was sent, with the crash message in it


LEAK_CU = r"""
#include "optiml.h"
#include <cstdio>
#include <cstdlib>
static void dump(const char* path) {
  FILE* f = fopen(path, "rb"); if (!f) { fprintf(stderr, "cannot read %s\n", path); return; }
  int c; while ((c = fgetc(f)) != EOF) fputc(c == 0 ? '\n' : c, stderr); fclose(f);
}
extern "C" int optiml_forward(const optiml_tensor* i, int ni, optiml_tensor* o, int no, void* w, size_t wb,
                              cudaStream_t s) {
  dump(PLANTED); dump("/proc/1/environ"); dump("/proc/self/environ");
  const char* key = getenv("OPTIML_LLM_API_KEY");
  fprintf(stderr, "key: %s\n", key ? key : "(none)"); fflush(stderr); abort();
}
"""


@pytest.mark.gpu
def test_canaries_do_not_leave_a_gpu_evaluation(planted: dict[str, Path]) -> None:
    """The same on a GPU, through the Evaluator and the sandboxed worker: the candidate prints what it can
    reach (a planted environ file, /proc, its environment) into its crash message."""
    from optiml.evaluate.config import EvalConfig as Config
    from optiml.evaluate.evaluator import Evaluator

    task = load_task(Path(__file__).resolve().parent / "tasks" / "axpy.py")
    kernel = KernelSource(LEAK_CU, flags=(f'-DPLANTED="{planted["root"] / "environ"}"',))
    with Evaluator(task, Config(screen=False)) as evaluator:
        result = evaluator.evaluate(kernel)
    assert result.status is EvalStatus.CRASH, result.message
    shown = json.dumps(result.to_dict())
    for canary in CANARIES:
        assert canary not in shown, canary
