"""split_row with interleaved blocks (``interleave=1``): each block takes every C-th tile of the row, the grid a front
sweeping it, instead of one contiguous chunk. Checked against torch on the CPU emulator for element-wise rows of
one run and of two, broadcast operands, packs spanning runs and two packs a thread; offered only where no
reduction combines the blocks' partial results (their order is the chunks' order); a move for the search, not a
seed."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.templates.base import GroupConfig

#: lengths whose last tile is whole, ends inside a pack's stride, and holds one scalar tail (vec 1's path)
SHAPES = [{"B": 1, "N": 4100}, {"B": 1, "N": 1536}, {"B": 3, "N": 1030}]

TASKS = {
    "silu": task_text(SHAPES, "x\nreturn x * torch.sigmoid(x)", "[torch.randn(B, N)]"),
    "bias_relu": task_text(SHAPES, "x, b\nreturn torch.relu(x + b) * 0.5", "[torch.randn(B, N), torch.randn(N)]"),
    # a row of two runs: channels × H·W under a per-channel scale
    "channel_scale": task_text(
        [{"N": 1, "C": 24, "H": 16, "W": 12}, {"N": 2, "C": 5, "H": 7, "W": 4}],
        "x, w\nreturn x * w.view(1, -1, 1, 1) + 1.0",
        "[torch.randn(N, C, H, W), torch.randn(C)]",
    ),
    # packs spanning runs of the upsampling factor
    "upsample": task_text(
        [{"N": 1, "C": 8, "H": 16, "W": 16}, {"N": 2, "C": 3, "H": 5, "W": 6}],
        "x\nreturn torch.nn.functional.interpolate(x, scale_factor=2, mode='nearest')",
        "[torch.randn(N, C, H, W)]",
    ),
}


def _interleaved(vec: int) -> list[GroupConfig]:
    return [
        GroupConfig.of("split_row", threads=128, vec=vec, blocks_per_sm=2, interleave=1),
        GroupConfig.of("split_row", threads=256, vec=vec, blocks_per_sm=1, interleave=1, ilp=2),
    ]


@needs_gxx
@pytest.mark.parametrize("name", sorted(TASKS))
def test_interleaved_blocks_match_torch(name: str, tmp_path: Path) -> None:
    _assert_match_torch(name, [*_interleaved(8), *_interleaved(4), *_interleaved(1)], tmp_path, seed=3)


def _assert_match_torch(name: str, configs: list[GroupConfig], tmp_path: Path, seed: int) -> None:
    """The task's last group as each of ``configs`` the space allows (at least three) on the emulator, against
    torch."""
    kernels = planned(write_task(tmp_path, name, TASKS[name]))
    default = kernels.default()
    space = kernels.spaces[-1]
    units = [
        (kernels.task, config.label(), kernels.render([*default[:-1], config]).code)
        for config in configs
        if space.reason_invalid(config) is None
    ]
    assert len(units) >= 3, kernels.describe()
    failures = emulator_mismatches(tmp_path / "emu", units, seed=seed, tol=1e-5)
    assert not failures, "\n".join(failures)


def test_the_interleaved_block_strides_by_the_grid(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "silu", TASKS["silu"]))
    chunked = GroupConfig.of("split_row", threads=128, vec=4, blocks_per_sm=2)
    code = kernels.render([chunked.with_params(interleave=1)]).code
    assert "const int64_t lo = 0, hi = p.R;" in code
    assert "e += (int64_t)1 * ((int64_t)gridDim.x * 128) * VEC" in code
    assert "p.clen;" not in code.split("OPTIML_EXPORT")[0]  # the device code takes no chunk
    assert kernels.render([chunked]).code == kernels.render([chunked.with_params(interleave=0)]).code


def test_interleaving_is_a_move_for_element_wise_rows_and_refused_with_a_reduction(tmp_path: Path) -> None:
    """Timed against chunks it tied (19_ReLU 4.518 against 4.501 ms, 21_Sigmoid 4.532 against 4.535 ms; H100,
    a09bd2e): a move for the search, not a seed."""
    silu = planned(write_task(tmp_path, "silu", TASKS["silu"]))
    chunked = next(configs[0] for configs in silu.seeds(4) if configs[0].get("blocks_per_sm"))
    assert chunked.variant == "split_row"
    assert all(configs[0].get("interleave", 0) == 0 for configs in silu.seeds(4))
    assert chunked.with_params(interleave=1) in [move.config for move in silu.neighbours([chunked])]
    total = planned(write_task(tmp_path, "total", task_text(SHAPES, "x\nreturn (x * x).sum()", "[torch.randn(B, N)]")))
    config = GroupConfig.of("split_row", threads=128, vec=4, blocks_per_sm=2, interleave=1)
    assert "interleave=1 not in" in (total.spaces[0].reason_invalid(config) or "")
    assert all(configs[0].get("interleave", 0) == 0 for configs in total.seeds(4))


@needs_gxx
@pytest.mark.parametrize("name", ["bias_relu", "channel_scale", "upsample"])
def test_a_block_a_tile_matches_torch(name: str, tmp_path: Path) -> None:
    """``blocks_per_sm=0``: as many blocks as tiles of ``threads * vec`` elements, each one tile (eager's launch
    shape), with whole and partial last tiles, scalar tails, two packs a thread and rows of two runs."""
    configs = [
        config
        for vec in (8, 4, 1)
        for config in (
            GroupConfig.of("split_row", threads=128, vec=vec, blocks_per_sm=0),
            GroupConfig.of("split_row", threads=256, vec=vec, blocks_per_sm=0, ilp=2),
        )
    ]
    _assert_match_torch(name, configs, tmp_path, seed=5)


def test_a_block_a_tile_is_offered_for_element_wise_rows_only(tmp_path: Path) -> None:
    """The rule for element-wise rows (eager's launch shape: 128 threads a tile; 19_ReLU 4.23 against the chunks'
    4.47 ms), the chunks raced second; refused with a reduction (its partials are a block's) and with interleaving
    (one tile a block has none to take in turn)."""
    silu = planned(write_task(tmp_path, "silu", TASKS["silu"]))
    (tiles,) = silu.default()
    assert tiles == GroupConfig.of("split_row", threads=128, vec=tiles.get("vec"), blocks_per_sm=0)
    assert "P.C = most < 2147483647LL ? most : 2147483647LL;" in silu.render([tiles]).code
    chunked = [configs[0] for configs in silu.seeds(4)][1]  # the second seed: the chunks the rule took before
    assert chunked == GroupConfig.of("split_row", threads=512, vec=tiles.get("vec"), blocks_per_sm=4)
    assert "optiml_wave_chunks(P.rows, " in silu.render([chunked]).code
    assert "has no tiles to take in turn" in (silu.spaces[0].reason_invalid(tiles.with_params(interleave=1)) or "")
    total = planned(write_task(tmp_path, "total", task_text(SHAPES, "x\nreturn (x * x).sum()", "[torch.randn(B, N)]")))
    config = GroupConfig.of("split_row", threads=128, vec=4, blocks_per_sm=0)
    assert "blocks_per_sm=0 not in" in (total.spaces[0].reason_invalid(config) or "")
