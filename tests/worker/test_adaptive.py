"""The adaptive codec: per bucket and step, the lossless sketch where the union support is sure
to peel and costs fewer bytes, THC elsewhere; the same choice on every worker; results equal to
the chosen codec's own (so sparse buckets are exact to the fixed-point step); a failed call
restored leaves nothing behind."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hina.worker.codecs import (AdaptiveCodec, LosslessSketchCodec, ThcCodec, reference_aggregate,
                                reference_agree, reference_allreduce)

N, NUMEL, COLUMNS = 4, 8192, 256


def _codecs(n=N, columns=COLUMNS, choices=("lossless", "thc")):
    """Lossless or THC unless ``choices`` says otherwise (block-sparse has tests of its own)."""
    return [AdaptiveCodec(n, rank=r, seed=3, columns=columns, sketch_seed=5, choices=choices)
            for r in range(n)]


def _sparse(nnz_per_worker, n=N, numel=NUMEL, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        g = torch.zeros(numel)
        idx = torch.randperm(numel, generator=gen)[:nnz_per_worker]
        g[idx] = torch.randn(len(idx), generator=gen)
        out.append(g)
    return out


def test_capacity_and_choice():
    c = _codecs()[0]
    assert c.capacity == int(0.5 * 3 * COLUMNS)
    fits = c.capacity // N
    assert c.choose(NUMEL, fits) == "lossless"
    assert c.choose(NUMEL, fits + 1) == "thc"               # might not peel: never risked
    # a bucket so small that even the smallest sketch costs more than THC's bytes: THC
    assert c.plan(1000, 100) == ("thc", 0)


def test_the_sketch_is_sized_for_the_bucket():
    """The smallest power-of-two sketch holding n * m at load 0.5, from min_columns up to
    columns: a small sparse bucket goes exact with a small sketch."""
    c = AdaptiveCodec(N, columns=1 << 12, min_columns=256, choices=("lossless", "thc"))
    for m in (0, 1, 10, 100, 1000, 1500):
        cols = c.sketch_columns(m)
        assert cols is not None and N * m <= c.capacity_of(cols), (m, cols)
        assert cols == 256 or N * m > c.capacity_of(cols // 2), (m, cols)
    assert c.sketch_columns(c.capacity // N + 1) is None
    assert c.plan(4000, 1) == ("lossless", 256)              # 7,200 B up and down < THC's 10,000
    assert c.plan(16384, 300) == ("lossless", 1024)          # 1,200 values: 28,672 B < 40,960
    assert c.plan(16384, 600) == ("thc", 0)                  # 2,048 columns: 53,248 B
    with pytest.raises(ValueError, match="power of two"):
        AdaptiveCodec(N, columns=1000)
    with pytest.raises(ValueError, match="exceeds"):
        AdaptiveCodec(N, columns=256, min_columns=512)


def test_sparse_bucket_is_the_lossless_codecs_result_bit_for_bit():
    grads = _sparse(40)
    codecs = _codecs()
    out = reference_allreduce(codecs, grads)
    assert [c.last_choice[0] for c in codecs] == ["lossless"] * N
    columns = codecs[0].last_columns[0]
    assert columns == 256 and all(c.last_columns[0] == columns for c in codecs)   # 160 <= 384
    want = reference_allreduce([LosslessSketchCodec(N, columns=columns, seed=5)
                                for _ in range(N)], grads)
    assert all(torch.equal(o, w) for o, w in zip(out, want))


def test_dense_bucket_is_thcs_result_bit_for_bit():
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(NUMEL, generator=gen) for _ in range(N)]
    codecs = _codecs()
    out = reference_allreduce(codecs, grads)
    assert [c.last_choice[0] for c in codecs] == ["thc"] * N
    want = reference_allreduce([ThcCodec(N, rank=r, seed=3) for r in range(N)], grads)
    assert all(torch.equal(o, w) for o, w in zip(out, want))


def test_one_dense_worker_makes_every_worker_choose_thc():
    grads = _sparse(40)
    grads[2] = torch.randn(NUMEL)
    codecs = _codecs()
    reference_allreduce(codecs, grads)
    assert [c.last_choice[0] for c in codecs] == ["thc"] * N


@settings(max_examples=12, deadline=None)
@given(nnz=st.integers(0, int(0.5 * 3 * COLUMNS) // N), seed=st.integers(0, 2**16), scale=st.floats(1e-3, 1e3))
def test_random_sparse_gradients_are_exact_to_the_fixed_point_step(nnz, seed, scale):
    """Whatever the sparsity within the capacity: lossless chosen, bit-equal to the lossless
    codec's own reference, and within its fixed-point rounding of the true mean unless the
    peel did not finish, which the codec then counts (rare at load <= 0.5)."""
    grads = [g * scale for g in _sparse(nnz, seed=seed)]
    codecs = _codecs()
    out = reference_allreduce(codecs, grads)
    assert codecs[0].last_choice[0] == "lossless"
    want = reference_allreduce([LosslessSketchCodec(N, columns=codecs[0].last_columns[0], seed=5)
                                for _ in range(N)], grads)
    assert all(torch.equal(o, w) for o, w in zip(out, want))
    if codecs[0].incomplete_peels:
        return
    mean = torch.stack(grads).mean(0)
    # The fixed-point step: 2**-s with s = 29 - E - ceil(log2 n) - 1 and 2**E above the
    # largest cell mass (at most a worker's whole L1 mass M): step < M * 2**(1 - 29 + 2 + 1),
    # and the mean's rounding error is at most half a step.
    mass = max(float(g.abs().sum()) for g in grads)
    assert float((out[0] - mean).abs().max()) <= 0.5 * mass * 2.0 ** -25


def _fail_and_restore(codecs, grads):
    """Agreement and the first rounds of a call, then the call thrown away (the chosen codec's
    lanes lost) and every codec restored to its snapshot from before it."""
    snaps = [c.snapshot(0) for c in codecs]
    agreed = reference_agree([c.agreement(g, 0) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed, 0) for c, g in zip(codecs, grads)]
    round2 = reference_aggregate(lanes)
    [c.followup(round2, agreed, 0, l.meta) for c, l in zip(codecs, lanes)]
    chosen = codecs[0].last_columns.get(0)
    for c, s in zip(codecs, snaps):
        c.restore(0, s)
    return chosen


def test_a_failed_call_restored_changes_nothing():
    """Agreement and the first rounds, then the call is thrown away and every codec restored:
    the next call gives what it gives on codecs that never saw the failed one."""
    gen = torch.Generator().manual_seed(2)
    dense = [torch.randn(NUMEL, generator=gen) for _ in range(N)]
    codecs, fresh = _codecs(), _codecs()
    _fail_and_restore(codecs, dense)                  # THC lanes, lost
    for _ in range(2):       # error feedback carries over: two steps
        got = reference_allreduce(codecs, dense)
        want = reference_allreduce(fresh, dense)
        assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_bad_rounds_are_refused():
    c = _codecs()[0]
    g = torch.zeros(NUMEL)
    with pytest.raises(Exception, match="expected 3"):
        c.encode(g, torch.zeros(1, dtype=torch.uint32))
    for bad in ([NUMEL + 1, 1, 1], [1, NUMEL, 1], [1, 1, NUMEL]):     # more than the bucket has
        with pytest.raises(Exception, match="exceeds"):
            c.encode(g, torch.tensor(bad, dtype=torch.int64).to(torch.uint32))
    from hina.worker.codecs import NonFiniteGradientError
    for poisoned in range(3):
        codes = [0, 0, 0]
        codes[poisoned] = (1 << 32) - 1
        with pytest.raises(NonFiniteGradientError, match="agreed"):
            c.encode(g, torch.tensor(codes, dtype=torch.int64).to(torch.uint32))
    g[3] = float("nan")
    with pytest.raises(NonFiniteGradientError, match="local"):
        c.agreement(g)


def test_a_failed_lossless_call_restored_changes_nothing():
    """The same with a sparse bucket whose sketch size is first used in the failed call."""
    grads = _sparse(40, seed=9)
    codecs, fresh = _codecs(), _codecs()
    assert _fail_and_restore(codecs, grads) == 256    # lossless lanes of a 256-column sketch, lost
    assert 0 not in codecs[0].last_columns
    got = reference_allreduce(codecs, grads)
    want = reference_allreduce(fresh, grads)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


# ------------------------------------------------------------------ block-sparse among the choices
def test_agreement_counts_nonzeros_and_nonzero_blocks():
    c = AdaptiveCodec(N, words=128)
    g = torch.zeros(1000)
    g[[0, 5, 130, 999]] = 1.0
    # blocks 0, 1 and the padded last one; rows (16 values) 0, 8 and the padded last one, 62
    assert c.agreement(g).tolist() == [4, 3, 3]


def test_the_cheapest_allowed_codec_is_chosen():
    """By the byte model: clustered nonzeros (few blocks) go block-sparse, scattered ones to
    the lossless sketch, dense ones to THC; a job's declared set limits the choice."""
    c = AdaptiveCodec(N, words=128, columns=1 << 12)
    numel = 1 << 16
    assert c.choose(numel, 512, 4) == "block_sparse"      # 512 values in 4 blocks
    assert c.choose(numel, 512, 512) == "lossless"        # one value per block
    assert c.choose(numel, numel, numel // 128, numel // 16) == "thc"  # dense
    # 4,096 values per worker in 256 rows of 16, spread over 256 blocks: too many for the
    # sketch, too many blocks for block-sparse; THC of the <= 1,024 union rows: 42 kB < 164 kB
    assert c.choose(numel, 4096, 256, 256) == "sparse_thc"
    costs = c.wire_bytes(numel, 512, 4)
    assert set(costs) == {"thc", "lossless", "block_sparse", "sparse_thc"}
    assert min(costs, key=lambda k: costs[k][0]) == "block_sparse"
    only_exact = AdaptiveCodec(N, choices=("block_sparse", "lossless"))
    assert only_exact.choose(numel, numel, numel // 128) == "block_sparse"   # dense, exact
    rows_only = AdaptiveCodec(N, choices=("lossless", "sparse_thc"))
    assert rows_only.choose(numel, numel, numel // 128, numel // 16) == "sparse_thc"
    with pytest.raises(ValueError, match="for dense buckets"):
        AdaptiveCodec(N, choices=("lossless",))
    with pytest.raises(ValueError, match="distinct names"):
        AdaptiveCodec(N, choices=("thc", "powersgd"))


def test_block_sparse_choice_is_the_block_sparse_codecs_result_bit_for_bit():
    from hina.worker.codecs import BlockSparseCodec
    gen = torch.Generator().manual_seed(4)
    grads = []
    for _ in range(N):
        g = torch.zeros(NUMEL)
        g[256:256 + 100] = torch.randn(100, generator=gen)   # one worker-shared region
        grads.append(g)
    codecs = [AdaptiveCodec(N, rank=r, seed=3) for r in range(N)]
    out = reference_allreduce(codecs, grads)
    assert [c.last_choice[0] for c in codecs] == ["block_sparse"] * N
    want = reference_allreduce([BlockSparseCodec(N, rank=r) for r in range(N)], grads)
    assert all(torch.equal(o, w) for o, w in zip(out, want))


# ------------------------------------------------------------------ THC of the touched rows
def test_rows_too_many_for_the_exact_codecs_go_to_sparse_thc_bit_for_bit():
    """200 scattered rows of 16 values per worker in 1,024 rows: every 128-value block is
    touched (block-sparse costs more than THC), the union is too large for the sketch; THC of
    the <= 800 union rows costs less than THC of the bucket. The result is SparseThcCodec's own,
    and the rows no worker touched stay exactly zero."""
    from hina.worker.codecs import SparseThcCodec
    gen = torch.Generator().manual_seed(8)
    grads = []
    for _ in range(N):
        g = torch.zeros(1024, 16)
        g[torch.randperm(1024, generator=gen)[:200]] = torch.randn(200, 16, generator=gen)
        grads.append(g.reshape(-1))
    codecs = [AdaptiveCodec(N, rank=r, seed=3, sketch_seed=5) for r in range(N)]
    out = reference_allreduce(codecs, grads)
    assert [c.last_choice[0] for c in codecs] == ["sparse_thc"] * N
    want = reference_allreduce([SparseThcCodec(N, rank=r, seed=3) for r in range(N)], grads)
    assert all(torch.equal(o, w) for o, w in zip(out, want))
    untouched = torch.stack(grads).abs().sum(0) == 0
    assert untouched.any() and torch.count_nonzero(out[0][untouched]) == 0
    # restricted to the exact codecs and THC (a job's declared set), the same bucket is THC's
    old = [AdaptiveCodec(N, rank=r, seed=3, sketch_seed=5, choices=("block_sparse", "lossless",
                                                                     "thc")) for r in range(N)]
    reference_allreduce(old, grads)
    assert old[0].last_choice[0] == "thc"
