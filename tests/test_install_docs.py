"""The README's install advice and CI's torch line say what each machine gets (issue 16, item 1)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _install_section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Install, test, run")
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_readme_has_one_install_command_for_every_machine() -> None:
    section = _install_section()
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None
    installs = [line for line in block.group(1).splitlines() if line.startswith("pip install")]
    assert installs and len(installs) == 1 and installs[0].split("#")[0].strip() == 'pip install -e ".[dev]"'
    prose = " ".join(section[block.end() :].split())
    # what a GPU user gets and what a CPU-only machine gets, plainly
    assert "with an NVIDIA GPU" in prose and "CUDA build" in prose
    assert "without a GPU" in prose and "--compile-only" in prose
    # the CPU index is an option where it is reachable, never a step the install depends on
    assert "download.pytorch.org" in prose and "is reachable" in prose
    assert "install the CPU build of PyTorch first" not in prose


def test_ci_says_what_its_cpu_torch_relies_on() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = script.splitlines()
    pin = next(i for i, line in enumerate(lines) if line.startswith("python -m pip install") and "torch==" in line)
    comment = " ".join(line.lstrip("# ") for line in lines[max(0, pin - 8) : pin] if line.startswith("#"))
    assert "CPU-only torch first" not in script  # the old claim, true only where a local CPU wheel exists
    assert "torch-2.13.0+cpu" in comment and "find-links" in comment and "CUDA build" in comment
    assert "torch.version.cuda" in lines[pin + 1]  # and CI prints which build it got
