"""The standalone ``.cu`` export on the CPU (issue 15): the recorded case is the reference's, the file
compiles with nvcc into a program, and that program reads its data file (running the kernel needs a
GPU: test_export_gpu.py)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import torch
from export_helpers import TASKS
from typer.testing import CliRunner

from optiml.cli import app
from optiml.export.standalone import MAGIC, render_standalone
from optiml.kernel.source import KernelSource
from optiml.task import load_task

runner = CliRunner()
DTYPES = {0: torch.float32, 5: torch.int64}


def read_entries(data: bytes) -> list[tuple[int, torch.Tensor | bytes]]:
    """(role, value) per entry of a data file, parsed independently of the writer."""
    assert data[:8] == MAGIC
    (count,) = struct.unpack_from("<q", data, 8)
    offset, entries = 16, []
    for _ in range(count):
        role, dtype, ndim, _pad = struct.unpack_from("<4i", data, offset)
        shape = struct.unpack_from("<8q", data, offset + 16)[:ndim]
        (size,) = struct.unpack_from("<q", data, offset + 80)
        payload = data[offset + 88 : offset + 88 + size]
        offset += 88 + size
        value = torch.frombuffer(bytearray(payload), dtype=DTYPES[dtype]).reshape(shape) if role != 1 else payload
        entries.append((role, value))
    assert offset == len(data)
    return entries


def test_the_recorded_case_is_the_references_inputs_and_outputs() -> None:
    task = load_task(TASKS / "layernorm.py")
    _, data = render_standalone(task, KernelSource.from_file(TASKS / "layernorm.naive.cu"))
    entries = read_entries(data)
    assert [role for role, _ in entries] == [0, 0, 0, 2]  # x, weight, bias; the output
    module = task.namespace(2)  # the smallest shape set: M=7, N=20001
    torch.manual_seed(0)
    (x,) = module.get_inputs()
    model = module.Model(*module.get_init_inputs())
    x_rec, weight, bias, out = (value for _, value in entries)
    assert torch.equal(x_rec, x) and torch.equal(weight, model.ln.weight.detach()) and torch.equal(bias, model.ln.bias)
    torch.testing.assert_close(out, model(x).detach(), atol=0, rtol=0)


def test_integer_inputs_keep_their_dtype_and_a_zero_dim_output_is_recorded() -> None:
    task = load_task(TASKS / "cross_entropy.py")
    _, data = render_standalone(task, KernelSource.from_file(TASKS / "cross_entropy.naive.cu"))
    (_, logits), (_, targets), (role, loss) = read_entries(data)
    assert logits.dtype == torch.float32 and targets.dtype == torch.int64 and role == 2 and loss.shape == ()
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, targets))


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["cross_entropy"])  # integer targets, a workspace, a 0-dim output
def test_the_cu_compiles_and_its_program_reads_the_recorded_case(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}_standalone.cu"
    result = runner.invoke(
        app,
        [
            "export",
            str(TASKS / f"{name}.py"),
            str(TASKS / f"{name}.naive.cu"),
            "--as",
            "cu",
            "-o",
            str(out),
            "--unverified",
            "--store",
            str(tmp_path / "runs.db"),
        ],
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert text.startswith(f"// Standalone test of the OptiML kernel for task `{name}`")
    build = next(line for line in text.splitlines() if line.startswith("// Build: ")).removeprefix("// Build: ")
    built = subprocess.run(build.split(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    program = tmp_path / f"{name}_standalone"
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not data")
    bad = subprocess.run([str(program), str(garbage)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not an OptiML data file" in bad.stderr
    if torch.cuda.is_available() or shutil.which("nvidia-smi"):
        return  # with a GPU the default run executes the kernel: test_export_gpu.py checks it
    run = subprocess.run([str(program)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "CUDA error" in run.stderr  # parsed the data file, then found no GPU


def test_a_case_too_large_to_record_is_refused_with_the_way_out(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "export",
            str(TASKS / "layernorm.py"),
            str(TASKS / "layernorm.naive.cu"),
            "--as",
            "cu",
            "--shape-set",
            "0",
            "-o",
            str(tmp_path / "ln.cu"),
            "--unverified",
            "--store",
            str(tmp_path / "runs.db"),
        ],
    )
    assert result.exit_code == 2
    assert "shape set 0 needs 537 MB" in " ".join(result.output.split()) and "--shape-set" in result.output
    assert not (tmp_path / "ln.cu").exists() and not (tmp_path / "ln.bin").exists()


@pytest.mark.nvcc
def test_a_kernel_using_the_tma_header_exports_with_it_inlined_and_compiles(tmp_path: Path) -> None:
    """The bf16 GEMM template's TMA kernel includes ``optiml_tma.h`` (and, as every template kernel,
    ``optiml_device.h``; as every tensor-core one, ``optiml_ptx.h``): the standalone file carries those headers
    too, and the exported ModelNew writes them beside ``optiml.h`` when it builds."""
    from optiml.export.kernelbench import render_model_new
    from optiml.kernel.compiler import gencode
    from optiml.templates.base import DeviceFacts, GroupConfig
    from optiml.templates.kernels import template_kernels

    task = load_task(Path(__file__).parents[2] / "tasks" / "compute" / "bf16_gemm_square.py")
    config = GroupConfig.of("wgmma_tma", bm=128, bn=256, stages=4)
    kernel = template_kernels(task, DeviceFacts(arch="sm_90a")).render([config])
    assert '#include "optiml_tma.h"' in kernel.code
    text, _ = render_standalone(task, kernel, shape_set=0)
    assert '// #include "optiml_tma.h" (inlined above)' in text and "optiml_tensor_map_encode(" in text
    source = tmp_path / "gemm.cu"
    source.write_text(text)
    built = subprocess.run(
        ["nvcc", "-O3", "-std=c++17", gencode("sm_90a"), "-o", str(tmp_path / "gemm"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    model_new = render_model_new(task, kernel)
    headers = model_new[model_new.index("HELPER_HEADERS = {") :]
    for name in ("optiml_device.h", "optiml_ptx.h", "optiml_tma.h"):  # all three, carried beside optiml.h
        assert f"'{name}': " in headers[: headers.index("\n")], name
