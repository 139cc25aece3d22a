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


def _readme_commands() -> tuple[str, str]:
    """The README's install command and test command, without their comments."""
    block = re.search(r"```bash\n(.*?)```", _install_section(), re.DOTALL)
    assert block is not None
    lines = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return next(line for line in lines if line.startswith("pip install")), next(c for c in lines if "pytest" in c)


def test_ci_runs_exactly_the_readmes_install_and_test_commands() -> None:
    """Issue 40: CI installs as a user does, with whatever torch that brings (no pin, no local wheel first)."""
    install, test = _readme_commands()
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.split("#")[0].strip() for line in script.splitlines()]
    assert install in commands and test in commands
    assert not any("pip install" in c and c != install and "--upgrade pip" not in c for c in commands)
    assert "torch==" not in script
    installed = commands.index(install)
    assert "torch.version.cuda" in commands[installed + 1]  # CI prints which torch build it got
