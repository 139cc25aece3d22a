"""On a GPU: every starter task's naive kernel, exported in each form, computes what the reference does.

ModelNew (issue 19): matches Model, moves between devices and is copied after a forward, round-trips its
state_dict, reuses one argument block per input signature; KernelBench's own ``eval_kernel_against_ref``
judges it where KernelBench is installed. The custom op (issue 15): matches the reference, also inside a
``torch.compile``d function and under ``torch.library.opcheck``. The standalone ``.cu``: builds with nvcc,
runs, and its program reports PASS against the case recorded at export time.
"""

from __future__ import annotations

import copy
import importlib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from export_helpers import STARTERS, TASKS, import_file, unique_namespace, write

from optiml.evaluate.runtime import Case, TaskRuntime
from optiml.export.kernelbench import render_model_new
from optiml.export.op import render_op
from optiml.export.standalone import render_standalone
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task
from optiml.task_runtime import smallest_shape_set

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


@pytest.fixture(autouse=True)
def exact_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    """Exact FP32 like OptiML's harness (cuDNN would otherwise run the reference conv in TF32)."""
    import torch

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)


def load(name: str) -> tuple[Task, KernelSource]:
    return load_task(TASKS / f"{name}.py"), KernelSource.from_file(TASKS / f"{name}.naive.cu")


def small_case(task: Task) -> Case:
    """Inputs, parameters and reference outputs of the task's smallest shape set, on the GPU."""
    runtime = TaskRuntime(task, "cuda")
    return runtime.case(0, smallest_shape_set(runtime))


def assert_close(got: Any, expected: Any, task: Task) -> None:
    import torch

    torch.testing.assert_close(got, expected, atol=task.meta.atol, rtol=task.meta.rtol)


@pytest.mark.parametrize("name", STARTERS)
def test_model_new_matches_the_reference_and_survives_moves_and_copies(
    name: str, tmp_path: Path, kernel_cache: Path
) -> None:
    import torch

    task, kernel = load(name)
    module = import_file(write(tmp_path, f"{name}_model_new.py", render_model_new(task, kernel)))
    torch.manual_seed(0)
    reference = module.Model(*module.get_init_inputs()).cuda()
    torch.manual_seed(0)
    model_new = module.ModelNew(*module.get_init_inputs()).cuda()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    with torch.no_grad():
        expected = reference(*inputs)
        assert_close(model_new(*inputs), expected, task)
        block = module.argument_block(model_new, *inputs)
        assert_close(model_new(*inputs), expected, task)  # the same block, the built library reused
        assert module.argument_block(model_new, *inputs) is block and block.library is not None
        assert module.cpp_launcher().count(id(model_new)) == 1  # the second call was the C++ launcher's

        model_new.cpu()  # what harnesses do after a forward: move, copy, reload
        model_new.to("cuda")
        assert_close(model_new(*inputs), expected, task)
        twin = copy.deepcopy(model_new)
        assert_close(twin(*inputs), expected, task)
        fresh = module.ModelNew(*module.get_init_inputs()).cuda()
        fresh.load_state_dict(reference.state_dict())
        assert_close(fresh(*inputs), expected, task)
        if any(t.is_floating_point() for t in reference.state_dict().values()):
            fresh.load_state_dict({k: torch.zeros_like(v) for k, v in reference.state_dict().items()})
            zeroed = module.Model(*module.get_init_inputs()).cuda()
            zeroed.load_state_dict(fresh.state_dict())
            assert_close(fresh(*inputs), zeroed(*inputs), task)  # the kernel reads the current parameters
    torch.cuda.synchronize()


@pytest.mark.parametrize("launcher", ["cpp", "ctypes"])
def test_calls_launch_on_the_current_stream_and_capture_in_a_cuda_graph(
    launcher: str, tmp_path: Path, kernel_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graph capture runs on a side stream and refuses work on any other: a kernel launched anywhere but the
    current stream fails the capture. A replay on new data gives the reference's result."""
    import torch

    if launcher == "ctypes":
        monkeypatch.setenv("OPTIML_EXPORT_LAUNCHER", "ctypes")
    task, kernel = load("layernorm")
    module = import_file(write(tmp_path, "layernorm_model_new.py", render_model_new(task, kernel)))
    runtime = TaskRuntime(task, "cuda")
    shape_set = smallest_shape_set(runtime)
    case = runtime.case(0, shape_set)
    model_new = module.ModelNew(*task.namespace(shape_set).get_init_inputs()).cuda()
    model_new.load_state_dict(case.model.state_dict())
    x = case.args[0].clone()
    with torch.no_grad():
        model_new(x)
        model_new(x)
        assert (module.cpp_launcher() is None) == (launcher == "ctypes")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = model_new(x)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(captured, case.model(x), task)


@pytest.mark.parametrize("name", STARTERS)
def test_the_op_matches_the_reference(name: str, tmp_path: Path, kernel_cache: Path) -> None:
    import torch

    task, kernel = load(name)
    namespace = unique_namespace()
    module = import_file(write(tmp_path, f"{name}_op.py", render_op(task, kernel, namespace=namespace)))
    op = getattr(getattr(torch.ops, namespace), name)
    case = small_case(task)
    for _ in range(2):  # the first call through Python, the second through the C++ launcher
        got = op(*case.abi_inputs)
        assert_close(list(got) if isinstance(got, tuple) else [got], case.expected, task)
    assert module.cpp_launcher().count(module._OWNER) == 1


def test_the_op_refuses_a_call_autograd_would_record(tmp_path: Path, kernel_cache: Path) -> None:
    """The kernel has no backward: with grad mode on and a parameter that requires grad the op raises at once
    (rather than a backward that silently lacks the op's gradient); under no_grad the same call runs."""
    import torch

    task, kernel = load("layernorm")
    namespace = unique_namespace()
    import_file(write(tmp_path, "layernorm_op.py", render_op(task, kernel, namespace=namespace)))
    op = getattr(torch.ops, namespace).layernorm
    case = small_case(task)
    x, weight, bias = case.abi_inputs
    weight = torch.nn.Parameter(weight.clone())  # as a user passes model.ln.weight
    with pytest.raises(RuntimeError, match="has no backward, and an input requires grad"):
        op(x, weight, bias)
    with torch.no_grad():
        assert_close(op(x, weight, bias), case.expected[0], task)
    assert_close(op(x, weight.detach(), bias), case.expected[0], task)


@pytest.mark.parametrize("name", ["layernorm", "softmax"])
def test_the_op_runs_inside_a_compiled_function(name: str, tmp_path: Path, kernel_cache: Path) -> None:
    import torch

    task, kernel = load(name)
    namespace = unique_namespace()
    import_file(write(tmp_path, f"{name}_op.py", render_op(task, kernel, namespace=namespace)))
    op = getattr(getattr(torch.ops, namespace), name)
    case = small_case(task)

    def scaled(*values: torch.Tensor) -> torch.Tensor:
        return op(*values) * 2.0 + 1.0

    compiled: Callable[..., torch.Tensor] = torch.compile(scaled, fullgraph=True)
    assert_close(compiled(*case.abi_inputs), case.expected[0] * 2.0 + 1.0, task)
    torch.library.opcheck(op.default, tuple(case.abi_inputs))


@pytest.mark.parametrize("name", STARTERS)
def test_the_standalone_program_passes_on_the_recorded_case(name: str, tmp_path: Path) -> None:
    import torch

    task, kernel = load(name)
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")
    text, data = render_standalone(task, kernel, file_name=f"{name}.cu", arch=arch)
    write(tmp_path, f"{name}.cu", text)
    (tmp_path / f"{name}.bin").write_bytes(data)
    build = next(line for line in text.splitlines() if line.startswith("// Build: ")).removeprefix("// Build: ")
    built = subprocess.run(build.split(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(tmp_path / name), f"{name}.bin", "20"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.rstrip().endswith("PASS"), run.stdout + run.stderr
    assert "time: median " in run.stdout


def kernelbench_eval() -> Callable[..., Any] | None:
    """KernelBench's ``eval_kernel_against_ref`` where a checkout is installed (it is not on PyPI)."""
    for name in ("kernelbench.eval", "src.eval"):
        try:
            return getattr(importlib.import_module(name), "eval_kernel_against_ref", None)
        except ImportError:
            continue
    return None


@pytest.mark.parametrize("name", ["layernorm", "softmax"])  # with and without parameters
def test_kernelbench_s_flow_on_the_export_exec_d_into_dicts(name: str, tmp_path: Path, kernel_cache: Path) -> None:
    """eval_kernel_against_ref's flow, step by step, where KernelBench itself is not installed: both sources
    exec()d into plain dicts (the ModelNew after a TORCH_EXTENSIONS_DIR line), both models built under the same
    seed and moved to the GPU, outputs compared over fresh seeded inputs, then CUDA-event timing of ModelNew."""
    import warnings

    import torch

    task, kernel = load(name)
    reference_context: dict = {}
    exec(compile(task.source, "<string>", "exec"), reference_context)
    custom = f"import os\nos.environ['TORCH_EXTENSIONS_DIR'] = {str(tmp_path)!r}\n" + render_model_new(task, kernel)
    context: dict = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*exported UNVERIFIED.*")
        exec(compile(custom, "<string>", "exec"), context)
    init = reference_context["get_init_inputs"]()
    torch.manual_seed(42)
    reference = reference_context["Model"](*init).cuda()
    torch.manual_seed(42)
    model_new = context["ModelNew"](*init).cuda()
    with torch.no_grad():
        for trial in range(3):
            torch.manual_seed(trial)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in reference_context["get_inputs"]()]
            assert_close(model_new(*inputs), reference(*inputs), task)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(10):
            start.record()
            model_new(*inputs)
            end.record()
            torch.cuda.synchronize()
            assert start.elapsed_time(end) > 0
    assert context["cpp_launcher"]().count(id(model_new)) == 1


@pytest.mark.parametrize("name", ["layernorm", "softmax"])  # with and without parameters
def test_kernelbench_judges_the_exported_model_new_correct(name: str, tmp_path: Path, kernel_cache: Path) -> None:
    import torch

    evaluate = kernelbench_eval()
    if evaluate is None:
        pytest.skip("KernelBench is not installed (pip install -e a KernelBench checkout to run this)")
    task, kernel = load(name)
    result = evaluate(
        original_model_src=task.source,
        custom_model_src=render_model_new(task, kernel),
        num_correct_trials=5,
        num_perf_trials=20,
        measure_performance=True,
        build_dir=str(tmp_path / "kernelbench"),
        device=torch.device("cuda:0"),
    )
    assert result.compiled and result.correctness, result


def test_a_tma_template_kernel_exports_and_runs(tmp_path: Path, kernel_cache: Path) -> None:
    """The bf16 GEMM's TMA kernel (it includes ``optiml_tma.h`` and needs sm_90a machine code) as a ModelNew
    and as a standalone program, on a Hopper GPU."""
    import torch

    from optiml.templates.base import DeviceFacts, GroupConfig
    from optiml.templates.kernels import template_kernels

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the TMA kernel is built for sm_90a")
    task = load_task(Path(__file__).parents[2] / "tasks" / "compute" / "bf16_gemm_square.py")
    config = GroupConfig.of("wgmma_tma", bm=128, bn=256, stages=4)
    kernel = template_kernels(task, DeviceFacts(arch="sm_90a")).render([config])
    module = import_file(write(tmp_path, "gemm_model_new.py", render_model_new(task, kernel)))
    a, b = (torch.randn(512, 512, device="cuda").to(torch.bfloat16) for _ in range(2))
    with torch.no_grad():
        assert_close(module.ModelNew()(a, b), module.Model()(a, b), task)
    text, data = render_standalone(task, kernel, file_name="gemm.cu", arch="sm_90a", shape_set=0)  # 16-byte rows
    write(tmp_path, "gemm.cu", text)
    (tmp_path / "gemm.bin").write_bytes(data)
    build = next(line for line in text.splitlines() if line.startswith("// Build: ")).removeprefix("// Build: ")
    built = subprocess.run(build.split(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(tmp_path / "gemm"), "gemm.bin", "5"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.rstrip().endswith("PASS"), run.stdout + run.stderr
