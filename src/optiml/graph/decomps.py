"""Decompositions that lower PyTorch's composite ops into the primitives the planner fuses.

PyTorch's own decompositions serve for activations and most losses. Norms and variances are
lowered here instead, in terms of ``mean`` over explicit dims (never a constant ``1/N``), so the
kernel divides by the run-time row length and works at every shape set; PyTorch's versions go
through ``prims`` ops with sizes baked in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._decomp import get_decompositions

aten = torch.ops.aten

_TORCH_DECOMPOSED = [
    aten._softmax,
    aten._log_softmax,
    aten.logsumexp,
    aten.nll_loss_forward,
    aten.mse_loss,
    aten.huber_loss,
    aten.smooth_l1_loss,
    aten.binary_cross_entropy,
    aten.soft_margin_loss,
    aten.hinge_embedding_loss,
    aten.margin_ranking_loss,
    aten.gelu,
    aten.silu,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.softplus,
    aten.hardsigmoid,
    aten.hardswish,
    aten.mish,
    aten.relu6,
    aten.threshold,
    aten.logit,
    aten.celu,
    aten.softshrink,
    aten.hardshrink,
    aten.log_sigmoid_forward,
    aten.glu,
    aten._prelu_kernel,
    aten.binary_cross_entropy_with_logits,
    # element-wise compositions, rows picked by index (as `x[idx]`), tiling and pixel shuffles (views and copies)
    aten.lerp,
    aten.addcmul,
    aten.addcdiv,
    aten.logaddexp,
    aten.logaddexp2,
    aten.index_select,
    aten.embedding,
    aten.repeat,
    aten.pixel_shuffle,
    aten.pixel_unshuffle,
]


def _dims(x: torch.Tensor, dim: Any) -> list[int]:
    if dim is None:
        return list(range(x.dim()))
    if isinstance(dim, int):
        return [dim % max(x.dim(), 1)]
    return [d % max(x.dim(), 1) for d in dim]


def _var(x: torch.Tensor, dims: list[int], correction: float, keepdim: bool) -> tuple[torch.Tensor, torch.Tensor]:
    mean = aten.mean.dim(x, dims, True)
    centered = x - mean
    squares = centered * centered
    if correction:
        total = aten.sum.dim_IntList(squares, dims, keepdim)
        count = 1
        for d in dims:
            count = count * x.shape[d]
        var = total / (count - correction)
    else:
        var = aten.mean.dim(squares, dims, keepdim)
    return var, mean if keepdim else aten.squeeze.dims(mean, dims)


def var_correction(x: torch.Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> torch.Tensor:
    return _var(x, _dims(x, dim), 1 if correction is None else float(correction), keepdim)[0]


def var_mean_correction(
    x: torch.Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    return _var(x, _dims(x, dim), 1 if correction is None else float(correction), keepdim)


def std_correction(x: torch.Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> torch.Tensor:
    return torch.sqrt(var_correction(x, dim, correction=correction, keepdim=keepdim))


def std_mean_correction(
    x: torch.Tensor, dim: Any = None, *, correction: Any = None, keepdim: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = var_mean_correction(x, dim, correction=correction, keepdim=keepdim)
    return torch.sqrt(var), mean


def native_layer_norm(
    x: torch.Tensor, normalized_shape: Sequence[int], weight: Any, bias: Any, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    var, mean = _var(x, dims, 0, True)
    rstd = aten.rsqrt.default(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def native_group_norm(
    x: torch.Tensor, weight: Any, bias: Any, n: int, c: int, hw: int, group: int, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # Computed over [N, group, C / group, H*W…], the per-channel affine a [1, group, C / group, 1] view: the
    # statistics, the normalisation and the affine share one row kernel, whose domain the channel dim is part of
    # (over [N, group, C / group * H*W] the affine's channel is no dim of the domain: a second pass).
    shape = list(x.shape)
    grouped = aten.view.default(x, [shape[0], group, shape[1] // group, -1])
    var, mean = _var(grouped, [2, 3], 0, True)
    rstd = aten.rsqrt.default(var + eps)
    out = (grouped - mean) * rstd
    affine_shape = [1, group, shape[1] // group, 1]
    if weight is not None:
        out = out * aten.view.default(weight, affine_shape)
    if bias is not None:
        out = out + aten.view.default(bias, affine_shape)
    out = aten.view.default(out, shape)
    return out, aten.view.default(mean, [shape[0], group]), aten.view.default(rstd, [shape[0], group])


def _batch_norm_training(x: torch.Tensor, weight: Any, bias: Any, eps: float) -> tuple[torch.Tensor, ...]:
    dims = [0, *range(2, x.dim())]
    var, mean = _var(x, dims, 0, True)
    rstd = aten.rsqrt.default(var + eps)
    out = (x - mean) * rstd
    affine_shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    if weight is not None:
        out = out * aten.view.default(weight, affine_shape)
    if bias is not None:
        out = out + aten.view.default(bias, affine_shape)
    return out, aten.squeeze.dims(mean, dims), aten.squeeze.dims(rstd, dims)


def _batch_norm_eval(x: torch.Tensor, weight: Any, bias: Any, mean: Any, var: Any, eps: float) -> torch.Tensor:
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    out = (x - aten.view.default(mean, shape)) * aten.rsqrt.default(aten.view.default(var, shape) + eps)
    if weight is not None:
        out = out * aten.view.default(weight, shape)
    if bias is not None:
        out = out + aten.view.default(bias, shape)
    return out


def native_batch_norm(
    x: torch.Tensor,
    weight: Any,
    bias: Any,
    running_mean: Any,
    running_var: Any,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, ...]:
    if training or running_mean is None:
        return _batch_norm_training(x, weight, bias, eps)
    empty = aten.new_zeros.default(x, [0])
    return _batch_norm_eval(x, weight, bias, running_mean, running_var, eps), empty, empty


def batch_norm_legit(
    x: torch.Tensor,
    weight: Any,
    bias: Any,
    running_mean: Any,
    running_var: Any,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[torch.Tensor, ...]:
    return native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)


def batch_norm_legit_no_stats(
    x: torch.Tensor, weight: Any, bias: Any, training: bool, momentum: float, eps: float
) -> tuple[torch.Tensor, ...]:
    return _batch_norm_training(x, weight, bias, eps)


def batch_norm_no_training(
    x: torch.Tensor, weight: Any, bias: Any, running_mean: Any, running_var: Any, momentum: float, eps: float
) -> tuple[torch.Tensor, ...]:
    empty = aten.new_zeros.default(x, [0])
    return _batch_norm_eval(x, weight, bias, running_mean, running_var, eps), empty, empty


def linalg_vector_norm(
    x: torch.Tensor, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> torch.Tensor:
    dims = _dims(x, dim)
    if ord == float("inf"):
        return aten.amax.default(torch.abs(x), dims, keepdim)
    if ord == float("-inf"):
        return aten.amin.default(torch.abs(x), dims, keepdim)
    if ord == 2:
        return torch.sqrt(aten.sum.dim_IntList(x * x, dims, keepdim))
    if ord == 1:
        return aten.sum.dim_IntList(torch.abs(x), dims, keepdim)
    return torch.pow(aten.sum.dim_IntList(torch.pow(torch.abs(x), ord), dims, keepdim), 1.0 / ord)


def norm_scalar_opt_dim(x: torch.Tensor, p: Any = 2, dim: Any = None, keepdim: bool = False) -> torch.Tensor:
    return linalg_vector_norm(x, 2 if p is None else p, dim, keepdim)


def safe_softmax(x: torch.Tensor, dim: int, dtype: Any = None) -> torch.Tensor:
    """Softmax whose rows of all ``-inf`` give zeros, not NaN (``scaled_dot_product_attention``'s masked rows)."""
    if dtype is not None:
        x = aten._to_copy.default(x, dtype=dtype)
    out = aten._softmax.default(x, dim, False)
    masked = aten.all.dim(aten.eq.Scalar(x, float("-inf")), dim, True)
    return aten.where.self(masked, aten.zeros_like.default(out), out)


def rrelu_with_noise(
    x: torch.Tensor,
    noise: torch.Tensor,
    lower: float = 0.125,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    generator: Any = None,
) -> Any:
    """``F.rrelu`` out of training is ``leaky_relu`` with the mean slope; in training it draws a random
    slope per element (not decomposed: refused as a random op)."""
    if training:
        return NotImplemented
    return aten.leaky_relu.default(x, (lower + upper) / 2)


def adaptive_max_pool2d(x: torch.Tensor, output_size: Sequence[int]) -> Any:
    """Windows over the whole plane are a max and an argmax over it (flat ``h * W + w`` indices, as
    PyTorch numbers them); windows that tile the plane evenly are a max pool. Ours, not PyTorch's:
    its decomposition is missing before 2.13, and the planner's support must not follow the version."""
    h_in, w_in = x.shape[-2], x.shape[-1]
    h_out, w_out = output_size
    if h_out == 1 and w_out == 1:
        values = aten.amax.default(x, [-2, -1], True)
        indices = aten.argmax.default(x.flatten(-2), -1, True).unsqueeze(-1)
        return values, indices
    if h_out > 0 and w_out > 0 and h_in % h_out == 0 and w_in % w_out == 0:
        return aten.max_pool2d_with_indices.default(x, [h_in // h_out, w_in // w_out])
    return NotImplemented


def hypot(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``sqrt(x² + y²)`` (PyTorch's reference is ``prims.hypot``, which no template has)."""
    return torch.sqrt(x * x + y * y)


def nan_to_num(x: torch.Tensor, nan: Any = None, posinf: Any = None, neginf: Any = None) -> torch.Tensor:
    """NaN to ``nan`` (0), ±inf to ``posinf`` / ``neginf`` (the dtype's largest finite values by default)."""
    if not x.is_floating_point():
        return aten.clone.default(x)
    info = torch.finfo(x.dtype)
    replacements = (
        (aten.isnan.default(x), 0.0 if nan is None else nan),
        (aten.eq.Scalar(x, float("inf")), info.max if posinf is None else posinf),
        (aten.eq.Scalar(x, float("-inf")), info.min if neginf is None else neginf),
    )
    out = x
    for where, value in replacements:
        out = aten.where.self(where, aten.full_like.default(x, value), out)
    return out


def upsample_nearest(x: torch.Tensor, output_size: Sequence[int], *scales: Any) -> Any:
    """Nearest-neighbour upsampling by whole factors: each element repeated ``s`` times along each spatial dim (a
    broadcast and a reshape; PyTorch's ``floor(i / s)`` source index at every such factor). Other factors are left
    to the refusal naming the op."""
    spatial = len(output_size)
    sizes_in = list(x.shape[-spatial:])
    factors = []
    for d, (size_in, size_out) in enumerate(zip(sizes_in, output_size, strict=True)):
        scale = scales[d] if d < len(scales) else None
        if size_in <= 0 or size_out % size_in or (scale is not None and scale != size_out // size_in):
            return NotImplemented
        factors.append(size_out // size_in)
    lead = list(x.shape[:-spatial])
    spread = lead + [n for size in sizes_in for n in (size, 1)]
    tiled = lead + [n for size, f in zip(sizes_in, factors, strict=True) for n in (size, f)]
    repeated = aten.expand.default(aten.view.default(x, spread), tiled)
    return aten.clone.default(repeated).view(lead + list(output_size))


def decomposition_table() -> dict[Any, Callable[..., Any]]:
    table: dict[Any, Callable[..., Any]] = dict(get_decompositions(_TORCH_DECOMPOSED))
    table.update(
        {
            aten.var.correction: var_correction,
            aten.var_mean.correction: var_mean_correction,
            aten.std.correction: std_correction,
            aten.std_mean.correction: std_mean_correction,
            aten.native_layer_norm.default: native_layer_norm,
            aten.native_group_norm.default: native_group_norm,
            aten.native_batch_norm.default: native_batch_norm,
            aten._native_batch_norm_legit.default: batch_norm_legit,
            aten._native_batch_norm_legit.no_stats: batch_norm_legit_no_stats,
            aten._native_batch_norm_legit_no_training.default: batch_norm_no_training,
            aten.linalg_vector_norm.default: linalg_vector_norm,
            aten.norm.ScalarOpt_dim: norm_scalar_opt_dim,
            aten.norm.Scalar: norm_scalar_opt_dim,
            aten._safe_softmax.default: safe_softmax,
            aten.rrelu_with_noise.default: rrelu_with_noise,
            aten.adaptive_max_pool2d.default: adaptive_max_pool2d,
            aten.hypot.default: hypot,
            aten.upsample_nearest1d.default: upsample_nearest,
            aten.upsample_nearest2d.default: upsample_nearest,
            aten.upsample_nearest3d.default: upsample_nearest,
            aten.nan_to_num.default: nan_to_num,
        }
    )
    return table
