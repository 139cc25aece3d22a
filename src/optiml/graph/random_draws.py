"""Random numbers drawn in ``Model.forward`` (``torch.randn`` of an initial state, noise, …).

A kernel cannot draw the numbers the reference draws, so a model that draws is verifiable only where its
output does not depend on them — and then against the model as written: every trial runs the reference with
draws of its own, as KernelBench's check does (its ``Model`` and ``ModelNew`` draw from different points of
the generator). KernelBench's level-3 ``35_LSTM`` draws its LSTM's initial states in ``forward``; after 512
steps two draws move the output by 6e-9 against a tolerance of 1e-4.

A *creation* draw — ``aten.randn``, ``aten.rand`` and their ``_like`` forms: a fresh tensor of a distribution,
holding no input's values — is replaced in the captured graph by its distribution's mean (0 for ``randn``,
0.5 for ``rand``) once a CPU run has shown that two draws on the same inputs move no output by more than
:data:`~optiml.task_runtime.SHARE_OF_TOLERANCE` of the task's tolerance (:func:`~optiml.task_runtime.moved_by_draws`).
So is a dropout's mask, ``aten.bernoulli.p`` (a fresh tensor of ones with probability ``p``): by ``p``, so that
``x * mask / p`` is ``x``, where the check shows that the mask does not reach the outputs (KernelBench's level 2
zeroes some dropouts' outputs, or averages them over a size-1 dim, further on). Every other random op
(``bernoulli`` of a tensor of probabilities, ``randint``, ``multinomial``, ``rrelu`` in training, …) is refused,
as is a draw whose output moves and a task too large to check on the CPU
(:data:`~optiml.task_runtime.CHECK_BYTES`), each in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from optiml.errors import TaskError
from optiml.task_runtime import SHARE_OF_TOLERANCE, moved_by_draws, movement

if TYPE_CHECKING:
    from optiml.task import Task

#: a creation draw's op (overload packet) → the mean of its distribution, which the kernel computes with
MEANS = {"randn": 0.0, "rand": 0.5, "randn_like": 0.0, "rand_like": 0.5}
_KEPT_KWARGS = ("dtype", "layout", "device", "pin_memory", "memory_format")


class RandomDrawError(Exception):
    """Why a model's random draws cannot be verified (one line; the caller names the task file)."""


def random_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The graph's calls of ops that draw random numbers."""
    return [
        node
        for node in gm.graph.nodes
        if node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
    ]


def replace_draws(gm: torch.fx.GraphModule, task: Task, shape_set: int) -> None:
    """Replace ``gm``'s creation draws and dropout masks by their means once the output is shown not to depend on
    them; raise :class:`RandomDrawError` for any other random op, or when it does (or cannot be checked: a task
    too large for the CPU to run twice)."""
    nodes = random_nodes(gm)
    if not nodes:
        return
    named = [(node, node.target.__name__) for node in nodes]  # type: ignore[union-attr]
    other = next((name for node, name in named if _mean(node) is None), None)
    dropout = any(name.startswith(("bernoulli", "native_dropout")) for _, name in named)
    hint = (
        " (a dropout in training mode: OPTIML = {'mode': 'eval'} runs the reference in eval mode, where it is the "
        "identity)"
        if dropout
        else ""
    )
    if other is not None:
        raise RandomDrawError(
            f"Model.forward draws random numbers (aten.{other}): its output differs on every call, so no kernel "
            f"can be verified against it{hint}"
        )
    drawn = ", ".join(sorted({f"aten.{name}" for _, name in named}))
    try:
        moved = moved_by_draws(task, shape_set)
    except TaskError as exc:
        raise RandomDrawError(f"Model.forward draws random numbers ({drawn}); {exc}") from exc
    if moved > SHARE_OF_TOLERANCE:
        raise RandomDrawError(
            f"Model.forward draws random numbers ({drawn}) and its output depends on them: two draws on the same "
            f"inputs {movement(moved)} (atol {task.meta.atol:g}, rtol {task.meta.rtol:g}), so no kernel can be "
            f"verified against it{hint}"
        )
    for node in nodes:
        mean = _mean(node)
        kwargs = {k: v for k, v in node.kwargs.items() if k in _KEPT_KWARGS}
        if _packet(node).endswith("_like") or _packet(node) == "bernoulli":
            node.target = torch.ops.aten.full_like.default
        else:
            node.target = torch.ops.aten.full.default
            kwargs.pop("memory_format", None)
        node.args = (node.args[0], mean)
        node.kwargs = kwargs
    gm.recompile()


def _mean(node: torch.fx.Node) -> float | None:
    """The mean a draw is replaced by: its distribution's, or a dropout mask's keep probability; None for a random
    op that holds an input's values or whose mean is not a number."""
    if node.target is torch.ops.aten.bernoulli.p:
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
        return float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None
    return MEANS.get(_packet(node))


def _packet(node: torch.fx.Node) -> str:
    packet = getattr(node.target, "overloadpacket", None)
    return str(getattr(packet, "__name__", ""))
