"""``sparse_thc``: THC of the union of the workers' nonzero rows, exact zeros elsewhere.

On random row-sparse gradients (hypothesis): every row no worker touched decodes to exactly
zero, and the union's rows decode bit for bit to what THC itself gives for the union's values
alone (same seed, same agreed norm), so the codec is THC on a shorter vector and nothing else.
Through the switch: ``tests/worker/test_allreduce_e2e.py`` (``sparse_thc``).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from hina.worker.codecs import (CodecError, SparseThcCodec, ThcCodec, float_to_max_code,
                                reference_aggregate, reference_agree, reference_allreduce)


def _row_sparse(n: int, rows: int, granule: int, density: float, seed: int) -> list:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        g = torch.randn(rows * granule, generator=gen)
        keep = torch.rand(rows, generator=gen) < density
        g[~keep.repeat_interleave(granule)] = 0.0
        out.append(g)
    return out


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4), rows=st.integers(1, 300), granule=st.sampled_from([1, 4, 16]),
       cut=st.integers(0, 3), density=st.sampled_from([0.0, 0.02, 0.2, 1.0]),
       seed=st.integers(0, 1 << 16))
def test_union_rows_are_thc_of_the_union_and_the_rest_exactly_zero(n, rows, granule, cut,
                                                                   density, seed):
    grads = [g[:max(0, g.numel() - cut)] for g in _row_sparse(n, rows, granule, density, seed)]
    numel = grads[0].numel()
    codecs = [SparseThcCodec(n, rank=r, seed=7, granule=granule) for r in range(n)]
    out = reference_allreduce(codecs, grads, key=3)
    assert all(torch.equal(o, out[0]) for o in out)          # every worker decodes alike

    touched = torch.zeros(numel, dtype=torch.bool)
    for g in grads:
        touched |= g != 0
    pad = -numel % granule
    union_rows = torch.cat([touched, touched.new_zeros(pad)]).view(-1, granule).any(dim=1)
    where = union_rows.repeat_interleave(granule)[:numel]
    assert codecs[0].last_union[3] == int(union_rows.sum())
    assert torch.count_nonzero(out[0][~where]) == 0

    if where.any():     # THC of the union's values with the norm of the whole gradients
        thc = [ThcCodec(n, rank=r, seed=7, error_feedback=False) for r in range(n)]
        values = [g[where] for g in grads]
        for c, v in zip(thc, values):
            c.agreement(v, 3)
        agreed = reference_agree([float_to_max_code(g.norm().reshape(1)) for g in grads])
        lanes = [c.encode(v, agreed, 3) for c, v in zip(thc, values)]
        want = thc[0].decode(reference_aggregate(lanes), agreed, 3, lanes[0].meta)
        assert torch.equal(out[0][where], want)


def test_an_all_zero_bucket_stops_after_the_bitmap_round():
    codecs = [SparseThcCodec(2, rank=r) for r in range(2)]
    grads = [torch.zeros(5, 16) for _ in range(2)]
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    assert [s.name for s in lanes[0].streams] == ["nonzero_rows"]
    aggregated = reference_aggregate(lanes)
    assert codecs[0].followup(aggregated, agreed, meta=lanes[0].meta) is None
    out = codecs[0].decode(aggregated, agreed, meta=lanes[0].meta)
    assert out.shape == (5, 16) and torch.count_nonzero(out) == 0


def test_only_the_unions_rows_travel():
    """Bytes of the THC round: 4-bit indices of the union's values (padded to THC's block)."""
    grads = [torch.zeros(1000, 16) for _ in range(2)]
    grads[0][[1, 500]] = 1.0
    grads[1][[500, 999]] = -1.0
    codecs = [SparseThcCodec(2, rank=r) for r in range(2)]
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    assert lanes[0].nbytes == 4 * -(-1000 // 32)               # the row bitmap
    more = codecs[0].followup(reference_aggregate(lanes), agreed, meta=lanes[0].meta)
    # 3 union rows of 16 values, padded to THC's power-of-two block: 64 indices in 32 bytes
    assert more.streams[0].count == 64 and more.nbytes == 32
    assert codecs[0].last_union[0] == 3


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="granule"):
        SparseThcCodec(2, granule=0)
    with pytest.raises(ValueError, match="error feedback"):
        SparseThcCodec(2, error_feedback=True)
    with pytest.raises(CodecError, match="followup without encode"):
        SparseThcCodec(1).followup([torch.zeros(1, dtype=torch.uint32)], torch.zeros(1),
                                   meta={"round": "rows", "numel": 16})
