"""Random numbers drawn in ``Model.forward`` (``torch.randn`` of an initial state, noise, …).

A kernel cannot draw the numbers the reference draws, so a model that draws is verifiable only where its
output does not depend on them — and then against the model as written: every trial runs the reference with
draws of its own, as KernelBench's check does (its ``Model`` and ``ModelNew`` draw from different points of
the generator). KernelBench's level-3 ``35_LSTM`` draws its LSTM's initial states in ``forward``; after 512
steps two draws move the output by 6e-9 against a tolerance of 1e-4.

A *creation* draw — ``aten.randn``, ``aten.rand`` and their ``_like`` forms: a fresh tensor of a distribution,
holding no input's values — is replaced in the captured graph by its distribution's mean (0 for ``randn``,
0.5 for ``rand``) once a CPU run has shown that two draws on the same inputs move no output by more than
:data:`SHARE_OF_TOLERANCE` of the task's tolerance. Every other random op (a dropout's ``bernoulli``,
``randint``, ``multinomial``, ``rrelu`` in training, …) is refused, as is a draw whose output moves and a task
too large to check on the CPU (:data:`CHECK_BYTES`), each in one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from optiml.task import Task

#: a creation draw's op (overload packet) → the mean of its distribution, which the kernel computes with
MEANS = {"randn": 0.0, "rand": 0.5, "randn_like": 0.0, "rand_like": 0.5}
#: two draws may move an output by at most this share of the tolerance (atol + rtol·|reference|)
SHARE_OF_TOLERANCE = 0.01
#: the most inputs and parameters a task may hold for the CPU to run it twice at capture
CHECK_BYTES = 1 << 30
_KEPT_KWARGS = ("dtype", "layout", "device", "pin_memory", "memory_format")
#: (task file, its last change, shape set) → how far two draws moved the outputs (the CPU check runs once)
_MOVED: dict[tuple[str, int, int], float] = {}


class RandomDrawError(Exception):
    """Why a model's random draws cannot be verified (one line; the caller names the task file)."""


def random_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The graph's calls of ops that draw random numbers."""
    return [
        node
        for node in gm.graph.nodes
        if node.op == "call_function" and torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
    ]


def replace_draws(gm: torch.fx.GraphModule, task: Task, shape_set: int, held: Sequence[Any]) -> None:
    """Replace ``gm``'s creation draws by their means once the output is shown not to depend on them; raise
    :class:`RandomDrawError` for any other random op, or when it does (or cannot be checked). ``held``: the
    traced inputs and parameters (on the meta device), whose size decides whether the CPU may run the check."""
    nodes = random_nodes(gm)
    if not nodes:
        return
    named = [(node, node.target.__name__) for node in nodes]  # type: ignore[union-attr]
    other = next((name for node, name in named if _packet(node) not in MEANS), None)
    if other is not None:
        hint = (
            " (a dropout in training mode: OPTIML = {'mode': 'eval'} runs the reference in eval mode, where "
            "it is the identity)"
            if other.startswith(("bernoulli", "native_dropout"))
            else ""
        )
        raise RandomDrawError(
            f"Model.forward draws random numbers (aten.{other}): its output differs on every call, so no kernel "
            f"can be verified against it{hint}"
        )
    drawn = ", ".join(sorted({f"aten.{name}" for _, name in named}))
    task_bytes = sum(t.numel() * t.element_size() for t in held if isinstance(t, torch.Tensor))
    if task_bytes > CHECK_BYTES:
        raise RandomDrawError(
            f"Model.forward draws random numbers ({drawn}); whether its output depends on them is checked by "
            f"running it twice on the CPU, and its inputs and parameters ({task_bytes / 2**30:.1f} GiB) are over "
            f"the {CHECK_BYTES / 2**30:.0f} GiB that check runs"
        )
    key = (str(task.path), task.path.stat().st_mtime_ns, shape_set)
    if key not in _MOVED:
        _MOVED[key] = _moved_share(task, shape_set)
    moved = _MOVED[key]
    if moved > SHARE_OF_TOLERANCE:
        shown = "changes an output's shape or integers" if math.isinf(moved) else f"{moved:.3g}× the tolerance"
        raise RandomDrawError(
            f"Model.forward draws random numbers ({drawn}) and its output depends on them: two draws on the same "
            f"inputs moved it by {shown} (atol {task.meta.atol:g}, rtol {task.meta.rtol:g}), so no kernel can be "
            "verified against it"
        )
    for node in nodes:
        mean = MEANS[_packet(node)]
        kwargs = {k: v for k, v in node.kwargs.items() if k in _KEPT_KWARGS}
        if _packet(node).endswith("_like"):
            node.target = torch.ops.aten.full_like.default
        else:
            node.target = torch.ops.aten.full.default
            kwargs.pop("memory_format", None)
        node.args = (node.args[0], mean)
        node.kwargs = kwargs
    gm.recompile()


def _packet(node: torch.fx.Node) -> str:
    packet = getattr(node.target, "overloadpacket", None)
    return str(getattr(packet, "__name__", ""))


def _moved_share(task: Task, shape_set: int) -> float:
    """How far two draws move the outputs on the same inputs, in units of the task's tolerance (inf: a shape,
    a dtype or an integer changed)."""
    from optiml.task_runtime import TaskRunner

    runner = TaskRunner(task, "cpu")
    runs = []
    with torch.random.fork_rng(devices=[]):  # the caller's generator is left as it was (the runner seeds it)
        args = runner.make_args(0, shape_set)
        model = runner.build_model(0, shape_set)
        for seed in (1, 2):
            torch.manual_seed(seed)
            runs.append(runner.run_reference(model, args))
    worst = 0.0
    for first, second in zip(*runs, strict=True):
        if first.shape != second.shape or first.dtype != second.dtype:
            return math.inf
        if not first.is_floating_point():
            if not torch.equal(first, second):
                return math.inf
            continue
        a, b = first.double(), second.double()
        diff = (a - b).abs()
        diff[(a == b) | (a.isnan() & b.isnan())] = 0.0  # equal infinities, NaN where both are NaN
        moved = (diff / (task.meta.atol + task.meta.rtol * b.abs())).nan_to_num(nan=math.inf)
        worst = max(worst, float(moved.max()) if moved.numel() else 0.0)
    return worst
