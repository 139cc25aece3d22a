"""GEMM template: planning of matmul-family tasks, the space, rendering, nvcc builds, numerics on the CPU.

Numerics run without a GPU: a task's whole planned unit (``TemplateKernels.render``: planner,
assembler and template together) is compiled with g++ against the scan tests' fiber emulator (one
fiber per CUDA thread, real barriers and warp shuffles) plus the few types the GEMM kernels use,
loaded with ctypes and called in a forked child (an emulated crash cannot take pytest down) on
buffers shared with it. ``mma.sync`` is replaced by a warp-cooperative emulation that reads each
lane's fragments where the PTX ISA puts them, so the tensor-core path's tiling, fragment loads
and epilogue are checked too (on small integers: exact in bf16 and in any summation order).
"""

from __future__ import annotations

import ctypes
import faulthandler
import mmap
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_permute_template import to_host_code
from test_scan_template import EMULATOR
from tu import EMULATOR_SANITIZERS, gpu_trial_failures

from optiml.evaluate.abi import OptimlTensor as _Tensor
from optiml.graph.capture import capture_all
from optiml.integrity.screen import screen_source
from optiml.kernel.compiler import Compiler, CompilerConfig, include_dir
from optiml.kernel.source import KernelSource
from optiml.task import Task, load_task
from optiml.templates.base import DeviceFacts, GroupConfig, TemplateError
from optiml.templates.gemm.dispatch import TF32_DEFAULT, GemmTemplate
from optiml.templates.gemm.problem import Problem
from optiml.templates.kernels import TemplateKernels
from optiml.templates.plan import make_plan

FACTS = DeviceFacts()
EMULATED = DeviceFacts(sm_count=4)  # few SMs: small skinny products already take split-K
needs_gxx = pytest.mark.skipif(
    shutil.which("g++") is None or os.uname().machine != "x86_64" or not hasattr(os, "fork"),
    reason="the CUDA emulator needs g++ on x86-64 Linux",
)

# -- tasks (KernelBench format) --------------------------------------------------------------------
TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

{sizes}
OPTIML = {{"dtype": "{dtype}", "shape_sets": {sets}}}


class Model(nn.Module):
    def __init__(self{init_args}):
        super().__init__()
{init}

    def forward(self, {args}):
{body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init_values}]
"""
ODD = {"M": 37, "N": 45, "K": 29}
ALIGNED = {"M": 64, "N": 48, "K": 32}  # 16-byte loads and stores
DEEP = {"M": 20, "N": 33, "K": 70}  # several k slices of every depth
# |sums| < 256 (all but surely): exact in bf16; the first and last take the 16-byte (cp.async) path, the last
# with more k slices than pipeline stages
HALF_SETS = [
    {"M": 64, "N": 48, "K": 56},
    {"M": 33, "N": 17, "K": 61},
    {"M": 40, "N": 24, "K": 128},
    {"M": 72, "N": 136, "K": 328},  # six k slices: the pipelines wrap around their stages
]
#: a task's model: one nn.Linear(k, n) built from the sizes K, N, called as ``self.fc``
LINEAR = dict(init_args=", k, n", init="        self.fc = nn.Linear(k, n)", init_values="K, N")
SPECS: dict[str, dict[str, Any]] = {
    "mm": dict(args="a, b", body="return a @ b", inputs="torch.randn(M, K), torch.randn(K, N)"),
    "mm_tn": dict(args="a, b", body="return a.t() @ b", inputs="torch.randn(K, M), torch.randn(K, N)"),
    "mm_nt": dict(args="a, b", body="return a @ b.t()", inputs="torch.randn(M, K), torch.randn(N, K)"),
    "mm_tt": dict(args="a, b", body="return a.t() @ b.t()", inputs="torch.randn(K, M), torch.randn(N, K)"),
    "bmm": dict(args="a, b", body="return torch.bmm(a, b)", inputs="torch.randn(2, M, K), torch.randn(2, K, N)"),
    "bcast": dict(
        args="a, b", body="return torch.matmul(a, b)", inputs="torch.randn(2, M, K), torch.randn(3, 1, K, N)"
    ),
    "linear_relu": dict(
        **LINEAR,
        args="x",
        body="return torch.relu(self.fc(x))",
        inputs="torch.randn(M, K)",
    ),
    "linear3d_gelu_res": dict(
        **LINEAR,
        args="x, r",
        body="return F.gelu(self.fc(x)) * 0.5 + r",
        inputs="torch.randn(2, M, K), torch.randn(M, N)",
    ),
    "linear_seq_first": dict(  # nn.MultiheadAttention's (L, N, E) view of a batch: M batches of 2 rows, one weight
        **LINEAR,
        args="x",
        body="return torch.tanh(self.fc(x.permute(1, 0, 2)))",
        inputs="torch.randn(2, M, K)",
    ),
    "addmm": dict(
        args="c, a, b",
        body="return torch.addmm(c, a, b, beta=0.5, alpha=2.0).clamp(min=-1.0)",
        inputs="torch.randn(M, 1), torch.randn(M, K), torch.randn(K, N)",
    ),
    "recomputed_leaf": dict(
        args="a, b, c",
        body="return a @ b + torch.exp(c)",
        inputs="torch.randn(M, K), torch.randn(K, N), torch.randn(N)",
    ),
    "mm_rowsum": dict(
        # relu: not linear, so the sum stays after the product (a linear chain folds: test_product_sums.py)
        args="a, b",
        body="return (torch.relu(a @ b) * 2.0).sum(dim=1)",
        inputs="torch.randn(M, K), torch.randn(K, N)",
    ),
    "mm_scaled": dict(  # a size-derived float constant: 1 / sqrt(K) differs between shape sets
        args="a, b", body="return (a @ b) * a.shape[-1] ** -0.5", inputs="torch.randn(M, K), torch.randn(K, N)"
    ),
    "deep_k": dict(  # few tiles, long K: the simt variant splits K (2-3 slices on the emulator's 4 SMs)
        sizes={"M": 37, "N": 45, "K": 1100},
        sets=[{"M": 64, "N": 48, "K": 1024}],
        args="a, b, c",
        body="return torch.relu(a @ b + c) * 0.5",
        inputs="torch.randn(M, K), torch.randn(K, N), torch.randn(N)",
    ),
    "nt_deep": dict(  # x @ W.T over several k slices: B k-major through a ring of TMA stages that wraps
        sizes={"M": 37, "N": 45, "K": 300},
        sets=[{"M": 64, "N": 64, "K": 352}],
        args="a, b",
        body="return a @ b.t()",
        inputs="torch.randn(M, K), torch.randn(N, K)",
    ),
    "two_outputs": dict(
        args="a, b",
        body="y = a @ b\n        return y, torch.relu(y) * 2.0",
        inputs="torch.randn(M, K), torch.randn(K, N)",
    ),
    "mlp": dict(  # the second product reads the first kernel's result from the workspace
        sizes={"M": 37},
        sets=[{"M": 64}],
        init="        self.fc1 = nn.Linear(29, 45)\n        self.fc2 = nn.Linear(45, 17)",
        args="x",
        body="return self.fc2(torch.relu(self.fc1(x)))",
        inputs="torch.randn(M, 29)",
    ),
    "gemv": dict(
        sizes={"M": 37, "K": 1000},
        # the last two split each row's k range over several warps (16-byte loads, then scalar ones)
        sets=[{"M": 5, "K": 29}, {"M": 8, "K": 1024}, {"M": 40, "K": 4100}, {"M": 9, "K": 2051}],
        args="a, x",
        body="return torch.matmul(a, x)",
        inputs="torch.randn(M, K), torch.randn(K)",
    ),
    "small_m_linear": dict(
        sizes={"M": 3, "N": 45, "K": 700},
        sets=[{"M": 1, "N": 7, "K": 29}, {"M": 4, "N": 64, "K": 512}],
        **LINEAR,
        args="x",
        body="return torch.sigmoid(self.fc(x))",
        inputs="torch.randn(M, K)",
    ),
    "small_m_mm": dict(
        sizes={"M": 3, "N": 45, "K": 700},
        sets=[{"M": 2, "N": 300, "K": 29}],
        args="a, b",
        body="return torch.bmm(a, b) - 1.0",
        inputs="torch.randn(2, M, K), torch.randn(2, K, N)",
    ),
    # bf16: small integers, so products and sums are exact whatever the order, and so is the bf16 result
    "h_mm_relu": dict(
        dtype="bfloat16",
        sets=HALF_SETS,
        args="a, b, c",
        body="return torch.relu(a @ b) + c",
        inputs="torch.randint(-2, 3, (M, K)).float(), torch.randint(-2, 3, (K, N)).float(), "
        "torch.randint(-2, 3, (N,)).float()",
    ),
    "h_mm_nt": dict(
        dtype="bfloat16",
        sets=HALF_SETS,
        args="a, b",
        body="return a @ b.t()",
        inputs="torch.randint(-2, 3, (M, K)).float(), torch.randint(-2, 3, (N, K)).float()",
    ),
    "h_mm_tt": dict(
        dtype="bfloat16",
        sets=HALF_SETS,
        args="a, b",
        body="return torch.bmm(a.transpose(1, 2), b.transpose(1, 2))",
        inputs="torch.randint(-2, 3, (2, K, M)).float(), torch.randint(-2, 3, (2, N, K)).float()",
    ),
    "h_gemv": dict(
        dtype="bfloat16",
        sizes={"M": 4, "N": 45, "K": 29},
        sets=[{"M": 16, "N": 64, "K": 40}],
        args="a, b",
        body="return a @ b.t()",
        inputs="torch.randint(-2, 3, (M, K)).float(), torch.randint(-2, 3, (N, K)).float()",
    ),
    "f16_bmm": dict(
        dtype="float16", args="a, b", body="return torch.bmm(a, b)", inputs="torch.randn(2, M, K), torch.randn(2, K, N)"
    ),
    # attention scores: torch.matmul flattens both operands' two batch dims, the keys' through a transpose
    "h_qk": dict(
        dtype="bfloat16",
        sets=HALF_SETS,
        args="q, k",
        body="return torch.matmul(q, k.transpose(-2, -1)) * 0.5",
        inputs="torch.randint(-2, 3, (2, 3, M, K)).float(), torch.randint(-2, 3, (2, 3, N, K)).float()",
    ),
}


def write_task(folder: Path, name: str) -> Path:
    spec = {
        "dtype": "float32",
        "init_args": "",
        "init": "        pass",
        "init_values": "",
        "sizes": ODD,
        "sets": [ALIGNED, DEEP],
    }
    spec.update(SPECS[name])
    text = TASK.format(
        sizes="\n".join(f"{k} = {v}" for k, v in spec["sizes"].items()),
        dtype=spec["dtype"],
        sets=repr(spec["sets"]),
        init_args=spec["init_args"],
        init=spec["init"],
        init_values=spec["init_values"],
        args=spec["args"],
        body="        " + spec["body"],
        inputs=spec["inputs"],
    )
    path = folder / f"{name}.py"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    folder = tmp_path_factory.mktemp("gemm-tasks")
    return {name: load_task(write_task(folder, name)) for name in SPECS}


_KERNELS: dict[tuple[str, int], TemplateKernels] = {}
_GRAPHS: dict[str, list[Any]] = {}


def kernels_of(tasks: dict[str, Task], name: str, facts: DeviceFacts = FACTS) -> TemplateKernels:
    key = (name, facts.sm_count, facts.arch)
    if key not in _KERNELS:
        _KERNELS[key] = TemplateKernels(tasks[name], _plan(name, tasks[name]), facts)
    return _KERNELS[key]


def _plan(name: str, task: Task) -> Any:
    if name not in _GRAPHS:
        _GRAPHS[name] = capture_all(task)
    return make_plan(list(_GRAPHS[name]))


# -- planning --------------------------------------------------------------------------------------
PLANS = {
    "mm": "gemm[matmul]",
    "mm_tn": "gemm[matmul]",
    "bcast": "gemm[matmul]",
    "linear_relu": "gemm[matmul add relu]",
    "linear3d_gelu_res": "gemm[matmul add mul mul erf add mul mul add]",
    "addmm": "gemm[matmul mul add clamp]",  # beta * c is recomputed in the epilogue: no kernel of its own
    "recomputed_leaf": "gemm[matmul add]",
    "mm_rowsum": "gemm[matmul relu mul] → reduce[sum]",  # a reduction after the product stays a kernel
    "two_outputs": "gemm[matmul relu mul]",
    "mlp": "gemm[matmul add relu] → gemm[matmul add]",
    "gemv": "gemm[matmul]",
    "small_m_linear": "gemm[matmul add sigmoid]",
    "h_mm_relu": "gemm[matmul relu add]",
    "h_qk": "gemm[matmul mul]",  # the keys' transpose is read in place (trans_b), no permute kernel
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_planning_fuses_the_epilogue(tasks: dict[str, Task], name: str) -> None:
    plan = kernels_of(tasks, name).plan
    assert plan.describe() == PLANS[name]
    gemm = plan.groups[0]
    assert gemm.template == "gemm"
    product = gemm.graph.nodes[gemm.nodes[0]]
    assert product.op == "matmul" and set(product.inputs) <= set(gemm.inputs)
    assert not set(plan.materialized) & set(product.inputs), "the operands are read where they are stored"
    again = _plan(name, tasks[name])
    assert again.describe() == plan.describe() and [g.spec for g in again.groups] == [g.spec for g in plan.groups]


def test_the_matmul_node_carries_layout_and_batch(tasks: dict[str, Task]) -> None:
    def product(name: str) -> Any:
        gemm = kernels_of(tasks, name).plan.groups[0]
        return gemm.graph.nodes[gemm.nodes[0]], gemm

    for name, ta, tb, batch in [
        ("mm", False, False, 0),
        ("mm_tn", True, False, 0),
        ("mm_nt", False, True, 0),
        ("mm_tt", True, True, 0),
        ("linear_relu", False, True, 0),  # nn.Linear's weight is read as stored: [N, K]
        ("bmm", False, False, 1),
        ("bcast", False, False, 2),  # [2, M, K] @ [3, 1, K, N]: batch (3, 2), both operands broadcast
        ("h_mm_tt", True, True, 1),
        ("h_qk", False, True, 2),  # q @ k.transpose(-2, -1) over [2, 3, ., .]: both flattenings merged
    ]:
        node, gemm = product(name)
        assert (node.attr("trans_a"), node.attr("trans_b"), node.attr("batch")) == (ta, tb, batch), name
        assert set(node.inputs) <= set(gemm.graph.inputs), f"{name}: no permute or expand kernel before the GEMM"
    node, gemm = product("bcast")
    assert gemm.graph.type(node.outputs[0]).shape == (3, 2, 37, 45)


def test_a_batch_of_rows_against_one_matrix_is_one_product(tasks: dict[str, Task]) -> None:
    """A Linear on a sequence-first input (M batches of 2 rows, as nn.MultiheadAttention's in-projection sees it)
    is one GEMM of 2M rows: not a gemv a batch (31_VisionAttention's 16 384 of them re-read the weight), and no
    batch strides; a batch against a batch of B (bmm), or a transposed A, stays batched."""
    k = kernels_of(tasks, "linear_seq_first")
    assert k.describe() == "permute[permute] → gemm[matmul add tanh]"
    prob = Problem(k.plan.groups[1])
    assert prob.folds_batch and prob.primary.batch == 1 and prob.primary.m == 2 * ODD["M"]
    assert k.default()[1].variant != "gemv"
    host = k.render(k.default()).code
    assert "P.batch = (int64_t)1;" in host and "P.bsa[0] =" not in host
    contiguous = Problem(kernels_of(tasks, "linear3d_gelu_res").plan.groups[0])  # captured 2-D: nothing to fold
    assert not contiguous.folds_batch and contiguous.primary.batch == 1 and contiguous.primary.m == 2 * ODD["M"]
    for name in ("bmm", "bcast", "h_mm_tt", "mm"):
        assert not Problem(kernels_of(tasks, name).plan.groups[0]).folds_batch, name


def test_the_rule_picks_the_variant(tasks: dict[str, Task]) -> None:
    gemm = GemmTemplate()
    first = {
        name: kernels_of(tasks, name).default()[0] for name in ("mm", "gemv", "small_m_linear", "h_mm_relu", "h_gemv")
    }
    assert first["mm"] == GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)  # one 64x64 tile: small
    assert first["gemv"] == GroupConfig.of("gemv", threads=256, rows=1)
    assert first["small_m_linear"] == GroupConfig.of("gemv", threads=256, rows=4)
    assert first["h_mm_relu"].variant == "wgmma_tma" and first["h_gemv"].variant == "gemv"
    big = kernels_of(tasks, "mm").plan.groups[0]
    big_facts = DeviceFacts(sm_count=1)  # the 128x128 tiles cover every SM
    # an odd single product (its odd operands padded in the workspace) with A k-major takes the TMA 3xTF32 kernel
    # on Hopper, with the mma.sync 3xTF32 kernel among its seeds; tf32x3 where TF32 MMAs exist but not TMA
    tma = GroupConfig.of("tf32x3_tma", bm=128, bn=128, stages=4)
    assert gemm.default(big, big_facts) == tma
    # its K (29) is one slice: a SIMT kernel of two blocks an SM is raced second (the TMA kernel's one register-bound
    # block an SM left level 1's 9, K = 32, at 33 % of the DRAM floor), and the mma.sync pipeline holds two stages,
    # not four: one slice fills one, and the other two would only halve the blocks an SM
    simt = GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)
    short_tf32 = TF32_DEFAULT.with_params(stages=2)
    assert gemm.seeds(big, big_facts)[:4] == [tma, simt, tma.with_params(bn=64), short_tf32]
    deep_k = kernels_of(tasks, "deep_k").plan.groups[0]  # K = 1100: no such seed, all four stages
    assert gemm.seeds(deep_k, big_facts)[:3] == [tma, tma.with_params(bn=64), TF32_DEFAULT]
    ampere = DeviceFacts(sm_count=1, arch="sm_80")
    assert gemm.default(big, ampere) == short_tf32  # the rule's tile, its pipeline as deep as K
    assert not any(c.variant.startswith("tf32x3_") for c in gemm.seeds(big, ampere))
    tn = kernels_of(tasks, "mm_tn").plan.groups[0]  # A m-major: the mma.sync kernel, and no warp-group seed
    assert gemm.default(tn, big_facts) == short_tf32
    assert not any(c.variant.startswith("tf32x3_") for c in gemm.seeds(tn, big_facts))
    deep = kernels_of(tasks, "deep_k").plan.groups[0]  # one tile, a long K: split-K fills the GPU
    assert gemm.default(deep, FACTS) == tma.with_params(bm=64, bn=64)
    assert gemm.default(kernels_of(tasks, "mm_nt").plan.groups[0], FACTS).variant == "simt"  # one small tile
    before_tf32 = DeviceFacts(sm_count=1, arch="sm_75")
    assert gemm.default(big, before_tf32) == GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)
    batched = kernels_of(tasks, "bcast").plan.groups[0]  # odd sizes and a batch: no padded copies, SIMT
    assert gemm.default(batched, big_facts).variant == "simt"
    for name in ("mm", "gemv", "small_m_linear", "h_mm_relu", "h_gemv", "bcast"):
        k = kernels_of(tasks, name)
        group = k.plan.groups[0]
        seeds = k.templates.of(group).seeds(group, FACTS)
        assert seeds[0] == k.default()[0] and 3 <= len(seeds) <= 4 and len(set(seeds)) == len(seeds)
        assert all(k.spaces[0].reason_invalid(s) is None for s in seeds), seeds


def test_the_space_rejects_bad_tiles(tasks: dict[str, Task]) -> None:
    fp32 = kernels_of(tasks, "mm").spaces[0]
    bf16 = kernels_of(tasks, "h_mm_relu").spaces[0]
    assert fp32.variants == ("simt", "tf32x3", "tf32x3_wgmma", "tf32x3_tma", "gemv")
    assert "tf32x3_tma" not in kernels_of(tasks, "mm_tn").spaces[0].variants  # A's fragments need it k-major
    assert bf16.variants == ("mma", "wgmma", "wgmma_tma", "gemv")
    assert kernels_of(tasks, "mm", DeviceFacts(arch="sm_75")).spaces[0].variants == ("simt", "gemv")  # no TF32 MMA
    ampere = kernels_of(tasks, "mm", DeviceFacts(arch="sm_80")).spaces[0]
    assert ampere.variants == ("simt", "tf32x3", "gemv")  # no warp-group MMA before Hopper
    wide = GroupConfig.of("tf32x3_wgmma", bm=128, bn=128)
    assert fp32.reason_invalid(wide) is None
    for config in [wide.with_params(bn=256), wide.with_params(bm=256), wide.with_params(bm=96)]:
        assert fp32.reason_invalid(config) is not None, config  # registers, threads, whole warp groups
    tf32 = GroupConfig.of("tf32x3", bm=128, bn=128, bk=32, wm=2, wn=4, stages=3)
    assert fp32.reason_invalid(tf32) is None
    for why, config in {
        "accumulators": tf32.with_params(wn=2),  # 64 x 64 warp tiles spill
        "shared memory": tf32.with_params(bm=256, bn=256, stages=4),
        "threads": tf32.with_params(wm=1, wn=1),
    }.items():
        assert fp32.reason_invalid(config) is not None, why
    assert kernels_of(tasks, "h_mm_tt").spaces[0].variants == ("mma", "gemv")  # wgmma reads A k-major only
    assert kernels_of(tasks, "h_mm_relu", DeviceFacts(arch="sm_80")).spaces[0].variants == ("mma", "gemv")
    wg = GroupConfig.of("wgmma", bm=128, bn=256, stages=4)
    assert bf16.reason_invalid(wg) is None
    for config in [wg.with_params(bn=96), wg.with_params(bm=256, stages=4), GroupConfig.of("wgmma", bm=64, bn=64)]:
        assert bf16.reason_invalid(config) is not None, config
    tma = GroupConfig.of("wgmma_tma", bm=128, bn=256, stages=4)
    assert bf16.reason_invalid(tma) is None and bf16.reason_invalid(tma.with_params(bn=192, stages=5)) is None
    for config in [tma.with_params(stages=5), tma.with_params(bm=256), tma.with_params(bn=96)]:
        assert bf16.reason_invalid(config) is not None, config  # shared memory, consumer warp groups, panels
    simt = GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)
    assert fp32.reason_invalid(simt) is None
    assert fp32.reason_invalid(simt.with_params(bk=16)) is None
    bad = {
        "threads": simt.with_params(tm=4, tn=4),  # 1024 threads
        "warps": GroupConfig.of("simt", bm=32, bn=32, bk=8, tm=8, tn=8),  # 16 threads
        "shared memory": simt.with_params(bk=32),  # 2 x 32 x 264 floats
        "loads": GroupConfig.of("simt", bm=128, bn=32, bk=32, tm=8, tn=8),  # 1024 floats of A / 64 threads
        "value": simt.with_params(bm=96),
        "missing": GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8),
    }
    for why, config in bad.items():
        assert fp32.reason_invalid(config) is not None, why
    assert "unknown variant" in (fp32.reason_invalid(GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2)) or "")
    assert "unknown variant" in (bf16.reason_invalid(simt) or "")  # no half code under fp32, no SIMT for half
    mma = GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=4, stages=4)
    assert bf16.reason_invalid(mma) is None
    assert bf16.reason_invalid(mma.with_params(bm=256, bn=256, wm=4, wn=4, stages=2)) is None  # 512 threads
    for config in [
        GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=1, wn=1, stages=2),  # 32 threads
        mma.with_params(bm=256, bn=256, wm=1, wn=2),  # 1024 accumulators per thread
        mma.with_params(bm=256, bn=256, bk=64, wm=4, wn=4),  # 288 KB of shared memory
        GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=4, wn=4, stages=2),  # 256 copies for 512 threads
        GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2),  # no stages
    ]:
        assert bf16.reason_invalid(config) is not None, config
    assert fp32.reason_invalid(GroupConfig.of("gemv", threads=256, rows=3)) is not None
    group = kernels_of(tasks, "mm").plan.groups[0]
    with pytest.raises(TemplateError):
        kernels_of(tasks, "mm").render([simt.with_params(tm=4, tn=4)])
    with pytest.raises(TemplateError):
        GemmTemplate().render(group, GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=2), _ctx(group))


def _ctx(group: Any) -> Any:
    from optiml.templates.base import Operand, RenderContext

    return RenderContext(
        prefix=group.prefix,
        inputs=[Operand(f"((const float*)inputs[{k}].data)", "float") for k, _ in enumerate(group.inputs)],
        outputs=[Operand(f"((float*)outputs[{k}].data)", "float") for k, _ in enumerate(group.outputs)],
        dims=lambda vid, d: f"inputs[0].shape[{d}]",
    )


def test_render_is_deterministic_prefixed_and_size_free(tasks: dict[str, Task]) -> None:
    for name in ("linear3d_gelu_res", "small_m_linear", "h_mm_relu", "mm_rowsum"):
        k = kernels_of(tasks, name)
        for configs in k.seeds():
            a, b = k.render(configs).code, k.render(configs).code
            assert a == b
            gemm = a[a.index("// ---- g0:") : a.index("OPTIML_EXPORT int optiml_forward")]
            defined = re.findall(
                r"(?:__global__ void __launch_bounds__\(\d+\)|struct|static \w+|__forceinline__ \w+)\s+(\w+)\(", gemm
            )
            defined += re.findall(r"struct (\w+) \{", gemm)
            assert defined and all(n.startswith(("g0_", "g1_")) for n in defined), defined
            assert "stream>>>" in a
            sizes = SPECS[name].get("sizes", ODD)
            for value in sizes.values():
                if value > 8:
                    # (inline PTX operands like %37 and the registers they bind, d[37], are not sizes)
                    assert not re.search(rf"(?<![\w.%\[]){value}(?![\w.])", gemm), (name, value)
            half = "__nv_bfloat16" in a or ".bf16.bf16" in a or "__half" in a
            assert half == name.startswith("h_"), name
            report = screen_source(a, fp32_strict=not half)  # fp32 code passes the fp32-strict screen
            tf32 = "tf32x3" in a  # flagged, not rejected: verification decides (the `tf32` rule)
            assert not report.rejected and {f.rule for f in report.flags} == ({"tf32"} if tf32 else set()), (
                report.message()
            )


# -- nvcc builds -------------------------------------------------------------------------------------
def combined(units: list[str]) -> str:
    """Several planned units in one translation unit: each in its own namespace, entry points renamed."""
    includes: list[str] = []
    bodies = []
    for k, unit in enumerate(units):
        lines = []
        for line in unit.splitlines():
            if line.startswith("#include"):
                if line not in includes:
                    includes.append(line)
            else:
                lines.append(line)
        body = "\n".join(lines).replace("optiml_forward(", f"case{k}_forward(")
        body = body.replace("optiml_workspace_bytes(", f"case{k}_workspace(")
        bodies.append(f"namespace case{k} {{\n{body}\n}}  // namespace case{k}")
    return "\n".join(includes) + "\n" + "\n".join(bodies) + "\n"


BUILDS: dict[str, list[tuple[str, GroupConfig]]] = {
    "simt_nn_epilogue": [
        ("mm", GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8)),
        ("linear3d_gelu_res", GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)),
    ],
    "simt_transposed": [
        ("mm_tn", GroupConfig.of("simt", bm=128, bn=64, bk=16, tm=8, tn=8)),
        ("mm_nt", GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=4, tn=4)),
        ("mm_tt", GroupConfig.of("simt", bm=32, bn=64, bk=16, tm=4, tn=4)),
    ],
    "simt_batched": [
        ("bcast", GroupConfig.of("simt", bm=64, bn=128, bk=8, tm=4, tn=8)),
        ("addmm", GroupConfig.of("simt", bm=32, bn=32, bk=32, tm=4, tn=4)),
    ],
    "gemv_fp32": [
        ("gemv", GroupConfig.of("gemv", threads=256, rows=1)),
        ("small_m_linear", GroupConfig.of("gemv", threads=128, rows=4)),
        ("small_m_mm", GroupConfig.of("gemv", threads=256, rows=16)),
    ],
    "mma_nn": [
        ("h_mm_relu", GroupConfig.of("mma", bm=128, bn=128, bk=32, wm=2, wn=2, stages=4)),
        ("h_mm_relu", GroupConfig.of("mma", bm=128, bn=256, bk=64, wm=2, wn=4, stages=3)),
    ],
    "mma_transposed": [
        ("h_mm_nt", GroupConfig.of("mma", bm=128, bn=64, bk=32, wm=2, wn=2, stages=2)),
        ("h_mm_tt", GroupConfig.of("mma", bm=64, bn=128, bk=32, wm=1, wn=4, stages=3)),
    ],
    "tf32x3_wgmma": [
        ("mm", GroupConfig.of("tf32x3_wgmma", bm=128, bn=128)),
        ("mm_tn", GroupConfig.of("tf32x3_wgmma", bm=64, bn=128)),
        ("mm_nt", GroupConfig.of("tf32x3_wgmma", bm=128, bn=64)),
        ("linear3d_gelu_res", GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)),
    ],
    "tf32x3_tma": [
        ("mm", GroupConfig.of("tf32x3_tma", bm=128, bn=128, stages=4)),
        ("mm_nt", GroupConfig.of("tf32x3_tma", bm=64, bn=128, stages=3)),
        ("linear3d_gelu_res", GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=2)),
    ],
    "wgmma_tma": [
        ("h_mm_relu", GroupConfig.of("wgmma_tma", bm=128, bn=256, stages=4)),
        ("h_mm_nt", GroupConfig.of("wgmma_tma", bm=128, bn=192, stages=5)),
        ("h_mm_nt", GroupConfig.of("wgmma_tma", bm=64, bn=128, stages=6)),
    ],
    "half_gemv_and_fp16": [
        ("h_gemv", GroupConfig.of("gemv", threads=256, rows=4)),
        ("f16_bmm", GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=4)),
    ],
}


@pytest.mark.nvcc
def test_every_variant_compiles(tasks: dict[str, Task], tmp_path: Path) -> None:
    sources = []
    for cases in BUILDS.values():
        units = [kernels_of(tasks, name).render([config]).code for name, config in cases]
        sources.append(KernelSource(combined(units)))
    results = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache")).compile_many(sources)
    for name, result in zip(BUILDS, results, strict=True):
        assert result.ok, f"{name}: {result.error_summary()}"
        # (the assembler's optiml_workspace_bytes repeats the forward's layout: its offsets go unused there)
        warnings = [d for d in result.diagnostics if d.severity == "warning" and "ws_" not in d.message]
        assert not warnings, result.log[-3000:]
        kernels = [r for r in result.resources if any(k in r.name for k in ("_vec", "_dot", "_axpy", "_tma"))]
        assert kernels, name
        for res in kernels:  # the main kernels keep everything in registers
            assert not res.spills and res.stack_bytes == 0, (name, res)


# -- numerics on the CPU (g++ and the fiber emulator) ------------------------------------------------
EXTRAS = r"""
// What the GEMM kernels use beyond the scan emulator (test-only).
#include <array>
#include <cmath>
#include <map>
#define __grid_constant__
#undef __align__
#define __align__(n) __attribute__((aligned(n)))
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct alignas(16) int4 { int x, y, z, w; };
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
// ... what the conv, batch-norm and pooling kernels use
static inline float rsqrtf(float x) { return 1.f / sqrtf(x); }
using std::isinf;  // CUDA's are global functions; <cmath>'s live in std
using std::isnan;
static inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
static inline uint64_t __umul64hi(uint64_t a, uint64_t b) { return (uint64_t)(((unsigned __int128)a * b) >> 64); }
static inline float __int_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
// kernel<<<grid, block, smem, stream>>>(args) -> emu_launch(grid, block, smem, stream)(kernel, args)
struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
// (a kernel declared with __cluster_dims__(C, 1, 1) is launched with C after the stream: to_host_code)
#define __cluster_dims__(...)
struct emu_launch {
  unsigned g, gy, b;
  size_t s;
  unsigned c = 1;
  emu_launch(unsigned g_, unsigned b_, size_t s_, cudaStream_t) : g(g_), gy(1), b(b_), s(s_) {}
  emu_launch(unsigned g_, unsigned b_, size_t s_, cudaStream_t, unsigned c_) : g(g_), gy(1), b(b_), s(s_), c(c_) {}
  emu_launch(dim3 g_, unsigned b_, size_t s_, cudaStream_t) : g(g_.x), gy(g_.y), b(b_), s(s_) {
    if (g_.z != 1) { fprintf(stderr, "EMU: 3-D grids are not modelled\n"); emu_die(5); }
  }
  template <class K, class... A> void operator()(K kernel, A... args) { emu_launcher{g, b, s, gy, c}(kernel, args...); }
};
// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32, from the PTX ISA's fragment layouts: A(row, k) is half
// (k & 1) of register (row >= 8) + 2 (k >= 8) of lane (row % 8) * 4 + (k % 8) / 2; B(k, col) is half
// (k & 1) of register (k >= 8) of lane col * 4 + (k % 8) / 2; C(row, col) is element 2 (row >= 8) + (col & 1)
// of lane (row % 8) * 4 + col / 2.
static unsigned emu_mma_a[32][32][4], emu_mma_b[32][32][2];
static inline float emu_bf16(unsigned bits) {
  const uint32_t u = (bits & 0xffffu) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// TF32: cvt.rna.tf32.f32 (round to nearest, ties away from zero, to 10 mantissa bits) and
// mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32: A(row, k) is register (row >= 8) + 2 (k >= 4) of lane
// (row % 8) * 4 + k % 4; B(k, col) is register (k >= 4) of lane col * 4 + k % 4; C as for bf16.
static inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
static inline unsigned emu_tf32(float x) {
  unsigned u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;  // inf, nan
  return (u + 0x1000u) & 0xffffe000u;
}
static unsigned emu_mma_t[32][32][4], emu_mma_u[32][32][2];
static void emu_mma_tf32(float* c, const unsigned* a, const unsigned* b) {
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int q = 0; q < 4; ++q) emu_mma_t[w][lane][q] = a[q] & 0xffffe000u;  // the unit reads 19 bits
  for (int q = 0; q < 2; ++q) emu_mma_u[w][lane][q] = b[q] & 0xffffe000u;
  __syncwarp();
  float out[4];
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + (e % 2);
    double sum = c[e];
    for (unsigned k = 0; k < 8; ++k)
      sum += (double)__uint_as_float(emu_mma_t[w][(row % 8) * 4 + k % 4][(row >= 8) + 2 * (k >= 4)]) *
             (double)__uint_as_float(emu_mma_u[w][col * 4 + k % 4][k >= 4]);
    out[e] = (float)sum;
  }
  __syncwarp();
  for (int q = 0; q < 4; ++q) c[q] = out[q];
}
// cp.async: a thread's copies land when a wait_group retires the commit group that holds them, as late as
// the hardware may complete them; copies never committed never land (wait_group does not wait for them).
// One thread's asynchronous operations: the open ones, then committed groups retired oldest first.
struct emu_async_queue {
  std::vector<std::function<void()>> open;
  std::vector<std::vector<std::function<void()>>> groups;
  void commit() {
    groups.push_back(std::move(open));
    open.clear();
  }
  void wait(int pending) {
    while ((int)groups.size() > pending) {
      for (auto& op : groups.front()) op();
      groups.erase(groups.begin());
    }
  }
};
static emu_async_queue emu_cp[1024];
static void emu_cp_async(unsigned dst, const void* src, bool ok, size_t bytes) {
  emu_cp[threadIdx.x].open.push_back([=]() {
    if (ok) memcpy(emu_dyn_smem + dst, src, bytes);
    else memset(emu_dyn_smem + dst, 0, bytes);
  });
}
static void emu_cp_commit() { emu_cp[threadIdx.x].commit(); }
static void emu_cp_wait(int pending) { emu_cp[threadIdx.x].wait(pending); }
static void emu_cp4(unsigned dst, const void* src, bool ok) { emu_cp_async(dst, src, ok, 4); }
// ldmatrix: lane l's register q is the pair of halves of matrix q at (row l / 4, cols 2 (l % 4), +1) --
// transposed: (rows 2 (l % 4), +1, col l / 4) -- where row r of matrix q starts at the address lane 8 q + r gave.
static inline size_t __cvta_generic_to_shared(const void* p) {
  return (size_t)((const unsigned char*)p - emu_dyn_smem);
}
static void emu_cp16(unsigned dst, const void* src, bool ok) { emu_cp_async(dst, src, ok, 16); }
static unsigned emu_ldsm_addr[32][32];
static void emu_ldsm(unsigned addr, unsigned* r, bool trans) {
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  emu_ldsm_addr[w][lane] = addr;
  __syncwarp();
  unsigned out[4];
  for (unsigned q = 0; q < 4; ++q) {
    uint16_t lo, hi;
    if (!trans) {
      const unsigned char* row = emu_dyn_smem + emu_ldsm_addr[w][q * 8 + lane / 4];
      memcpy(&lo, row + 4 * (lane % 4), 2);
      memcpy(&hi, row + 4 * (lane % 4) + 2, 2);
    } else {
      memcpy(&lo, emu_dyn_smem + emu_ldsm_addr[w][q * 8 + 2 * (lane % 4)] + 2 * (lane / 4), 2);
      memcpy(&hi, emu_dyn_smem + emu_ldsm_addr[w][q * 8 + 2 * (lane % 4) + 1] + 2 * (lane / 4), 2);
    }
    out[q] = lo | ((unsigned)hi << 16);
  }
  __syncwarp();
  for (unsigned q = 0; q < 4; ++q) r[q] = out[q];
}
// wgmma.mma_async.m64nNk16 (bf16, fp32 accumulation) from two shared-memory descriptors, 128-byte swizzle
// (physical address = logical ^ (bits 7-9 << 4)): A k-major at (row / 8) SBO + (row % 8) 128 + 2 k; B k-major
// likewise, or MN-major (tnsp) at (n / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (n % 64). Thread t of the warp
// group holds rows 16 (t / 32) + (t % 32) / 4 (+ 8), register 4 j + 2 h + q = column 8 j + 2 (t % 4) + q.
static float emu_smem_bf16(unsigned logical) {
  const unsigned phys = logical ^ (((logical >> 7) & 7u) << 4);
  uint16_t v;
  memcpy(&v, emu_dyn_smem + phys, 2);
  const uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
// A warp group's MMAs run when a wait_group retires their commit group, as late as the hardware may read
// shared memory: a kernel that hands a stage back before then sees it overwritten.
static emu_async_queue emu_wg[1024];
static void emu_wg_commit() { emu_wg[threadIdx.x].commit(); }
static void emu_wg_wait_any(int pending);  // (below: A operands in registers)
static void emu_wg_wait(int pending) { emu_wg_wait_any(pending); }
static void emu_wgmma_now(float* d, unsigned long long da, unsigned long long db, int n_cols, int tnsp) {
  const unsigned t = threadIdx.x % 128, lane = t % 32, warp = t / 32;
  const unsigned a0 = (unsigned)(da & 0x3FFF) << 4, asbo = (unsigned)((da >> 32) & 0x3FFF) << 4;
  const unsigned b0 = (unsigned)(db & 0x3FFF) << 4, blbo = (unsigned)((db >> 16) & 0x3FFF) << 4;
  const unsigned bsbo = (unsigned)((db >> 32) & 0x3FFF) << 4;
  for (int j = 0; j < n_cols / 8; ++j)
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < 2; ++q) {
        const unsigned row = warp * 16 + lane / 4 + 8 * h, col = 8 * j + 2 * (lane % 4) + q;
        double sum = d[4 * j + 2 * h + q];
        for (unsigned k = 0; k < 16; ++k) {
          const float a = emu_smem_bf16(a0 + (row / 8) * asbo + (row % 8) * 128 + 2 * k);
          const float b = tnsp ? emu_smem_bf16(b0 + (col / 64) * blbo + (k / 8) * bsbo + (k % 8) * 128 + 2 * (col % 64))
                               : emu_smem_bf16(b0 + (col / 8) * bsbo + (col % 8) * 128 + 2 * k);
          sum += (double)a * (double)b;
        }
        d[4 * j + 2 * h + q] = (float)sum;
      }
}
static void emu_wgmma(float* d, unsigned long long da, unsigned long long db, int n_cols, int tnsp) {
  emu_wg[threadIdx.x].open.push_back([=]() { emu_wgmma_now(d, da, db, n_cols, tnsp); });
}
// wgmma.mma_async.m64nNk8.tf32 (both operands k-major, 128-byte swizzle): A at (row / 8) SBO + (row % 8) 128 +
// 4 k, B at (col / 8) SBO + (col % 8) 128 + 4 k; the unit reads 19 bits of each; scale-d = 0 drops d.
static float emu_smem_tf32(unsigned logical) {
  const unsigned phys = logical ^ (((logical >> 7) & 7u) << 4);
  unsigned v;
  memcpy(&v, emu_dyn_smem + phys, 4);
  return __uint_as_float(v & 0xffffe000u);
}
// One thread's share of an m64nNk8 TF32 MMA, A(row, k) from `a` (shared memory or registers), B k-major.
template <class ReadA>
static void emu_wgmma_tf32_rows(float* d, ReadA a, unsigned long long db, int n_cols, int accumulate) {
  const unsigned t = threadIdx.x % 128, lane = t % 32, warp = t / 32;
  const unsigned b0 = (unsigned)(db & 0x3FFF) << 4, bsbo = (unsigned)((db >> 32) & 0x3FFF) << 4;
  for (int j = 0; j < n_cols / 8; ++j)
    for (int h = 0; h < 2; ++h)
      for (int q = 0; q < 2; ++q) {
        const unsigned row = warp * 16 + lane / 4 + 8 * h, col = 8 * j + 2 * (lane % 4) + q;
        double sum = accumulate ? d[4 * j + 2 * h + q] : 0.0;
        for (unsigned k = 0; k < 8; ++k)
          sum += (double)a(row, k) * (double)emu_smem_tf32(b0 + (col / 8) * bsbo + (col % 8) * 128 + 4 * k);
        d[4 * j + 2 * h + q] = (float)sum;
      }
}
static void emu_wgmma_tf32_now(float* d, unsigned long long da, unsigned long long db, int n_cols, int accumulate) {
  const unsigned a0 = (unsigned)(da & 0x3FFF) << 4, asbo = (unsigned)((da >> 32) & 0x3FFF) << 4;
  const auto a = [=](unsigned row, unsigned k) {
    return emu_smem_tf32(a0 + (row / 8) * asbo + (row % 8) * 128 + 4 * k);
  };
  emu_wgmma_tf32_rows(d, a, db, n_cols, accumulate);
}
static void emu_wgmma_tf32(float* d, unsigned long long da, unsigned long long db, int n_cols, int accumulate) {
  emu_wg[threadIdx.x].open.push_back([=]() { emu_wgmma_tf32_now(d, da, db, n_cols, accumulate); });
}
// The same MMA with A in registers: register v of thread t (warp w, lane l) holds A(16 w + l / 4 + 8 (v & 1),
// l % 4 + 4 (v >> 1)). The MMA reads the issuing threads' registers when it runs, as late as the wait that
// retires it: the warp group meets before and after that wait (the instructions are .sync.aligned), so every
// thread's registers are read as they stand at the wait, and one overwritten before it is caught.
static std::map<std::pair<unsigned, long>, std::array<const unsigned*, 128>> emu_rs_a;
static long emu_rs_seq[1024];
static bool emu_rs_pending[1024];
static emu_barrier emu_wg_bars[8];
static void emu_wg_sync() {
  emu_barrier& b = emu_wg_bars[threadIdx.x / 128];
  b.need = 128;
  emu_wait(b);
}
static void emu_wgmma_tf32_rs_now(float* d, unsigned group, long seq, unsigned long long db, int n_cols,
                                  int accumulate) {
  const std::array<const unsigned*, 128>& regs = emu_rs_a.at({group, seq});
  const auto a = [&](unsigned row, unsigned k) {
    const unsigned owner = (row / 16) * 32 + (row % 8) * 4 + k % 4, reg = ((row % 16) >= 8) + 2 * (k >= 4);
    return __uint_as_float(regs[owner][reg] & 0xffffe000u);
  };
  emu_wgmma_tf32_rows(d, a, db, n_cols, accumulate);
}
static void emu_wgmma_tf32_rs(float* d, const unsigned* a, unsigned long long db, int n_cols, int accumulate) {
  const unsigned group = threadIdx.x / 128;
  const long seq = emu_rs_seq[threadIdx.x]++;
  emu_rs_a[{group, seq}][threadIdx.x % 128] = a;
  emu_rs_pending[threadIdx.x] = true;
  emu_wg[threadIdx.x].open.push_back([=]() { emu_wgmma_tf32_rs_now(d, group, seq, db, n_cols, accumulate); });
}
static void emu_wg_wait_any(int pending) {
  const bool rs = emu_rs_pending[threadIdx.x];
  if (rs) emu_wg_sync();
  emu_wg[threadIdx.x].wait(pending);
  if (rs) {
    emu_wg_sync();
    emu_rs_pending[threadIdx.x] = !emu_wg[threadIdx.x].groups.empty() || !emu_wg[threadIdx.x].open.empty();
  }
}
// Named barriers (bar.sync id, count): the first `count` threads to arrive pass together.
static emu_barrier emu_named_bars[16];
static void emu_named_sync(int id, unsigned count) {
  emu_barrier& b = emu_named_bars[id];
  b.need = (int)count;
  emu_wait(b);
}
// mbarriers (by shared-memory address): a phase ends when its arrivals and its expected copy bytes are all in.
// Bulk copies land when a thread first tests the barrier they complete on (a read before the wait sees poison).
struct emu_bulk { unsigned char* dst; const void* src; unsigned bytes; };
struct emu_mbar {
  int need = 0, pending = 0;
  long tx = 0;
  unsigned phase = 0;  // phases completed
  std::vector<emu_bulk> copies;
};
// each block of a cluster has its own barriers at the same shared-memory addresses
static std::map<unsigned, emu_mbar> emu_mbars_by_key;
struct emu_mbar_table {
  emu_mbar& operator[](unsigned bar) { return emu_mbars_by_key[bar | (emu_rank << 20)]; }
  emu_mbar& at(unsigned bar) { return emu_mbars_by_key.at(bar | (emu_rank << 20)); }
};
static emu_mbar_table emu_mbars;
static void emu_mbar_init(unsigned bar, unsigned count) { emu_mbars[bar] = emu_mbar{(int)count, (int)count, 0, 0, {}}; }
static void emu_mbar_step(emu_mbar& b) {
  emu_progress = true;
  if (b.pending == 0 && b.tx == 0) {
    ++b.phase;
    b.pending = b.need;
  }
}
static void emu_mbar_arrive(unsigned bar) {
  emu_mbar& b = emu_mbars.at(bar);
  --b.pending;
  emu_mbar_step(b);
}
static void emu_mbar_expect(unsigned bar, unsigned bytes) {
  emu_mbar& b = emu_mbars.at(bar);
  b.tx += bytes;
  --b.pending;
  emu_mbar_step(b);
}
static bool emu_mbar_try(unsigned bar, unsigned parity) {
  emu_mbar& m = emu_mbars.at(bar);
  if (!m.copies.empty()) {
    for (const emu_bulk& c : m.copies) memcpy(c.dst, c.src, c.bytes);
    for (const emu_bulk& c : m.copies) m.tx -= c.bytes;
    m.copies.clear();
    emu_mbar_step(m);
  }
  if ((m.phase & 1u) != parity) return true;  // the phase of that parity is over
  emu_yield();
  return false;
}
// A 2-D TMA copy of the emulated tensor map (the test's optiml_tma.h): the box at (c0, c1), zeros outside the
// tensor, 128-byte swizzle applied to the shared-memory address; its bytes then complete on the barrier.
static void emu_tma_load(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
  const unsigned long long* m = (const unsigned long long*)map;
  const unsigned char* base = (const unsigned char*)(uintptr_t)m[0];
  const long d0 = (long)m[1], d1 = (long)m[2], stride = (long)m[3], b0 = (long)m[4], b1 = (long)m[5];
  const long size = (long)m[7];
  for (long i1 = 0; i1 < b1; ++i1)
    for (long i0 = 0; i0 < b0; ++i0) {
      const unsigned logical = dst + (unsigned)((i1 * b0 + i0) * size);
      const unsigned phys = m[6] == 3 ? logical ^ (((logical >> 7) & 7u) << 4) : logical;
      const long x = c0 + i0, y = c1 + i1;
      if (x >= 0 && y >= 0 && x < d0 && y < d1) memcpy(emu_dyn_smem + phys, base + y * stride + x * size, size);
      else memset(emu_dyn_smem + phys, 0, size);
    }
  emu_mbar& b = emu_mbars.at(bar);
  b.tx -= b0 * b1 * size;
  emu_mbar_step(b);
}
static void emu_sts(unsigned addr, const unsigned* v, int n) { memcpy(emu_dyn_smem + addr, v, 4 * n); }
// cp.async.bulk global -> shared: both ends 16-byte aligned, a multiple of 16 bytes
static void emu_bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  if ((dst | (unsigned)(uintptr_t)src | bytes) & 15u || dst + bytes > emu_dyn_bytes) {
    fprintf(stderr, "EMU: bulk copy of %u B to %u misaligned or out of shared memory\n", bytes, dst);
    emu_die(6);
  }
  emu_mbars.at(bar).copies.push_back(emu_bulk{emu_dyn_smem + dst, src, bytes});
}
// mapa: the same shared variable in block `rank` of the cluster
template <class T> static T* emu_cluster_map(T* p, unsigned rank) {
  const size_t at = (size_t)((unsigned char*)p - emu_dyn_smem);
  if (at >= sizeof(emu_smem_banks[0]) || rank >= 8) {
    fprintf(stderr, "EMU: mapa of a non-shared address\n");
    emu_die(6);
  }
  return (T*)(emu_smem_banks[rank] + at);
}
static void emu_mma_bf16(float* c, const unsigned* a, const unsigned* b) {
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int q = 0; q < 4; ++q) emu_mma_a[w][lane][q] = a[q];
  for (int q = 0; q < 2; ++q) emu_mma_b[w][lane][q] = b[q];
  __syncwarp();
  float out[4];
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + (e % 2);
    double sum = c[e];
    for (unsigned k = 0; k < 16; ++k) {
      const unsigned av = emu_mma_a[w][(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)] >> (16 * (k & 1));
      const unsigned bv = emu_mma_b[w][col * 4 + (k % 8) / 2][k >= 8] >> (16 * (k & 1));
      sum += (double)emu_bf16(av) * (double)emu_bf16(bv);
    }
    out[e] = (float)sum;
  }
  __syncwarp();
  for (int q = 0; q < 4; ++q) c[q] = out[q];
}
"""
BF16_MOCK = r"""
#pragma once
#include <cstdint>
#include <cstring>
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = (uint32_t)h.x << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {(uint16_t)(u >> 16)};
}
"""
TMA_MOCK = r"""
#pragma once
// The emulator's tensor map: base, dims, the row's byte stride, box, swizzle and element size in opaque[0..7].
#include <cstdint>
#include <cstring>
typedef struct __attribute__((aligned(128))) {
  unsigned long long opaque[16];
} optiml_tensor_map;
enum { OPTIML_TMA_FLOAT16 = 6, OPTIML_TMA_FLOAT32 = 7, OPTIML_TMA_BFLOAT16 = 9 };
enum { OPTIML_TMA_SWIZZLE_NONE = 0, OPTIML_TMA_SWIZZLE_64B = 2, OPTIML_TMA_SWIZZLE_128B = 3 };
static inline int optiml_tensor_map_encode(optiml_tensor_map* map, int dtype, unsigned rank, const void* base,
                                           const uint64_t* dims, const uint64_t* strides, const unsigned* box,
                                           int swizzle) {
  const unsigned size = dtype == OPTIML_TMA_FLOAT32 ? 4 : 2;
  // the driver's rules for what the kernels use
  if (rank != 2 || ((uintptr_t)base & 15) || strides[0] % 16 || box[0] * size > 128 || box[1] > 256) return 1;
  memset(map, 0, sizeof *map);
  const unsigned long long fields[8] = {(uintptr_t)base, dims[0], dims[1], strides[0], box[0], box[1],
                                        (unsigned long long)swizzle, size};
  memcpy(map->opaque, fields, sizeof fields);
  return 0;
}
"""
PTX_MOCK = r"""
#pragma once
// The emulator's optiml_ptx.h: each building block of the shipped header (optiml.templates.ptx), by name,
// as the emulator's model of its instruction. optiml_mma_f16 and the fp16 wgmma are not modelled (a kernel
// calling them does not build here).
#include <cuda_runtime.h>
static inline void optiml_cp16(unsigned dst, const void* src, bool ok) { emu_cp16(dst, src, ok); }
static inline void optiml_cp4(unsigned dst, const void* src, bool ok) { emu_cp4(dst, src, ok); }
static inline void optiml_cp_commit() { emu_cp_commit(); }
template <int N>
static inline void optiml_cp_wait() { emu_cp_wait(N); }
static inline void optiml_ldsm(unsigned addr, unsigned* r) { emu_ldsm(addr, r, false); }
static inline void optiml_ldsm_t(unsigned addr, unsigned* r) { emu_ldsm(addr, r, true); }
static inline void optiml_mma_bf16(float* c, const unsigned* a, const unsigned* b) { emu_mma_bf16(c, a, b); }
static inline unsigned optiml_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
static inline float optiml_round_tf32(float x) { return x != x ? x : __uint_as_float(optiml_tf32(x)); }
static inline void optiml_split(float x, unsigned& big, unsigned& small) {
  big = optiml_tf32(x);
  small = optiml_tf32(x - __uint_as_float(big));
}
static inline void optiml_mma8(float* c, const unsigned* a, const unsigned* b) { emu_mma_tf32(c, a, b); }
static inline unsigned long long optiml_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
static inline void optiml_wg_fence() {}
static inline void optiml_wg_commit() { emu_wg_commit(); }
template <int N>
static inline void optiml_wg_wait() { emu_wg_wait(N); }
static inline void optiml_proxy_fence() {}
static inline void optiml_sts16(unsigned addr, unsigned x, unsigned y, unsigned z, unsigned w) {
  const unsigned v[] = {x, y, z, w};
  emu_sts(addr, v, 4);
}
static inline void optiml_sts4(unsigned addr, unsigned x) { emu_sts(addr, &x, 1); }
template <int N, int TRANS_B>
static inline void optiml_wgmma_bf16(float* d, unsigned long long da, unsigned long long db) {
  emu_wgmma(d, da, db, N, TRANS_B);
}
template <int N>
static inline void optiml_wgmma_tf32(float* d, unsigned long long da, unsigned long long db, int accumulate) {
  emu_wgmma_tf32(d, da, db, N, accumulate);
}
template <int N>
static inline void optiml_wgmma_tf32_rs(float* d, const unsigned* a, unsigned long long db, int accumulate) {
  emu_wgmma_tf32_rs(d, a, db, N, accumulate);
}
static inline void optiml_mbar_init(unsigned bar, unsigned count) { emu_mbar_init(bar, count); }
static inline void optiml_mbar_init_fence() {}
static inline bool optiml_mbar_try(unsigned bar, unsigned parity) { return emu_mbar_try(bar, parity); }
static inline void optiml_mbar_wait(unsigned bar, unsigned parity) {
  while (!optiml_mbar_try(bar, parity)) {
  }
}
static inline void optiml_mbar_arrive(unsigned bar) { emu_mbar_arrive(bar); }
static inline void optiml_mbar_expect(unsigned bar, unsigned bytes) { emu_mbar_expect(bar, bytes); }
static inline void optiml_tma_load(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
  emu_tma_load(dst, map, c0, c1, bar);
}
static inline void optiml_bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  emu_bulk_load(dst, src, bytes, bar);
}
static inline void optiml_cluster_sync() { emu_cluster_wait(); }
template <class T>
static inline T* optiml_cluster_map(T* p, unsigned rank) { return emu_cluster_map(p, rank); }
template <int N>
static inline void optiml_regs_dec() {}
template <int N>
static inline void optiml_regs_inc() {}
template <int ID>
static inline void optiml_named_sync(unsigned count) { emu_named_sync(ID, count); }
"""
GXX = (
    "g++",
    "-std=c++17",
    "-O1",
    "-shared",
    "-fPIC",
    "-fno-strict-aliasing",
    "-Wall",
    "-Wno-unknown-pragmas",
    "-Wno-unused-function",
    "-Wno-unused-variable",
    "-Wno-unused-but-set-variable",
    # a cached row register is written and read under the same run-time guard (e < R2), which g++'s
    # flow analysis cannot pair up in kernels with boolean reductions: a false positive
    "-Wno-maybe-uninitialized",
    # each library keeps its own kernels and its own emulator state: one test process loads many libraries that
    # define the same names (g0_kernel, the emulator's inline functions and their static locals, which g++ makes
    # process-wide "unique" symbols), and a later library's call could run on an earlier one's fibers (a col_split
    # kernel died after a split_row library had run, 2026-12-06)
    "-Wl,-Bsymbolic",
    "-fno-gnu-unique",
    *EMULATOR_SANITIZERS,
)


def emulated_library(folder: Path, units: list[str]) -> Path:
    """The units built for the emulator; ``case{k}_forward`` runs unit k."""
    host = to_host_code(combined(units))
    assert not re.search(r"\basm\b", host), "PTX outside optiml_ptx.h: the emulator models the header's functions only"
    mock = folder / "mock"
    mock.mkdir(parents=True, exist_ok=True)
    (mock / "cuda_runtime.h").write_text(EMULATOR + EXTRAS)
    (mock / "cuda_bf16.h").write_text(BF16_MOCK)
    (mock / "optiml_tma.h").write_text(TMA_MOCK)
    (mock / "optiml_ptx.h").write_text(PTX_MOCK)
    cpp, lib = folder / "emu.cpp", folder / "emu.so"
    cpp.write_text(host)
    build = subprocess.run(
        [*GXX, f"-I{mock}", f"-I{include_dir()}", "-o", str(lib), str(cpp)], capture_output=True, text=True, timeout=300
    )
    assert build.returncode == 0, build.stderr[-4000:]
    assert "warning" not in build.stderr, build.stderr[-4000:]
    return lib


_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.int64: 5, torch.bool: 8}


_LIBC = ctypes.CDLL(None, use_errno=True)
_PROT_NONE = 0


def _shared(numel: int, dtype: Any, offset: int = 0) -> np.ndarray:
    """An array in memory shared with forked children, ``offset`` bytes past a 16-byte boundary and ending
    less than 16 bytes before an inaccessible page: a read or write a pack or more past its end dies."""
    nbytes = numel * np.dtype(dtype).itemsize
    page = mmap.PAGESIZE
    end = -(-(nbytes + offset + 16) // page) * page  # the guard page starts here
    memory = mmap.mmap(-1, end + page)
    guard = ctypes.addressof(ctypes.c_char.from_buffer(memory)) + end
    if _LIBC.mprotect(ctypes.c_void_p(guard), ctypes.c_size_t(page), _PROT_NONE) != 0:
        raise OSError(ctypes.get_errno(), "mprotect of the emulator's guard page")
    start = (end - nbytes - offset) // 16 * 16 + offset
    return np.frombuffer(memory, dtype=dtype, count=numel, offset=start)


def _descriptor(array: np.ndarray, shape: tuple[int, ...], code: int) -> _Tensor:
    t = _Tensor()
    t.data, t.ndim, t.dtype = array.ctypes.data, len(shape), code
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        t.shape[d], t.stride[d] = shape[d], stride
        stride *= shape[d]
    return t


def _bits(t: torch.Tensor) -> np.ndarray:
    t = t.contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16).reshape(-1)
    return t.numpy().reshape(-1)


def from_bits(bits: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """:func:`_bits` undone: an emulated output as numbers (half precision comes back as its 16-bit words)."""
    if dtype == torch.bfloat16:
        return (bits.astype(np.uint32) << 16).view(np.float32)
    if dtype == torch.float16:
        return bits.view(np.float16)
    return bits


def run_emulated(
    lib: Path, k: int, inputs: list[torch.Tensor], outputs: list[torch.Tensor], offset: int = 0
) -> list[np.ndarray]:
    """Call unit ``k`` in a forked child on copies of ``inputs``; returns the outputs as flat arrays."""
    handle = ctypes.CDLL(str(lib))
    ins, in_arrays = [], []  # the arrays must outlive the call: descriptors only point at them
    for t in inputs:
        flat = _bits(t)
        array = _shared(flat.size, flat.dtype, offset)
        array[:] = flat
        in_arrays.append(array)
        ins.append(_descriptor(array, tuple(t.shape), _CODES[t.dtype]))
    outs, out_arrays = [], []
    for t in outputs:
        flat = _bits(t)
        array = _shared(flat.size, flat.dtype)
        array.view(np.uint8)[:] = 0xFF  # poison: NaN
        out_arrays.append(array)
        outs.append(_descriptor(array, tuple(t.shape), _CODES[t.dtype]))
    tin, tout = (_Tensor * len(ins))(*ins), (_Tensor * len(outs))(*outs)
    ws_bytes = 0
    if hasattr(handle, f"case{k}_workspace"):
        fn = getattr(handle, f"case{k}_workspace")
        fn.restype = ctypes.c_size_t
        ws_bytes = int(fn(tin, len(ins)))
    workspace = _shared(ws_bytes, np.uint8)
    workspace[:] = 0xFF
    status = _shared(1, np.int64)
    status[0] = -999
    forward = getattr(handle, f"case{k}_forward")
    forward.restype = ctypes.c_int
    args = (tin, len(ins), tout, len(outs), ctypes.c_void_p(workspace.ctypes.data), ctypes.c_size_t(ws_bytes), None)
    pid = os.fork()
    if pid == 0:  # the child: any crash or emulator exit stays here
        faulthandler.disable()  # a fault is the parent's finding: no interpreter traceback from the child
        try:
            status[0] = forward(*args)
        finally:
            os._exit(0)
    _, code = os.waitpid(pid, 0)
    del in_arrays
    assert code == 0, f"the emulated call died (wait status {code})"
    assert status[0] == 0, f"optiml_forward returned {status[0]}"
    return out_arrays


# (task, configs): each config runs at every shape set of the task; "misaligned" also runs shape set 1
# (aligned sizes) with every input 4 bytes off a 16-byte boundary (the scalar fallback)
FP32_CASES: list[tuple[str, list[GroupConfig]]] = [
    (
        "mm",
        [
            GroupConfig.of("simt", bm=128, bn=128, bk=8, tm=8, tn=8),
            GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=4, tn=4),
            GroupConfig.of("simt", bm=32, bn=32, bk=8, tm=4, tn=4),
            GroupConfig.of("gemv", threads=128, rows=16),
        ],
    ),
    (
        "mm_tn",
        [
            GroupConfig.of("simt", bm=128, bn=64, bk=16, tm=8, tn=8),
            GroupConfig.of("simt", bm=32, bn=64, bk=8, tm=4, tn=4),
        ],
    ),
    ("mm_nt", [GroupConfig.of("simt", bm=64, bn=128, bk=8, tm=4, tn=8), GroupConfig.of("gemv", threads=256, rows=2)]),
    ("mm_tt", [GroupConfig.of("simt", bm=64, bn=32, bk=32, tm=8, tn=4)]),
    ("bcast", [GroupConfig.of("simt", bm=32, bn=32, bk=16, tm=4, tn=4), GroupConfig.of("gemv", threads=128, rows=8)]),
    ("linear_relu", [GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)]),
    ("linear3d_gelu_res", [GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)]),
    # a batch of row-major A against one B folded into one GEMM of batch * M rows
    ("linear_seq_first", [GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)]),
    ("addmm", [GroupConfig.of("simt", bm=32, bn=64, bk=8, tm=4, tn=8)]),
    ("recomputed_leaf", [GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8)]),
    ("gemv", [GroupConfig.of("gemv", threads=256, rows=1), GroupConfig.of("gemv", threads=128, rows=4)]),
    ("small_m_linear", [GroupConfig.of("gemv", threads=256, rows=4), GroupConfig.of("gemv", threads=128, rows=1)]),
    ("small_m_mm", [GroupConfig.of("gemv", threads=128, rows=2)]),
    ("mm_rowsum", [GroupConfig.of("simt", bm=32, bn=32, bk=16, tm=4, tn=4)]),  # product -> workspace -> row sum
    ("mm_scaled", [GroupConfig.of("simt", bm=32, bn=32, bk=8, tm=4, tn=4)]),
    (
        "deep_k",
        [
            GroupConfig.of("simt", bm=32, bn=32, bk=8, tm=4, tn=4),
            GroupConfig.of("simt", bm=64, bn=64, bk=16, tm=8, tn=8),
        ],
    ),
    ("two_outputs", [GroupConfig.of("simt", bm=64, bn=64, bk=8, tm=8, tn=4)]),
    ("mlp", [GroupConfig.of("simt", bm=32, bn=64, bk=16, tm=4, tn=8)]),
    # 3xTF32 tensor cores: every operand order, both copy widths (odd shape sets take the 4-byte build)
    (
        "mm",
        [
            GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2, stages=3),
            GroupConfig.of("tf32x3", bm=128, bn=64, bk=32, wm=2, wn=2, stages=2),
        ],
    ),
    ("mm_tn", [GroupConfig.of("tf32x3", bm=64, bn=128, bk=16, wm=1, wn=4, stages=4)]),
    ("mm_nt", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=32, wm=2, wn=1, stages=3)]),
    ("mm_tt", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2, stages=2)]),
    ("bcast", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2, stages=3)]),
    ("linear3d_gelu_res", [GroupConfig.of("tf32x3", bm=64, bn=64, bk=32, wm=2, wn=2, stages=3)]),
    # few tiles, long K: split into slices summed by the split-K kernel (the emulator's 4 SMs)
    (
        "deep_k",
        [
            GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2, stages=3),
            GroupConfig.of("tf32x3", bm=64, bn=128, bk=32, wm=2, wn=2, stages=2),
        ],
    ),
    # 3xTF32 on warp-group MMAs: every operand order (m- and n-major ones transposed into shared memory),
    # one and two warp groups, batches, split-K; misaligned operands take the mma.sync 4-byte build
    (
        "mm",
        [GroupConfig.of("tf32x3_wgmma", bm=64, bn=64), GroupConfig.of("tf32x3_wgmma", bm=128, bn=128)],
    ),
    ("mm_tn", [GroupConfig.of("tf32x3_wgmma", bm=128, bn=64)]),
    ("mm_nt", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=128)]),
    ("mm_tt", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)]),
    ("bcast", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)]),
    ("linear3d_gelu_res", [GroupConfig.of("tf32x3_wgmma", bm=128, bn=64)]),
    ("deep_k", [GroupConfig.of("tf32x3_wgmma", bm=64, bn=128)]),
    # 3xTF32 fed by TMA (A k-major): B n-major (transposed by the split) and k-major, one and two consumer warp
    # groups, fewer stages than slices (the rings wrap), split-K; a batch and misaligned operands take the
    # mma.sync builds of the same tile
    (
        "mm",
        [GroupConfig.of("tf32x3_tma", bm=64, bn=64, stages=2), GroupConfig.of("tf32x3_tma", bm=128, bn=128, stages=3)],
    ),
    (
        "mm_nt",
        [GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=4), GroupConfig.of("tf32x3_tma", bm=64, bn=128, stages=2)],
    ),
    ("bcast", [GroupConfig.of("tf32x3_tma", bm=64, bn=64, stages=3)]),
    ("linear3d_gelu_res", [GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=2)]),
    ("linear_seq_first", [GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=2)]),
    ("deep_k", [GroupConfig.of("tf32x3_tma", bm=64, bn=128, stages=3)]),
    (
        "nt_deep",
        [GroupConfig.of("tf32x3_tma", bm=128, bn=64, stages=3), GroupConfig.of("tf32x3_tma", bm=64, bn=64, stages=4)],
    ),
]
MISALIGNED = {"mm": 1, "mm_nt": 1, "gemv": 2}  # task -> an aligned shape set it also runs misaligned
BF16_CASES: list[tuple[str, list[GroupConfig]]] = [
    (
        "h_mm_relu",
        [
            GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=4),
            GroupConfig.of("mma", bm=128, bn=64, bk=32, wm=4, wn=1, stages=2),
        ],
    ),
    ("h_mm_nt", [GroupConfig.of("mma", bm=64, bn=128, bk=32, wm=2, wn=2, stages=3)]),
    # warp-group MMA: B k-major (nt) and B read transposed (nn), one and two warp groups
    ("h_mm_nt", [GroupConfig.of("wgmma", bm=64, bn=64, stages=2), GroupConfig.of("wgmma", bm=128, bn=128, stages=3)]),
    ("h_mm_relu", [GroupConfig.of("wgmma", bm=64, bn=128, stages=4), GroupConfig.of("wgmma", bm=128, bn=64, stages=2)]),
    # two batch dims, B k-major through the keys' transpose: the wgmma kernel (a batch is not TMA's)
    (
        "h_qk",
        [
            GroupConfig.of("wgmma_tma", bm=64, bn=64, stages=3),
            GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=3),
        ],
    ),
    # TMA copies and a producer warp group: B k-major and transposed, one and two consumer warp groups, fewer
    # stages than slices (the rings wrap); odd shape sets take the scalar build
    (
        "h_mm_nt",
        [GroupConfig.of("wgmma_tma", bm=64, bn=64, stages=3), GroupConfig.of("wgmma_tma", bm=128, bn=128, stages=4)],
    ),
    (
        "h_mm_relu",
        [GroupConfig.of("wgmma_tma", bm=128, bn=64, stages=3), GroupConfig.of("wgmma_tma", bm=64, bn=192, stages=3)],
    ),
    ("h_mm_tt", [GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=1, wn=2, stages=4)]),
    (
        "h_gemv",
        [GroupConfig.of("gemv", threads=128, rows=4), GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=2)],
    ),
]


def _check(tasks: dict[str, Task], lib: Path, cases: list[tuple[str, list[GroupConfig]]], exact: bool) -> list[str]:
    from optiml.evaluate.runtime import TaskRuntime

    failures = []
    k = 0
    for name, configs in cases:
        task = tasks[name]
        runtime = TaskRuntime(task, "cpu")
        for config in configs:
            for shape_set in range(task.num_shape_sets):
                case = runtime.case(7 + shape_set, shape_set)
                offsets = [0, 4] if MISALIGNED.get(name) == shape_set else [0]
                for offset in offsets:
                    got = run_emulated(lib, k, case.abi_inputs, case.expected, offset)
                    for g, want in zip(got, case.expected, strict=True):
                        label = f"{name} {config.label()} shape set {shape_set} offset {offset}"
                        if exact:
                            if not np.array_equal(g, _bits(want)):
                                bad = int(np.sum(g != _bits(want)))
                                failures.append(f"{label}: {bad} of {g.size} differ")
                        else:
                            ref = want.double().numpy().reshape(-1)
                            if not np.allclose(g, ref, rtol=1e-4, atol=1e-4):
                                failures.append(f"{label}: max error {np.nanmax(np.abs(g - ref))}")
            k += 1
    return failures


def _units(tasks: dict[str, Task], cases: list[tuple[str, list[GroupConfig]]]) -> list[str]:
    """One unit per (task, config): the GEMM kernel's config, every later kernel's default."""
    units = []
    for name, configs in cases:
        k = kernels_of(tasks, name, EMULATED)
        units += [with_gemm_config(k, c).code for c in configs]
    return units


def with_gemm_config(k: TemplateKernels, config: GroupConfig) -> KernelSource:
    """``k`` rendered with ``config`` for its (first) GEMM kernel, every other kernel's default."""
    at = next(i for i, group in enumerate(k.plan.groups) if group.template == "gemm")
    default = k.default()
    return k.render([*default[:at], config, *default[at + 1 :]])


@needs_gxx
def test_fp32_and_bf16_variants_match_torch_on_the_emulator(tasks: dict[str, Task], tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        fp32 = pool.submit(emulated_library, tmp_path / "fp32", _units(tasks, FP32_CASES))
        bf16 = pool.submit(emulated_library, tmp_path / "bf16", _units(tasks, BF16_CASES))
        fp32_lib, bf16_lib = fp32.result(), bf16.result()
    failures = _check(tasks, fp32_lib, FP32_CASES, exact=False)
    failures += _check(tasks, bf16_lib, BF16_CASES, exact=True)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_emulator_catches_a_wrong_kernel(tasks: dict[str, Task], tmp_path: Path) -> None:
    """Not vacuous: a SIMT kernel that drops the last k of each slice, and swapped mma fragments, are caught."""
    from optiml.evaluate.runtime import TaskRuntime

    simt = kernels_of(tasks, "mm", EMULATED).render([GroupConfig.of("simt", bm=32, bn=32, bk=8, tm=4, tn=4)]).code
    broken_simt = simt.replace("for (int kk = 0; kk < 8; ++kk)", "for (int kk = 0; kk < 7; ++kk)")
    config = GroupConfig.of("mma", bm=64, bn=64, bk=32, wm=2, wn=2, stages=3)
    mma = kernels_of(tasks, "h_mm_relu", EMULATED).render([config]).code
    # the pipelined build reads A's fragments from the wrong k half; the scalar build from the wrong row
    broken_vec = mma.replace("+ (lane >> 4) * 8) * 2u", "+ (lane >> 3) * 8) * 2u")
    broken_mma = broken_vec.replace(
        "fa[i][1] = *(const unsigned*)&As[buf][row + 8]", "fa[i][1] = *(const unsigned*)&As[buf][row + 1]"
    )
    assert broken_simt != simt and mma != broken_vec != broken_mma
    wgmma = kernels_of(tasks, "h_mm_relu", EMULATED).render([GroupConfig.of("wgmma", bm=64, bn=128, stages=3)]).code
    broken_wgmma = wgmma.replace("((cc ^ (k & 7)) << 4)", "((cc ^ (k & 3)) << 4)")  # B's swizzle off by a bit
    assert broken_wgmma != wgmma
    lib = emulated_library(tmp_path, [broken_simt, broken_mma, broken_wgmma])
    # shape set 0 (odd sizes) takes the scalar builds, set 1 (multiples of 8) the 16-byte ones
    cases = [(0, "mm", 0, False), (1, "h_mm_relu", 0, True), (1, "h_mm_relu", 1, True), (2, "h_mm_relu", 1, True)]
    for k, name, shape_set, fine in cases:
        case = TaskRuntime(tasks[name], "cpu").case(7, shape_set)
        (got,) = run_emulated(lib, k, case.abi_inputs, case.expected)
        want = _bits(case.expected[0]) if fine else case.expected[0].double().numpy().reshape(-1)
        matches = np.array_equal(got, want) if fine else np.allclose(got, want, rtol=1e-4, atol=1e-4)
        assert not matches, (name, shape_set)


@needs_gxx
def test_emulator_catches_a_tma_kernel_that_hands_a_stage_back_early(tasks: dict[str, Task], tmp_path: Path) -> None:
    """Not vacuous for the TMA kernel: a consumer that releases the stage it has just issued MMAs on (not the
    one before) lets the producer overwrite it before those MMAs read it, which the emulator's deferred MMAs
    see; a producer waiting on the wrong parity of the empty barrier never starts (a deadlock)."""
    from optiml.evaluate.runtime import TaskRuntime

    config = GroupConfig.of("wgmma_tma", bm=64, bn=64, stages=3)
    code = kernels_of(tasks, "h_mm_nt", EMULATED).render([config]).code
    early = code.replace("(unsigned)((kt - 1) % 3));", "(unsigned)(kt % 3));").replace("if (kt > 0 && (", "if ((")
    stuck = code.replace("((unsigned)(kt / 3) & 1u) ^ 1u);", "(unsigned)(kt / 3) & 1u);")
    assert len({code, early, stuck}) == 3
    lib = emulated_library(tmp_path, [early, stuck])
    case = TaskRuntime(tasks["h_mm_nt"], "cpu").case(7, 4)  # six k slices through three stages
    (got,) = run_emulated(lib, 0, case.abi_inputs, case.expected)
    assert not np.array_equal(got, _bits(case.expected[0]))
    with pytest.raises(AssertionError, match="died"):
        run_emulated(lib, 1, case.abi_inputs, case.expected)


@needs_gxx
def test_a_tensor_map_the_driver_refuses_falls_back_to_the_cp_async_kernel(
    tasks: dict[str, Task], tmp_path: Path
) -> None:
    """Where encoding a tensor map fails (an old driver, a size TMA cannot address), the launch runs the
    ``wgmma`` kernel of the same tile instead of failing the call."""
    from optiml.evaluate.runtime import TaskRuntime

    code = kernels_of(tasks, "h_mm_relu", EMULATED).render([GroupConfig.of("wgmma_tma", bm=128, bn=64, stages=3)]).code
    refused = code.replace("if (optiml_tensor_map_encode(&ta", "if (1 + optiml_tensor_map_encode(&ta")
    assert refused != code
    lib = emulated_library(tmp_path, [refused])
    case = TaskRuntime(tasks["h_mm_relu"], "cpu").case(7, 4)
    (got,) = run_emulated(lib, 0, case.abi_inputs, case.expected)
    assert np.array_equal(got, _bits(case.expected[0]))


@needs_gxx
def test_emulator_catches_a_warp_group_tf32x3_kernel_with_a_wrong_layout_or_without_its_small_terms(
    tasks: dict[str, Task], tmp_path: Path
) -> None:
    """Not vacuous for the warp-group 3xTF32 kernel: a k-major chunk stored one swizzle bit off, an
    n-major operand transposed into the wrong word, and plain TF32 (the small terms dropped) all fail,
    on the 16-byte shape set (shape set 1) where that kernel runs."""
    from optiml.evaluate.runtime import TaskRuntime

    config = GroupConfig.of("tf32x3_wgmma", bm=64, bn=64)
    code = kernels_of(tasks, "mm", EMULATED).render([config]).code
    k_major = code.replace("((c ^ (r & 7)) << 4)", "((c ^ (r & 3)) << 4)")
    transposed = code.replace("+ (k & 3) * 4);", "+ ((k + 1) & 3) * 4);")
    # plain TF32: the slice's first MMA takes a_big . b_big, the other two go
    plain = re.sub(r"\n *optiml_wgmma_tf32<\d+>\(part, [^\n]*, 1\);", "", code)
    plain = plain.replace("_desc(a_small + ks", "_desc(a_big + ks")
    assert len({code, k_major, transposed, plain}) == 4
    lib = emulated_library(tmp_path, [k_major, transposed, plain])
    case = TaskRuntime(tasks["mm"], "cpu").case(8, 1)
    for k in range(3):
        (got,) = run_emulated(lib, k, case.abi_inputs, case.expected)
        want = case.expected[0].double().numpy().reshape(-1)
        assert not np.allclose(got, want, rtol=1e-4, atol=1e-4), k


@needs_gxx
def test_emulator_catches_a_tma_tf32x3_kernel_with_a_wrong_fragment_split_or_register_reuse(
    tasks: dict[str, Task], tmp_path: Path
) -> None:
    """Not vacuous for the TMA 3xTF32 kernel, on the 16-byte shape set where it runs: A fragments read one row
    off, a k-major B chunk split from the wrong raw chunk, an n-major one transposed from the wrong one, plain
    TF32 (the small terms dropped), and the next slice's A fragments loaded into registers that the MMAs in
    flight still read (the emulator reads A registers at the wait that retires the MMAs)."""
    from optiml.evaluate.runtime import TaskRuntime

    config = GroupConfig.of("tf32x3_tma", bm=64, bn=64, stages=2)
    mm = kernels_of(tasks, "mm", EMULATED).render([config]).code
    nt = kernels_of(tasks, "mm_nt", EMULATED).render([config]).code
    deep = (
        kernels_of(tasks, "deep_k", EMULATED)
        .render([config, *kernels_of(tasks, "deep_k", EMULATED).default()[1:]])
        .code
    )
    row = mm.replace("const int r = arow + 8 * (v & 1)", "const int r = arow + (v & 1)")
    k_major = nt.replace("*)(base + raw_b + at);", "*)(base + raw_b + (at ^ 16u));")  # the wrong raw chunk
    n_major = mm.replace("((((n & 31) >> 2) ^ (k & 7)) << 4)", "((((n & 31) >> 2) ^ (k & 3)) << 4)")
    plain = re.sub(r"\n *optiml_wgmma_tf32_rs<\d+>\(part, ab\[ks\], [^\n]*b_small[^\n]*\n", "\n", mm)
    plain = re.sub(r"(optiml_wgmma_tf32_rs<\d+>\(part, )as_(\[ks\], [^\n]*b_big)", r"\1ab\2", plain)
    # the wait and the partial's sum moved after the next slice's A fragments are loaded
    waited = re.search(
        r"\n( *\w+_wg_wait<0>\(\);\n#pragma unroll\n *for \(int i = 0; i < \d+; \+\+i\) acc\[i\] \+= part\[i\];)", deep
    )
    fragments = re.search(r"\n *if \(next < KT\) \{  // the MMAs are done.*?\n    \}\n", deep, re.S)
    assert waited and fragments
    early = deep.replace(waited.group(0), "").replace(fragments.group(0), fragments.group(0) + waited.group(1) + "\n")
    assert len({mm, row, k_major, n_major, plain, early}) == 6
    lib = emulated_library(tmp_path, [row, k_major, n_major, plain, early])
    for k, name in enumerate(("mm", "mm_nt", "mm", "mm", "deep_k")):  # deep_k: several k slices a block
        case = TaskRuntime(tasks[name], "cpu").case(8, 1)
        (got,) = run_emulated(lib, k, case.abi_inputs, case.expected)
        want = case.expected[0].double().numpy().reshape(-1)
        assert not np.allclose(got, want, rtol=1e-4, atol=1e-4), k


@needs_gxx
def test_emulator_catches_a_tf32x3_kernel_without_its_small_terms_or_with_a_wrong_fragment(
    tasks: dict[str, Task], tmp_path: Path
) -> None:
    """Not vacuous for 3xTF32: plain TF32 (the small terms dropped) misses fp32 accuracy, an A
    fragment read from the wrong k column is wrong outright, and so is an odd K padded with ones."""
    from optiml.evaluate.runtime import TaskRuntime

    config = GroupConfig.of("tf32x3", bm=64, bn=64, bk=16, wm=2, wn=2, stages=3)
    code = kernels_of(tasks, "mm", EMULATED).render([config]).code
    plain = re.sub(r"\w+_mma8\(part\[i\]\[j\], (as_, bb|ab, bs)\[j\]\);", "", code)
    shifted = code.replace("ks + t4 + 4)], ab[2]", "ks + t4)], ab[2]")
    # an odd K padded with ones instead of zeros (a @ b.T: both operands padded along k)
    nt = kernels_of(tasks, "mm_nt", EMULATED).render([config]).code
    ones = nt.replace("src[r * ld + c] : 0.f;", "src[r * ld + c] : 1.f;")
    assert code != plain and code != shifted and nt != ones
    lib = emulated_library(tmp_path, [plain, shifted, ones])
    for k, name in enumerate(("mm", "mm", "mm_nt")):
        runtime = TaskRuntime(tasks[name], "cpu")
        for shape_set in (0, 1) if k < 2 else (0,):  # odd sizes (padded copies), aligned (16-byte)
            case = runtime.case(7 + shape_set, shape_set)
            (got,) = run_emulated(lib, k, case.abi_inputs, case.expected)
            want = case.expected[0].double().numpy().reshape(-1)
            assert not np.allclose(got, want, rtol=1e-4, atol=1e-4), (k, shape_set)


def gpu_failures(
    tasks: dict[str, Task], cases: list[tuple[str, GroupConfig]], render: Any, tmp_path: Path
) -> list[str]:
    """Each (task, config) rendered by ``render(name, config)``, built, and run through the harness on the
    GPU at every shape set of its task: one line per failure (shared with the conv template's test)."""
    from optiml.evaluate.runtime import TaskRuntime

    built = Compiler(CompilerConfig(cache_dir=tmp_path / "cache")).compile_many([render(n, c) for n, c in cases])
    failures = []
    for (name, config), compiled in zip(cases, built, strict=True):
        failures += gpu_trial_failures(TaskRuntime(tasks[name], "cuda"), compiled, f"{name} {config.label()}")
    return failures


@pytest.mark.gpu
def test_every_variant_verifies_on_the_gpu(tasks: dict[str, Task], tmp_path: Path) -> None:
    """The emulator's cases through the harness on a real GPU (the H200's own tile plan), at every
    (odd) shape set: what the emulator cannot show, such as the tensor units' real layouts and
    rounding, and the warp-group MMAs' asynchrony."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")

    def render(name: str, config: GroupConfig) -> KernelSource:
        return with_gemm_config(kernels_of(tasks, name), config)

    cases = [(name, config) for name, configs in FP32_CASES + BF16_CASES for config in configs]
    failures = gpu_failures(tasks, cases, render, tmp_path)
    assert not failures, "\n".join(failures)
