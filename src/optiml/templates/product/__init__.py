"""What the product families (GEMM and conv) share: the fused epilogue (:mod:`.epilogue`) and the
``mma.sync`` pieces (:mod:`.mma`). Not a family: no registration."""
