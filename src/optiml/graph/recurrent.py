"""Recurrent layers (``nn.LSTM``, ``nn.GRU``) traced as one op each, not unrolled step by step.

``aten.lstm`` / ``aten.gru`` are composite: traced, a 6-layer LSTM over 512 steps unrolls into tens of
thousands of nodes (minutes to trace, a plan no compiler takes). While the graph is traced,
:func:`recurrent_as_one_op` routes each such layer's forward through a custom op of ours —
``optiml::recurrent_lstm`` / ``optiml::recurrent_gru``, with a shape-only (fake) implementation — so
the trace holds one node per layer: its input sequence, initial states and weights (PyTorch's
order: per layer, per direction, ``weight_ih, weight_hh[, bias_ih, bias_hh]``) in; the output sequence
and the final states out. The recurrent template family computes it (:mod:`optiml.templates.recurrent`).

What is refused, in one line naming the layer: ``nn.RNN`` (tanh/ReLU cells), ``proj_size`` > 0, dropout
between layers in training mode (random), packed sequences, dtypes other than float32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from optiml.errors import TaskError

#: gates per cell: LSTM (input, forget, cell, output), GRU (reset, update, new)
GATES = {"lstm": 4, "gru": 3}


class RecurrentError(TaskError):
    """A recurrent layer no template computes (raised while tracing; capture names the layer)."""


@dataclass(frozen=True)
class RecurrentAttrs:
    """What the IR node of one recurrent layer records (its attrs)."""

    cell: str  # "lstm" | "gru"
    layers: int
    bidirectional: bool
    batch_first: bool
    bias: bool


def _sequence_shapes(
    x: torch.Tensor, h0: torch.Tensor, layers: int, bidirectional: bool, batch_first: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    directions = 2 if bidirectional else 1
    hidden = h0.shape[-1]
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    shape = (batch, steps, directions * hidden) if batch_first else (steps, batch, directions * hidden)
    return x.new_empty(shape), h0.new_empty((layers * directions, batch, hidden))


@torch.library.custom_op("optiml::recurrent_lstm", mutates_args=())
def recurrent_lstm(
    x: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    weights: Sequence[torch.Tensor],
    layers: int,
    bidirectional: bool,
    batch_first: bool,
    bias: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An LSTM's forward (only traced: the reference runs ``nn.LSTM`` itself)."""
    out, h_n, c_n = torch._VF.lstm(x, (h0, c0), list(weights), bias, layers, 0.0, False, bidirectional, batch_first)
    return out, h_n, c_n


@recurrent_lstm.register_fake
def _lstm_shapes(
    x: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    weights: Sequence[torch.Tensor],
    layers: int,
    bidirectional: bool,
    batch_first: bool,
    bias: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out, h_n = _sequence_shapes(x, h0, layers, bidirectional, batch_first)
    return out, h_n, torch.empty_like(h_n)


@torch.library.custom_op("optiml::recurrent_gru", mutates_args=())
def recurrent_gru(
    x: torch.Tensor,
    h0: torch.Tensor,
    weights: Sequence[torch.Tensor],
    layers: int,
    bidirectional: bool,
    batch_first: bool,
    bias: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A GRU's forward (only traced: the reference runs ``nn.GRU`` itself)."""
    out, h_n = torch._VF.gru(x, h0, list(weights), bias, layers, 0.0, False, bidirectional, batch_first)
    return out, h_n


@recurrent_gru.register_fake
def _gru_shapes(
    x: torch.Tensor,
    h0: torch.Tensor,
    weights: Sequence[torch.Tensor],
    layers: int,
    bidirectional: bool,
    batch_first: bool,
    bias: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _sequence_shapes(x, h0, layers, bidirectional, batch_first)


def _refusal(name: str, module: torch.nn.RNNBase) -> str | None:
    kind = type(module).__name__
    if kind not in ("LSTM", "GRU"):
        return f"no template for aten.{kind.lower()} (the recurrent layer {name} = nn.{kind})"
    if getattr(module, "proj_size", 0):
        return f"no template for an LSTM with proj_size={module.proj_size} ({name})"
    if module.dropout > 0 and module.training and module.num_layers > 1:
        return f"{name} = nn.{kind} applies dropout {module.dropout:g} between layers: its output is random"
    return None


def _one_op_forward(module: torch.nn.RNNBase, name: str) -> Callable[..., Any]:
    """A forward for ``module`` that calls our op (the trace's one node), as ``nn.LSTM``/``nn.GRU`` would."""
    lstm = isinstance(module, torch.nn.LSTM)

    def forward(x: torch.Tensor, hx: Any = None) -> Any:
        if not isinstance(x, torch.Tensor):
            raise RecurrentError(f"{name}: a packed sequence has no template")
        if x.dtype != torch.float32:
            raise RecurrentError(f"{name}: recurrent layers run in float32 only, not {x.dtype}")
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(1 if module.batch_first is False else 0)
        directions = 2 if module.bidirectional else 1
        batch = x.shape[0] if module.batch_first else x.shape[1]
        zeros = x.new_zeros((module.num_layers * directions, batch, module.hidden_size))
        weights = [getattr(module, n) for n in module._flat_weights_names]
        attrs = (module.num_layers, module.bidirectional, module.batch_first, module.bias)
        if lstm:
            h0, c0 = hx if hx is not None else (zeros, zeros)
            if unbatched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            out, h_n, c_n = recurrent_lstm(x, h0, c0, weights, *attrs)
            if unbatched:
                return out.squeeze(1 if not module.batch_first else 0), (h_n.squeeze(1), c_n.squeeze(1))
            return out, (h_n, c_n)
        h0 = hx if hx is not None else zeros
        if unbatched:
            h0 = h0.unsqueeze(1)
        out, h_n = recurrent_gru(x, h0, weights, *attrs)
        if unbatched:
            return out.squeeze(1 if not module.batch_first else 0), h_n.squeeze(1)
        return out, h_n

    return forward


@contextlib.contextmanager
def recurrent_as_one_op(model: torch.nn.Module) -> Iterator[None]:
    """While tracing, every ``nn.LSTM``/``nn.GRU`` of ``model`` is one op; others are refused (RecurrentError)."""
    patched: list[torch.nn.Module] = []
    try:
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.RNNBase):
                reason = _refusal(name or "Model", module)
                if reason is not None:
                    raise RecurrentError(reason)
                module.forward = _one_op_forward(module, name or "Model")
                patched.append(module)
        yield
    finally:
        for module in patched:
            del module.forward  # the class's forward again
