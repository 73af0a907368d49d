"""Count sketch: linearity, heavy hitters, FetchSGD state, lossless peeling, in-switch pairs."""
import math

import pytest
import torch

from hina.hashing import sketch_hash_scalar
from hina.worker.codecs.base import reference_aggregate, reference_agree
from hina.worker.codecs.errors import CodecError, NonFiniteGradientError
from hina.worker.codecs.fixedpoint import agreement_codes
from hina.worker.codecs.lossless import (LosslessSketchCodec, bitmap_from_indices, encode_sparse_pairs,
                                         indices_from_bitmap, peel)
from hina.worker.codecs.sketch import (LOSSLESS_ROWS, PEELING_LOAD_THRESHOLD, CountSketch, SketchCodec,
                                       largest_first_index, median_of_rows)

Z_BOUND = 6.0


def run_round(codecs, grads, key=0):
    agreed = reference_agree([c.agreement(g, key) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed, key) for c, g in zip(codecs, grads)]
    return agreed, lanes, reference_aggregate(lanes)


def test_hashes_match_scalar_reference():
    cs = CountSketch(3, 256, seed=77)
    idx = torch.tensor([0, 5, 1 << 20, (1 << 32) - 1])
    cells, signs = cs.hashes(idx)
    for r in range(3):
        for j, i in enumerate(idx.tolist()):
            h = sketch_hash_scalar(77, r, i)
            assert cells[r, j] == r * 256 + (h & 255) and signs[r, j] == (1 if h >> 31 == 0 else -1)


def test_linearity_bit_exact_in_integers():
    cs = CountSketch(5, 128, seed=3)
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randint(-(1 << 20), 1 << 20, (5000,), generator=gen) for _ in range(2))
    assert torch.equal(cs.sketch(a + b), cs.sketch(a) + cs.sketch(b))
    nz = b.nonzero().reshape(-1)
    assert torch.equal(cs.sketch_sparse(nz, b[nz]), cs.sketch(b))  # the switch's per-pair path


def test_heavy_hitters_recovered_on_planted_vector():
    """Per-row error of an estimate ~ sigma * sqrt(d / c); heavies at 20x that are found."""
    d, c, rows, k, sigma = 50_000, 1024, 5, 20, 1.0
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(d, generator=gen) * sigma
    heavy = torch.randperm(d, generator=gen)[:k]
    tau = sigma * math.sqrt(d / c)
    x[heavy] = 20 * tau * torch.sign(torch.randn(k, generator=gen))
    cs = CountSketch(rows, c, seed=11)
    idx, est = cs.heavy_hitters(cs.sketch(x), d, k)
    assert set(idx.tolist()) == set(heavy.tolist())
    # median of 5 rows exceeds Z_BOUND tau only if 3 rows do (Chebyshev: each <= 1/Z^2 + k/c)
    assert (est - x[idx]).abs().max().item() <= Z_BOUND * tau


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 7])
def test_median_of_rows_matches_torch(rows):
    x = torch.randint(-5, 5, (rows, 2000))  # many ties
    assert torch.equal(median_of_rows(x), x.median(dim=0).values)
    f = torch.randn(rows, 100)
    assert torch.equal(median_of_rows(f), f.median(dim=0).values)


def test_sketch_shape_refused():
    cs = CountSketch(3, 64)
    with pytest.raises(CodecError, match="rows=3, columns=64"):
        cs.query(torch.zeros(3, 32), numel=10)
    with pytest.raises(ValueError, match="power of two"):
        CountSketch(3, 100)


def test_fetchsgd_codec_sparse_planted_and_state_identical():
    n, d, k = 4, 20_000, 16
    gen = torch.Generator().manual_seed(2)
    heavy = torch.randperm(d, generator=gen)[:k]
    grads = []
    for _ in range(n):
        g = torch.randn(d, generator=gen) * 0.01
        g[heavy] += 10.0
        grads.append(g)
    codecs = [SketchCodec(n, rows=5, columns=1 << 11, k=k, momentum=0.9) for _ in range(n)]
    agreed, lanes, agg = run_round(codecs, grads)
    outs = [c.decode(agg, agreed, meta=lanes[0].meta) for c in codecs]
    assert all(torch.equal(outs[0], o) for o in outs)  # deterministic aggregator step
    assert set(outs[0].nonzero().reshape(-1).tolist()) == set(heavy.tolist())
    mean = torch.stack(grads).mean(0)
    tau = 0.01 * math.sqrt(d / (1 << 11))
    assert (outs[0][heavy] - mean[heavy]).abs().max().item() <= Z_BOUND * tau + 1e-4
    # error feedback: what was sent left S_e; momentum stopped on touched buckets
    st = codecs[0].states[0]
    assert torch.equal(st.momentum, codecs[1].states[0].momentum)
    sent = codecs[0].cs.sketch_sparse(heavy, outs[0][heavy])
    assert (st.momentum[sent != 0] == 0).all()


def test_fetchsgd_error_feedback_keeps_unsent_mass():
    codec = SketchCodec(1, rows=3, columns=256, k=1, momentum=0.0)
    x = torch.zeros(1000)
    x[3], x[500] = 5.0, 4.0
    agreed, lanes, agg = run_round([codec], [x])
    first = codec.decode(agg, agreed, meta=lanes[0].meta)
    assert first.nonzero().reshape(-1).tolist() == [3]
    agreed, lanes, agg = run_round([codec], [torch.zeros(1000)])
    second = codec.decode(agg, agreed, meta=lanes[0].meta)
    assert second.nonzero().reshape(-1).tolist() == [500]  # delivered one step late
    assert second[500].item() == pytest.approx(4.0, abs=1e-6)


# ----------------------------------------------------------------------- lossless
@pytest.mark.parametrize("count", [0, 1, 31, 32, 33, 1000])
def test_bitmap_roundtrip(count):
    idx = torch.randperm(5000)[:count].sort().values
    words = bitmap_from_indices(idx, 5000)
    assert words.dtype == torch.uint32 and words.numel() == -(-5000 // 32)
    assert torch.equal(indices_from_bitmap(words, 5000), idx)


@pytest.mark.parametrize("contiguous", [False, True])
@pytest.mark.parametrize("load", [0.25, 0.5, 0.7])
def test_peeling_exact_below_threshold(load, contiguous):
    """Random 3-hypergraphs peel w.h.p. below ~0.818; failure odds shrink with size (c = 4096)."""
    assert load < PEELING_LOAD_THRESHOLD
    c = 1 << 12
    cs = CountSketch(LOSSLESS_ROWS, c, seed=int(load * 100))
    m = int(load * LOSSLESS_ROWS * c)
    gen = torch.Generator().manual_seed(m)
    support = torch.arange(m) + 12345 if contiguous else torch.randperm(1 << 20, generator=gen)[:m].sort().values
    vals = torch.randint(-(1 << 24), 1 << 24, (m,), generator=gen)
    vals[vals == 0] = 1
    result = peel(cs, cs.sketch_sparse(support, vals), support)  # == sketch of the dense vector
    assert result.complete and torch.equal(result.values, vals)


def test_peeling_fails_gracefully_above_threshold():
    c = 256
    cs = CountSketch(LOSSLESS_ROWS, c, seed=1)
    m = int(1.2 * LOSSLESS_ROWS * c)
    support = torch.arange(m) * 7
    vals = torch.ones(m, dtype=torch.int64)
    result = peel(cs, cs.sketch_sparse(support, vals), support)
    assert not result.complete and result.values.numel() == m  # median fallback fills the rest


def test_lossless_codec_exact_mean_of_fixed_point():
    n, d, nnz = 4, 20_000, 300
    gen = torch.Generator().manual_seed(4)
    grads = []
    for _ in range(n):
        g = torch.zeros(d)
        g[torch.randperm(d, generator=gen)[:nnz]] = torch.randn(nnz, generator=gen)
        grads.append(g)
    codecs = [LosslessSketchCodec(n, columns=1 << 10) for _ in range(n)]
    agreed, lanes, agg = run_round(codecs, grads)
    out = codecs[0].decode(agg, agreed, meta=lanes[0].meta)
    assert codecs[0].last_peel.complete
    # exact up to the fixed-point step 2**-shift (one rounding per worker, averaged)
    shift = codecs[0]._shift(agreed, 0, out.device).item()
    assert (out - torch.stack(grads).mean(0)).abs().max().item() <= 0.5 * 2.0 ** -shift + 1e-7
    assert lanes[0].streams[0].op.name == "OR" and lanes[0].streams[1].op.name == "SUM"


def test_lossless_non_finite_refused():
    g = torch.zeros(100)
    g[5] = float("nan")
    with pytest.raises(NonFiniteGradientError):
        LosslessSketchCodec(2).agreement(g)


# ----------------------------------------------------------------------- in-switch pairs
def test_sparse_pairs_sketched_by_switch_equal_worker_sketch():
    d, k, n = 10_000, 50, 3
    gen = torch.Generator().manual_seed(5)
    grads = [torch.randn(d, generator=gen) for _ in range(n)]
    agreed = reference_agree([agreement_codes(g, d) for g in grads])
    pairs = [encode_sparse_pairs(g, k, agreed, n) for g in grads]
    cs = CountSketch(3, 512, seed=99)
    switch = cs.empty(torch.int64)
    for p in pairs:  # the switch, pair by pair, with the scalar (zlib) hash
        for i, v in zip(p.indices.tolist(), p.values.tolist()):
            for r in range(3):
                h = sketch_hash_scalar(99, r, i)
                switch[r, h & 511] += v if h >> 31 == 0 else -v
    dense = torch.zeros(d, dtype=torch.int64)
    for p in pairs:
        dense.index_add_(0, p.indices.to(torch.int64), p.values.to(torch.int64))
    assert torch.equal(switch, cs.sketch(dense))
    assert switch.abs().max().item() < 1 << 31


def test_float_pairs_sketch_to_the_same_bits_in_any_order():
    """FetchSGD's aggregator state (replicated on every worker) is updated by sketching its
    heavy hitters: pairs that meet in a cell give the same float32 bits whatever order they
    come in (float64 sums, one rounding), where float32 sums depended on the order (and CUDA's
    index_add_ fixes none)."""
    cs = CountSketch(3, 16, seed=5)  # 16 columns, 400 pairs: many meet in each cell
    gen = torch.Generator().manual_seed(1)
    idx = torch.randperm(100000, generator=gen)[:400]
    vals = torch.randn(400, generator=gen) * torch.logspace(-3, 3, 400)
    first = cs.sketch_sparse(idx, vals)
    assert first.dtype == torch.float32 and first.shape == (3, 16)
    for seed in range(5):
        order = torch.randperm(400, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(cs.sketch_sparse(idx[order], vals[order]).view(torch.int32), first.view(torch.int32))
    exact = torch.zeros(48, dtype=torch.float64)
    cells, signs = cs.hashes(idx)
    for r in range(3):
        exact.index_add_(0, cells[r], vals.double() * signs[r])
    assert torch.equal(first.view(-1), exact.float())  # the correctly rounded sums


def test_heavy_hitters_break_ties_by_index():
    """The k largest magnitudes with ties at the k-th value broken by the lowest index, in
    ascending order: the same set on every device (topk leaves ties to its implementation)."""
    mag = torch.tensor([1.0, 5.0, 3.0, 3.0, 0.0, 3.0, 5.0, 3.0])
    assert largest_first_index(mag, 3).tolist() == [1, 2, 6]
    assert largest_first_index(mag, 5).tolist() == [1, 2, 3, 5, 6]
    assert largest_first_index(mag, 0).tolist() == [] and largest_first_index(mag, 8).tolist() == list(range(8))
    gen = torch.Generator().manual_seed(2)
    ints = torch.randint(0, 20, (5000,), generator=gen).float()  # many ties
    for k in (1, 17, 250, 4999):
        got = largest_first_index(ints, k)
        want = torch.sort(-ints, stable=True).indices[:k].sort().values
        assert torch.equal(got, want)
