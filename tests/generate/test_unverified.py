"""optiml.generate.unverified: the no-GPU refusal offers --no-verify only where the command has it."""

from __future__ import annotations

import pytest

from optiml.errors import NoGPUError
from optiml.generate.unverified import require_gpu


def test_adapt_is_not_told_to_pass_a_flag_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NoGPUError, match="pass --no-verify"):
        require_gpu()  # generate has --no-verify
    with pytest.raises(NoGPUError) as caught:
        require_gpu(no_verify_flag=False)  # adapt has not
    assert "--no-verify" not in str(caught.value) and "no LLM call was made" in str(caught.value)


def test_adapt_without_a_gpu_is_one_line_without_no_verify(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from typer.testing import CliRunner

    from optiml.cli import app

    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("OPTIML_LLM_MODEL", "test-model")
    monkeypatch.setenv("OPTIML_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # never called: the GPU check comes first
    root = Path(__file__).resolve().parents[2]
    code = tmp_path / "legacy.cu"
    code.write_text("__global__ void k(float* x) { x[0] = 1; }\n", encoding="utf-8")
    args = ["adapt", str(code), "--task", str(root / "tasks" / "silu.py"), "--store", str(tmp_path / "runs.db")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA GPU is visible"), result.output
    assert "--no-verify" not in result.output
