"""KernelBench's problem files import more than torch: level 3's Mamba2 files use ``einops``, which the dev and
``kernelbench`` extras install. A task written as they are (``rearrange`` around the math) traces and plans."""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import planned, task_text, write_task

SHAPES = [{"B": 2, "L": 8, "H": 4, "D": 16}]
FORWARD = 'x\ny = rearrange(x, "b l (h d) -> b h l d", h=H)\nreturn torch.softmax(y, dim=-1).sum(dim=2)'


def test_a_task_that_rearranges_with_einops_plans(tmp_path: Path) -> None:
    text = task_text(SHAPES, FORWARD, "[torch.randn(B, L, H * D)]", imports="from einops import rearrange")
    kernels = planned(write_task(tmp_path, "einops_task", text))
    assert kernels.plan.groups and kernels.seeds(2)
