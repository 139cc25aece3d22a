"""``torch.nn.functional`` as users write it, through capture → plan → render on the CPU.

Every element-wise, normalisation, loss and pooling call below (keyword arguments, ``eps`` clamps, ``expand_as``,
``keepdim``), and the compositions of ``torch`` beside them (``lerp``, ``addcmul``, ``logaddexp``, ``hypot``,
``nan_to_num``, rows picked by index, ``repeat``, pixel shuffles, reductions over a ``stack``, nearest
upsampling), must either plan and render, or be refused in one line that names the op; an ``internal:`` error or
a Python error escaping the pipeline is a bug. Those that plan are also run on the CPU emulator against torch, at
two shape sets.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.errors import TaskError, TemplateError

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

N, M, B, C, H, W = 12, 40, 2, 6, 10, 9
OPTIML = {{"shape_sets": [{{"N": 5, "M": 17, "B": 3, "C": 4, "H": 7, "W": 12}}]}}


class Model(nn.Module):
    def forward(self, {args}):
        return {body}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

# input kinds: x/y a float matrix (N, M); pr a probability matrix; t class targets (N,); img (B, C, H, W);
# w a per-channel weight (C,); v a per-column weight (M,); r row indices of x (7,)
_INPUTS = {
    "x": "torch.randn(N, M)",
    "y": "torch.randn(N, M)",
    "pr": "torch.rand(N, M) * 0.8 + 0.1",
    "q": "torch.softmax(torch.randn(N, M), dim=1)",
    "t": "torch.randint(0, M, (N,))",
    "s": "torch.randint(0, 2, (N,)).float() * 2 - 1",
    "img": "torch.randn(B, C, H, W)",
    "w": "torch.rand(C) + 0.5",
    "v": "torch.rand(M) + 0.5",
    "r": "torch.randint(0, N, (7,))",
}

ELEMENTWISE = [
    "F.relu(x)",
    "F.relu6(x * 4)",
    "F.leaky_relu(x, negative_slope=0.2)",
    "F.elu(x, alpha=0.7)",
    "F.selu(x)",
    "F.celu(x, alpha=1.5)",
    "F.gelu(x)",
    "F.gelu(x, approximate='tanh')",
    "F.silu(x)",
    "F.mish(x)",
    "F.softplus(x, beta=2.0, threshold=5.0)",
    "F.softsign(x)",
    "F.softshrink(x, lambd=0.3)",
    "F.hardshrink(x, lambd=0.3)",
    "F.tanhshrink(x)",
    "F.hardtanh(x, min_val=-0.5, max_val=0.5)",
    "F.hardsigmoid(x)",
    "F.hardswish(x)",
    "F.sigmoid(x)",
    "F.tanh(x)",
    "F.logsigmoid(x)",
    "F.threshold(x, 0.1, 20.0)",
    "F.glu(img, dim=1)",
    "F.prelu(img, w)",
    "F.dropout(x, p=0.5, training=False)",
    "F.relu(x * 1.5, inplace=True)",
    "F.rrelu(x, training=False)",
    "F.rrelu(x, lower=0.1, upper=0.4)",
    "F.rrelu(x, training=True)",
    "x * torch.sigmoid(y).sum(1, keepdim=True).expand_as(x)",
]

NORMALISATION = [
    "F.normalize(x, p=2.0, dim=1)",
    "F.normalize(x)",
    "F.normalize(x, dim=0)",
    "F.normalize(x, p=1.0, dim=-1, eps=1e-6)",
    "F.normalize(img, dim=1)",
    "x / x.norm(p=2, dim=1, keepdim=True).clamp(min=1e-12).expand_as(x)",
    "x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-5)",
    "F.softmax(x, dim=-1)",
    "F.log_softmax(x, dim=1)",
    "F.softmin(x, dim=1)",
    "F.softmax(x, dim=-1, dtype=torch.float32)",
    "torch.var(x, dim=1, keepdim=True, unbiased=False)",
    "F.batch_norm(img, None, None, training=True, momentum=0.1, eps=1e-5)",
    "F.layer_norm(x, (M,))",
    "F.layer_norm(x, (M,), weight=v, bias=v, eps=1e-6)",
    "F.rms_norm(x, (M,), eps=1e-6)",
    "F.group_norm(img, 2)",
    "F.instance_norm(img)",
    "F.batch_norm(img, w, w, weight=w, bias=w, training=False, eps=1e-3)",
    "F.local_response_norm(img, 3)",
    "F.cosine_similarity(x, y, dim=1, eps=1e-8)",
    "F.pairwise_distance(x, y, p=2.0, keepdim=True)",
]

LOSS = [
    "F.mse_loss(x, y)",
    "F.mse_loss(x, y, reduction='sum')",
    "F.l1_loss(x, y, reduction='none')",
    "F.smooth_l1_loss(x, y, beta=0.5)",
    "F.huber_loss(x, y, delta=0.5)",
    "F.cross_entropy(x, t)",
    "F.cross_entropy(x, t, reduction='none')",
    "F.nll_loss(F.log_softmax(x, dim=1), t, reduction='sum')",
    "F.kl_div(F.log_softmax(x, dim=1), torch.log(q), reduction='sum', log_target=True)",
    "F.cross_entropy(x, t, reduction='sum', label_smoothing=0.1)",
    "F.nll_loss(F.log_softmax(x, dim=1), t)",
    "F.kl_div(F.log_softmax(x, dim=1), q, reduction='batchmean')",
    "F.binary_cross_entropy(pr, q)",
    "F.binary_cross_entropy_with_logits(x, q, reduction='mean')",
    "F.soft_margin_loss(x, torch.sign(y))",
    "F.poisson_nll_loss(x, pr)",
    "F.hinge_embedding_loss(x, torch.sign(y), margin=1.0)",
    "F.margin_ranking_loss(x[:, 0], y[:, 0], s, margin=0.2)",
    "F.cosine_embedding_loss(x, y, s, margin=0.1)",
    "F.triplet_margin_loss(x, y, pr, margin=1.0)",
    "F.multilabel_soft_margin_loss(x, (q > 0.02).float())",
    "F.gaussian_nll_loss(x, y, pr)",
]

POOLING = [
    "F.max_pool2d(img, kernel_size=2)",
    "F.max_pool2d(img, 3, stride=2, padding=1, ceil_mode=True)",
    "F.max_pool1d(x.unsqueeze(1), kernel_size=3, stride=1)",
    "F.avg_pool2d(img, kernel_size=3, stride=2, padding=1, count_include_pad=False)",
    "F.avg_pool1d(x.unsqueeze(1), 4)",
    "F.adaptive_avg_pool2d(img, 1)",
    "F.adaptive_avg_pool1d(x.unsqueeze(1), 1)",
    "F.max_pool3d(img.unsqueeze(1), kernel_size=2, stride=2)",
    "F.avg_pool3d(img.unsqueeze(1), kernel_size=(1, 2, 2))",
    "F.adaptive_avg_pool2d(img, (1, 1)).flatten(1)",
    "F.adaptive_max_pool2d(img, 1)",
    "F.adaptive_max_pool2d(img, 1, return_indices=True)[1]",
    "F.adaptive_max_pool1d(x.unsqueeze(1), 1)",
    "F.adaptive_max_pool2d(img, (2, 3))",
    "F.lp_pool2d(img, 2.0, 2)",
    "torch.mean(img, dim=(2, 3), keepdim=True)",
]

COMPOSITES = [
    "torch.lerp(x, y, 0.3)",
    "torch.lerp(x, y, pr)",
    "torch.addcmul(x, x, y, value=0.5)",
    "torch.addcdiv(x, x, pr, value=-0.5)",
    "torch.logaddexp(x, y * 30.0)",
    "torch.logaddexp2(x, y)",
    "torch.hypot(x, y)",
    "torch.nan_to_num(torch.log(x))",
    "torch.nan_to_num(torch.log(x), nan=0.5, posinf=3.0, neginf=-3.0)",
    "torch.nan_to_num(x / torch.relu(y), posinf=0.0)",  # +inf, -inf and 0/0
    "torch.index_select(x, 0, r)",
    "F.embedding(r, x)",
    "x.repeat(2, 3)",
    "F.pixel_shuffle(img.repeat(1, 4, 1, 1), 2)",
    "F.pixel_unshuffle(img[:, :, :4, :8], 2)",
    "torch.stack([x, y], dim=0).amax(0)",
    "torch.stack([x, y * 2], dim=2).sum(2)",
    "F.scaled_dot_product_attention(img, img, img)",
    "F.interpolate(img, scale_factor=2, mode='nearest')",
    "torch.relu(F.interpolate(img, scale_factor=(2, 3))) + 1",  # the tail joins the broadcast's kernel
    "F.interpolate(x.unsqueeze(1), scale_factor=3)",
    "F.interpolate(img.unsqueeze(1), scale_factor=2)",
    "F.interpolate(img, scale_factor=1.5)",  # q and k scaled by d ** -0.25, d differing by shape set
    "F.conv2d(img, torch.ones(C, C, 3, 3))",
]

CASES = ELEMENTWISE + NORMALISATION + LOSS + POOLING + COMPOSITES

#: calls refused today, each with what its one-line refusal names (anything else must plan)
REFUSED: dict[str, str] = {
    "F.dropout(x, p=0.5, training=False)": "returns an input",  # the identity: nothing for a kernel to do
    "F.rrelu(x, training=True)": "aten.rrelu_with_noise",  # random slopes: no kernel can be verified
    # the smoothing term's eps / C is a size-derived constant of no form the resolver knows
    "F.cross_entropy(x, t, reduction='sum', label_smoothing=0.1)": "a size",
    "F.gaussian_nll_loss(x, y, pr)": "aten._local_scalar_dense",  # it checks var >= 0 on the host
    "F.adaptive_max_pool2d(img, (2, 3))": "aten.adaptive_max_pool2d",  # windows other than the whole plane
    "F.conv2d(img, torch.ones(C, C, 3, 3))": "aten.convolution",  # a weight made in forward(): not in memory
    "F.interpolate(img, scale_factor=1.5)": "aten.upsample_nearest2d",  # nearest by whole factors only
}


def _task_text(body: str) -> str:
    names = [name for name in _INPUTS if re.search(rf"\b{name}\b", body)]
    return TASK.format(args=", ".join(names), body=body, inputs=", ".join(_INPUTS[n] for n in names))


def _outcome(tmp_path: Path, k: int, body: str) -> tuple[str, str]:
    """("ok", source) when the call renders, else ("refused", the one-line message)."""
    try:
        kernels = planned(write_task(tmp_path, f"f{k}", _task_text(body)))
        return "ok", kernels.render(kernels.default()).code
    except (TaskError, TemplateError) as exc:  # UnsupportedOpError is a TaskError
        return "refused", str(exc)


@pytest.mark.parametrize("body", CASES)
def test_functional_call_plans_or_names_the_op(tmp_path: Path, body: str) -> None:
    kind, text = _outcome(tmp_path, CASES.index(body), body)
    if body not in REFUSED:
        assert kind == "ok", f"{body}: refused: {text}"
        return
    assert kind == "refused", f"{body} now plans: move it out of REFUSED"
    assert "\n" not in text.strip() and not text.startswith("internal:") and "internal:" not in text, text
    assert REFUSED[body] in text, f"{body}: the refusal does not name {REFUSED[body]}: {text}"


@needs_gxx
@pytest.mark.parametrize("group", ["elementwise", "normalisation", "loss", "pooling", "composites"])
def test_planned_functional_calls_match_torch_on_the_emulator(tmp_path: Path, group: str) -> None:
    groups = {"elementwise": ELEMENTWISE, "normalisation": NORMALISATION, "loss": LOSS, "pooling": POOLING}
    bodies = {**groups, "composites": COMPOSITES}[group]
    units = []
    for k, body in enumerate(bodies):
        if body in REFUSED:
            continue
        kernels = planned(write_task(tmp_path, f"{group}_{k}", _task_text(body)))
        units.append((kernels.task, body, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-4)
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_planned_functional_calls_verify_on_the_gpu(tmp_path: Path) -> None:
    """Every call that plans, its first two seeds compiled and verified on the GPU at both shape sets."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tu import gpu_trial_failures

    from optiml.evaluate.runtime import TaskRuntime
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.task import load_task
    from optiml.templates.kernels import template_kernels

    compiler = Compiler(CompilerConfig(cache_dir=tmp_path / "cache"))
    failures: list[str] = []
    for k, body in enumerate(CASES):
        if body in REFUSED:
            continue
        path = tmp_path / f"gpu_{k}.py"
        path.write_text(_task_text(body))
        task = load_task(path)
        kernels = template_kernels(task)
        configs = kernels.seeds(2)
        built = compiler.compile_many([kernels.render(c) for c in configs])
        runtime = TaskRuntime(task, "cuda")
        for config, compiled in zip(configs, built, strict=True):
            failures += gpu_trial_failures(runtime, compiled, f"{body} [{' + '.join(c.label() for c in config)}]")
    assert not failures, "\n".join(failures)
