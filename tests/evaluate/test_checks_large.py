"""Checks that hold for tensors of any size: chunked comparisons, word views, > 4 GiB inputs.

The CPU tests run the chunked logic at small sizes with tiny chunks (every boundary case a
> 4 GiB tensor meets at the real chunk size); the GPU test runs the real thing on a 4.5 GiB input.
"""

from __future__ import annotations

import pytest
import torch

from optiml.evaluate.checks import (
    chunks,
    compare,
    flat_words,
    fresh_outputs,
    modified_inputs,
    quick_match,
    same_bytes,
)


def test_chunks_cover_every_index_once() -> None:
    assert list(chunks(10, 4)) == [(0, 4), (4, 8), (8, 10)]
    assert list(chunks(8, 4)) == [(0, 4), (4, 8)]
    assert list(chunks(0, 4)) == []


def test_words_are_the_widest_integer_that_tiles_the_bytes() -> None:
    assert flat_words(torch.zeros(6, dtype=torch.float32)).dtype == torch.int64
    assert flat_words(torch.zeros(3, dtype=torch.float32)).dtype == torch.int32
    assert flat_words(torch.zeros(3, dtype=torch.float16)).dtype == torch.int16
    assert flat_words(torch.zeros(3, dtype=torch.uint8)).dtype == torch.uint8
    assert flat_words(torch.zeros(6, dtype=torch.float32)).numel() == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.uint8, torch.int64])
@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 26])
def test_same_bytes_finds_a_change_at_every_chunk_boundary(dtype: torch.dtype, chunk: int) -> None:
    pristine = (torch.rand(5, 13) * 100).to(dtype)
    words = flat_words(pristine.clone()).numel()
    for flat in {min(words - 1, i) for i in (0, chunk - 1, chunk, 2 * chunk + 1)} | {words - 1}:
        used = pristine.clone()
        raw = used.reshape(-1).view(torch.uint8)
        width = raw.numel() // words
        raw[flat * width] ^= 1  # one bit in the word at `flat`
        assert not same_bytes(pristine, used, chunk), (flat, chunk)
        assert modified_inputs([pristine, 2], [used, 2], chunk) == [0]
    assert same_bytes(pristine, pristine.clone(), chunk)


def test_same_bytes_of_a_misaligned_view_compares_bytes() -> None:
    base = torch.arange(64, dtype=torch.uint8)
    odd = base[1:33]  # starts at an odd address: no wider words
    assert flat_words(odd).dtype == torch.uint8
    assert same_bytes(odd, odd.clone(), chunk=5)
    changed = odd.clone()
    changed[31] = 0
    assert not same_bytes(odd, changed, chunk=5)


@pytest.mark.parametrize("chunk", [1, 4, 5, 1 << 26])
def test_chunked_comparison_reports_what_the_whole_one_does(chunk: int) -> None:
    ref = torch.rand(4, 5, 3) + 0.5
    out = ref.clone()
    out[2, 1, 0] = float("nan")
    out[3, 4, 2] += 0.5
    out[0, 0, 1] += 1e-3
    result = compare([out], [ref], 1e-4, 1e-4, chunk=chunk)
    assert not result.passed and result.mismatched == 3 and result.nan_count == 1
    assert result.max_abs_err == pytest.approx(0.5, rel=1e-5)
    assert "first at flat index 1:" in result.message  # out[0, 0, 1]: row-major flat index 1
    assert not quick_match([out], [ref], 1e-4, 1e-4, chunk=chunk)
    assert quick_match([ref.clone()], [ref], 1e-4, 1e-4, chunk=chunk)
    ints = torch.arange(20)
    bad = ints.clone()
    bad[17] = 0
    assert compare([bad], [ints], 0, 0, chunk=chunk).mismatched == 1
    assert not quick_match([bad], [ints], 0, 0, chunk=chunk)


def test_poisoned_integer_outputs_are_all_ones_in_every_word() -> None:
    for expected in (torch.arange(7, dtype=torch.int64), torch.arange(7, dtype=torch.int16).reshape(7, 1)):
        (out,) = fresh_outputs([expected])
        assert (out.reshape(-1).view(torch.uint8) == 0xFF).all()


@pytest.mark.gpu
def test_a_4_5_gib_input_is_compared_correctly_on_the_gpu() -> None:
    """1.2e9 float32 elements: 4.8e9 bytes, past 2**32 — the size where 'modified input' was misjudged."""
    free, _ = torch.cuda.mem_get_info()
    if free < 16 * 2**30:
        pytest.skip("needs 16 GiB of free GPU memory")
    pristine = torch.rand(1_200_000_000, device="cuda")
    used = pristine.clone()
    assert same_bytes(pristine, used)
    assert modified_inputs([pristine], [used]) == []
    for flat in (2**30 + 7, pristine.numel() - 1):  # bytes past 2**32, and the very last element
        used[flat] += 1.0
        assert modified_inputs([pristine], [used]) == [0]
        used.copy_(pristine)
    assert compare([used], [pristine], 1e-4, 1e-4).passed
    used[-1] = float("nan")
    result = compare([used], [pristine], 1e-4, 1e-4)
    assert not result.passed and result.nan_count == 1 and f"flat index {pristine.numel() - 1}" in result.message
