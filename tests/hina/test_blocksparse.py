"""hina.blocksparse: the worker side of block-sparse rounds, and its references, without a
switch: a simulated switch (min of announcements, sum of lanes) must visit exactly the
reference rounds and give the reference sum; bad input and contradicting results are refused."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hina import blocksparse as B
from hina import protocol as P


def _simulate(qs, words, n_slots):
    """Every worker's StreamState against an ideal switch; returns (rounds, sum)."""
    n_blocks = B.block_count(qs[0].size, words)
    blocks = [B.as_blocks(q, words) for q in qs]
    states = [[B.StreamState(B.nonzero_blocks(q, words), s, n_slots, n_blocks)
               for s in range(n_slots)] for q in qs]
    out = np.zeros((n_blocks, words), dtype=np.int64)
    rounds = {}
    for s in range(n_slots):
        while not states[0][s].done:
            msgs = [st[s].message() for st in states]
            assert len({m[1] for m in msgs}) == 1          # every worker: the same block
            block = msgs[0][1]
            for w, (op, b, nxt) in enumerate(msgs):
                assert nxt > b
                if op is P.Op.BLOCK_SUM:
                    out[b] += blocks[w][b]
                else:
                    assert not blocks[w][b].any()
            nxt = min(m[2] for m in msgs)
            rounds.setdefault(s, []).append(block)
            for st in states:
                st[s].advance(block, nxt)
    return rounds, out.reshape(-1)[:qs[0].size]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 4), n_blocks=st.integers(0, 9), words=st.sampled_from([1, 4]),
       n_slots=st.integers(1, 4), seed=st.integers(0, 2 ** 32 - 1),
       density=st.sampled_from([0.0, 0.3, 1.0]))
def test_rounds_visit_the_union_of_nonzero_blocks_and_sum_exactly(n, n_blocks, words, n_slots,
                                                                   seed, density):
    rng = np.random.default_rng(seed)
    length = max(0, n_blocks * words - rng.integers(0, words))
    qs = []
    for _ in range(n):
        q = rng.integers(-1000, 1000, length).astype(np.int32)
        keep = np.repeat(rng.random(n_blocks) < density, words)[:length]
        q[~keep] = 0
        qs.append(q)
    rounds, total = _simulate(qs, words, n_slots)
    nb = B.block_count(length, words)
    assert rounds == B.reference_rounds([B.nonzero_blocks(q, words) for q in qs], nb, n_slots)
    np.testing.assert_array_equal(total, B.reference_sum(qs))


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="need 0 <= block < next"):
        B.pack_block_header(5, 5)
    with pytest.raises(ValueError, match="1-D int32"):
        B.as_blocks(np.zeros(4, dtype=np.int64), 2)
    with pytest.raises(ValueError, match="shorter than the 8-byte"):
        B.unpack_block_header(b"\0" * 7)
    with pytest.raises(ValueError, match="overflows int32"):
        B.reference_sum([np.full(2, 2 ** 31 - 1, np.int32)] * 2)
    st = B.StreamState([1, 3, 5], slot=1, n_slots=2, n_blocks=6)
    assert st.message() == (P.Op.BLOCK_SUM, 1, 3)
    with pytest.raises(ValueError, match="result for block 3, expected block 1"):
        st.advance(3, 5)
    with pytest.raises(ValueError, match="skips this worker's nonzero block 3"):
        st.advance(1, 5)
    with pytest.raises(ValueError, match="not a later block of this stream"):
        st.advance(1, 4)
    st.advance(1, 3)
    st.advance(3, 5)
    st.advance(5, P.BLOCK_END)
    assert st.done and st.round == 3
    with pytest.raises(ValueError, match="stream is done"):
        st.message()
