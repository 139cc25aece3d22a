"""A judge's shared block on a real GPU: torch's cached, unused memory does not make the card look full."""

from __future__ import annotations

import pytest
import torch

from optiml.evaluate.arena import Block

pytestmark = pytest.mark.gpu


def test_block_fits_where_torch_caches_the_memory_it_needs() -> None:
    """A reference's freed temporaries stay in torch's cache; a block that needs them still gets them.

    (level1/25_Swish and 30_Softsign on an H100, 2026-12-06: 6.4 GB inputs, the reference's temporary kept in the
    cache, the trial buffers' block refused with "cuMemCreate failed" on a card whose memory was free to torch.)"""
    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info(device)
    cached = torch.empty(int(free * 0.8), dtype=torch.uint8, device=device)
    del cached  # freed to torch's cache, not to the driver
    assert torch.cuda.memory_reserved(device) >= free * 0.8
    block = Block(int(free * 0.5), device)
    block.bytes.fill_(7)
    assert int(block.bytes[-1]) == 7
    assert torch.cuda.memory_reserved(device) < free * 0.8
    block.close()
