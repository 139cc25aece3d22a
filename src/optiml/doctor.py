"""``optiml doctor``: what this machine offers OptiML, checked rather than assumed.

Data only; :mod:`optiml.cli.views.doctor` renders the checks."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from optiml.errors import ToolchainError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def _run(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"failed: {exc}"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[-1] if text else f"exit {out.returncode}"


def tool_check(tool: str, purpose: str, nvcc: str | None) -> Check:
    """Where ``tool`` is, found the way the profiler finds it (PATH, beside nvcc, $CUDA_HOME, the
    ``nvidia-cuda-*`` wheels the ``[dev]`` extra installs)."""
    from optiml.cuda_tools import find_cuda_tool

    path = find_cuda_tool(tool, nvcc)
    return Check(tool, path is not None, path or f"not found: {purpose} falls back to static evidence")


def build_schedule_check(nvcc: str, arch: str) -> Check:
    """How this nvcc's steps are scheduled (:mod:`optiml.kernel.nvcc_steps`), read from its ``-dryrun``
    listing of a candidate build; a listing of another shape builds serially."""
    import tempfile

    from optiml.kernel.compiler import nvcc_command
    from optiml.kernel.nvcc_steps import dryrun, parse_dryrun

    argv = dryrun(nvcc_command(nvcc, arch))
    with tempfile.TemporaryDirectory(prefix="optiml-doctor-") as folder:
        try:
            listing = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=folder)
        except (OSError, subprocess.SubprocessError) as exc:
            return Check("nvcc build", False, f"nvcc -dryrun failed: {exc}")
    steps = parse_dryrun(listing.stdout + listing.stderr)
    if steps is None:
        return Check("nvcc build", False, "serial: this nvcc's step listing has another shape (builds ~1.5x slower)")
    if steps.split is None:
        return Check("nvcc build", True, "host and device chains at once (cudafe++ beside cicc), nvcc's own tail")
    return Check("nvcc build", True, "host and device chains at once, the host compile beside ptxas, no device link")


def collect() -> list[Check]:
    from optiml.kernel.compiler import DEFAULT_ARCH, detect_arch, find_nvcc, nvcc_version

    checks = []
    nvcc: str | None = None
    try:
        nvcc = find_nvcc()
        checks.append(Check("nvcc", True, f"{nvcc} ({nvcc_version(nvcc)})"))
    except ToolchainError as exc:
        checks.append(Check("nvcc", False, str(exc)))
    arch = detect_arch()
    smi = shutil.which("nvidia-smi")
    gpu = _run([smi, "--query-gpu=name,driver_version", "--format=csv,noheader"]) if smi else "nvidia-smi not found"
    checks.append(
        Check(
            "GPU",
            arch is not None,
            f"{gpu}; arch {arch}"
            if arch
            else f"none ({gpu}); kernels compile for {DEFAULT_ARCH}, evaluation needs a GPU",
        )
    )
    if nvcc is not None:
        checks.append(build_schedule_check(nvcc, arch or DEFAULT_ARCH))
    checks += [tool_check("ncu", "profiling", nvcc), tool_check("cuobjdump", "SASS analysis", nvcc)]
    try:
        from optiml.integrity.sandbox import probe_isolation

        support = probe_isolation()
        checks.append(Check("sandbox", True, support.describe()))
    except Exception as exc:  # doctor reports, never crashes
        checks.append(Check("sandbox", False, f"probe failed: {exc}"))
    checks.append(candidate_check())
    return checks


def candidate_check() -> Check:
    """Whether candidate processes get their own namespaces and view here, and what ``OPTIML_ISOLATION`` makes of
    a host where they do not."""
    from optiml.integrity.candidate_sandbox import probe_candidate_isolation
    from optiml.integrity.policy import ISOLATIONS, isolation_policy

    policy = isolation_policy()
    if policy not in ISOLATIONS:
        return Check("candidates", False, f"OPTIML_ISOLATION={policy!r} is not one of {', '.join(ISOLATIONS)}")
    try:
        found = probe_candidate_isolation()
    except Exception as exc:  # doctor reports, never crashes
        return Check("candidates", False, f"probe failed: {exc}")
    if found.isolated:
        return Check("candidates", True, f"{found.note}; OPTIML_ISOLATION={policy}")
    outcome = "every candidate fails to start" if policy == "required" else "candidates run unconfined"
    return Check("candidates", False, f"{found.note}; OPTIML_ISOLATION={policy}: {outcome}")
