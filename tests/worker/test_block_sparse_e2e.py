"""The ``block_sparse`` codec end to end through the embedded switch running p4/hina.p4.

Random block-sparse gradients (all-zero and all-dense included) for 2-4 workers: the sum the
switch returns must be bit-equal to the fixed-point reference of the same quantisation (the
``fixed`` codec driven by numpy sums), with and without loss on every switch port, over
several calls in a row (pool copies alternate across calls); blocks zero at every worker are
never sent, and a zero block costs its worker only the block header.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from hina import protocol as P
from hina.testing.switchjob import WORDS, LocalJob, allreduce_steps, run_workers
from hina.worker.codecs import BlockSparseCodec, FixedPointCodec, reference_allreduce
from hina.worker.codecs import registry
from hina.worker.collective import allreduce
from hina.worker.transport import PAD_BLOCK

NUMEL = 40 * WORDS - 13          # 40 wire blocks, the last one short


def _grads(n: int, density: float, seed: int) -> list[torch.Tensor]:
    """Per worker, each wire block nonzero with probability ``density`` (a few exact zeros in
    nonzero blocks too)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        g = torch.randn(NUMEL, generator=gen)
        keep = torch.rand(-(-NUMEL // WORDS), generator=gen) < density
        g[~keep.repeat_interleave(WORDS)[:NUMEL]] = 0.0
        g[torch.randint(0, NUMEL, (50,), generator=gen)] = 0.0
        out.append(g)
    return out


def _wire_blocks(g: torch.Tensor) -> int:
    pad = torch.cat([g, g.new_zeros(-g.numel() % WORDS)])
    return int((pad.view(-1, WORDS) != 0).any(dim=1).sum())


@pytest.mark.parametrize("n,density,loss", [(2, 0.0, 0.0), (3, 0.2, 0.0), (4, 1.0, 0.0),
                                            (3, 0.3, 0.05)],
                         ids=["2-all-zero", "3-sparse", "4-all-dense", "3-sparse-5%-loss"])
def test_block_sparse_allreduce_is_bit_equal_to_the_fixed_point_reference(program, n, density,
                                                                          loss):
    grads = _grads(n, density, seed=n * 100 + int(density * 10))
    steps = 3
    codecs = [registry.build("block_sparse", n, rank=w) for w in range(n)]
    assert all(isinstance(c, BlockSparseCodec) for c in codecs)
    results, transports = allreduce_steps(LocalJob(program, n, n_slots=3, loss=loss), codecs, grads,
                                          steps)
    reference = [FixedPointCodec(n, rank=w) for w in range(n)]
    want = reference_allreduce(reference, grads)
    for w in range(n):
        for step in range(steps):
            assert torch.equal(results[w][step], want[w]), (w, step)
    # Only nonzero blocks carried lanes: the data call's BLOCK_SUM bytes are exactly theirs.
    # (Counted without retransmissions: a loaded machine may retransmit spuriously.)
    stats = transports[0].last
    rounds = stats.chunks
    lanes_bytes = stats.bytes_sent - stats.packets_sent * (P.HEADER_BYTES + P.BLOCK_HEADER_BYTES)
    if stats.retransmissions == 0:
        assert lanes_bytes == 4 * WORDS * _wire_blocks(grads[0])
    if density == 0.0:
        # every stream: its first block only (3 slots), no padding needed
        assert rounds == 3 and stats.results == 3
    if loss:
        assert sum(t.total.retransmissions for t in transports) > 0


def test_padding_keeps_pool_copies_alternating_across_calls(program):
    """Streams of different lengths: the short ones get one padding round when their parity
    differs, and the next call (a dense SUM) still goes through every slot."""
    n = 2
    grads = [torch.zeros(6 * WORDS) for _ in range(n)]
    grads[0][4 * WORDS] = 1.0          # block 4: stream 1 of 3 slots runs blocks 1, 4
    codecs = [BlockSparseCodec(n, rank=w) for w in range(n)]
    job = LocalJob(program, n, n_slots=3)
    transports = job.transports(min_rto=0.03, give_up_s=20.0)
    try:
        results, errors = run_workers(
            lambda w, t: (allreduce(grads[w], codecs[w], t, key=0), t.last.chunks,
                          t.reduce_block_sparse(np.zeros(0, np.int32)),
                          t.reduce(P.Op.SUM, np.arange(10 * WORDS, dtype=np.int32))),
            transports)
    finally:
        job.close()
    assert errors == [None] * n, errors
    for w in range(n):
        got, chunks, empty, dense = results[w]
        assert chunks == 4 + 2             # rounds 1 + 2 + 1, and slots 0 and 2 padded
        assert torch.equal(got, reference_allreduce([FixedPointCodec(n) for _ in range(n)],
                                                    grads)[0])
        assert empty.size == 0
        np.testing.assert_array_equal(dense, 2 * np.arange(10 * WORDS))
    assert PAD_BLOCK == P.BLOCK_END - 1


def test_block_sparse_codec_is_the_fixed_codec_on_another_lane_op():
    x = torch.randn(1000)
    a, b = BlockSparseCodec(3), FixedPointCodec(3)
    la, lb = a.encode(x, a.agreement(x)), b.encode(x, b.agreement(x))
    assert torch.equal(la.streams[0].data, lb.streams[0].data)
    assert la.streams[0].op.name == "BLOCK_SUM" and a.name == "block_sparse"
