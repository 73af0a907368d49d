"""Two-round Sketched SGD codec, sub-word lanes, multi-round allreduce (reference and transport)."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hina import protocol as P
from hina.worker.codecs import (EncodedLanes, FixedPointCodec, LaneOp, LaneStream, SketchedSgdCodec,
                           reference_aggregate, reference_agree, reference_allreduce)
from hina.worker.codecs.errors import CodecError, NonFiniteGradientError
from hina.worker.codecs.subword import fields_per_lane, from_subword, lanes_for, magnitude_bits, to_subword
from hina.worker.collective import allreduce

N = 4


def _grads(numel, seed, n=N, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(numel, generator=gen) for _ in range(n)]


# ------------------------------------------------------------------ sub-word lanes
@pytest.mark.parametrize("width", [31, 15, 10, 7, 6, 4])
def test_subword_sum_of_extremes_never_carries_or_overflows(width):
    m = magnitude_bits(width, N)
    count = 3 * fields_per_lane(width) + 1
    exps = torch.tensor([0])  # |x| < 1: x * 2**m is the raw integer
    for value in (-(1 << m), (1 << m) - 1, 0):
        xs = [torch.full((count,), value / (1 << m)) for _ in range(N)]
        packed = [to_subword(x, exps, count, width, N) for x in xs]
        lanes = reference_aggregate([EncodedLanes([LaneStream(LaneOp.SUM, p[0], p[0].numel())])
                                     for p in packed])[0]
        assert lanes.numel() == lanes_for(count, width)
        assert int(lanes.to(torch.int64).min()) >= 0
        mean = from_subword(lanes, exps, count, width, N, count)
        assert torch.equal(mean, torch.full((count,), value / (1 << m)))


def test_subword_returns_what_was_sent_for_error_feedback():
    x = torch.tensor([0.30, -0.99, 0.001, 0.5])
    lanes, sent = to_subword(x, torch.tensor([0]), 4, 6, N)   # m = 3: steps of 1/8, range [-1, 7/8]
    assert sent.tolist() == [0.25, -1.0, 0.0, 0.5]     # rounded to 1/8, -0.99 clamped to -1
    four = (lanes.to(torch.int64) * N).to(torch.int32)  # the switch's sum of 4 equal workers
    assert torch.equal(from_subword(four, torch.tensor([0]), 4, 6, N, 4), sent)


def test_subword_refuses_bad_width_and_lane_count():
    with pytest.raises(ValueError):
        magnitude_bits(3, N)            # 2 guard bits + sign leave nothing
    with pytest.raises(ValueError):
        magnitude_bits(32, N)
    lanes, _ = to_subword(torch.ones(10), torch.tensor([1]), 10, 10, N)
    with pytest.raises(CodecError):
        from_subword(lanes[:-1], torch.tensor([1]), 10, 10, N, 10)


# ------------------------------------------------------------------ the codec
def test_exact_when_sketch_and_k_cover_the_support():
    """A sparse gradient whose support fits k, a sketch with few collisions: the exact mean."""
    numel, support = 5000, torch.tensor([3, 77, 1000, 2047, 4999])
    grads = []
    gen = torch.Generator().manual_seed(1)
    for _ in range(N):
        g = torch.zeros(numel)
        g[support] = 10 * torch.randn(support.numel(), generator=gen)
        grads.append(g)
    codecs = [SketchedSgdCodec(N, rows=5, columns=1 << 12, k=support.numel(), seed=9) for _ in range(N)]
    outs = reference_allreduce(codecs, grads)
    want = torch.stack(grads).mean(0)
    for out in outs:
        assert torch.equal(out, outs[0])
        assert torch.allclose(out, want, rtol=0, atol=1e-6)
        assert set(out.nonzero().reshape(-1).tolist()) == set(support.tolist())
    for c in codecs:  # everything sent: only rounding residue is left in e
        assert float(c.states[0].error.abs().max()) < 1e-6


@pytest.mark.parametrize("bits", [(31, 31), (10, 6)])
def test_workers_agree_on_candidates_without_sending_indices(bits):
    numel, k = 3000, 300
    codecs = [SketchedSgdCodec(N, rows=3, columns=128, k=k, sketch_bits=bits[0], value_bits=bits[1],
                               value_blocks=16, rotate=3) for _ in range(N)]
    for step in range(5):
        grads = _grads(numel, step)
        agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
        lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
        round1 = reference_aggregate(lanes)
        lanes2 = [c.followup(round1, agreed, 0, l.meta) for c, l in zip(codecs, lanes)]
        cands = [l.meta["candidates"] for l in lanes2]
        assert all(torch.equal(c, cands[0]) for c in cands) and cands[0].numel() == k
        assert [s.count for s in lanes2[0].streams] == [lanes_for(k, bits[1])]
        round2 = reference_aggregate(lanes2)
        assert all(c.followup(round2, agreed, 0, l.meta) is None for c, l in zip(codecs, lanes2))
        outs = [c.decode(round2, agreed, 0, l.meta) for c, l in zip(codecs, lanes2)]
        assert all(torch.equal(o, outs[0]) for o in outs)
        assert set(outs[0].nonzero().reshape(-1).tolist()) <= set(cands[0].tolist())


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_error_accumulation_telescopes(momentum):
    """n * sum of updates + the workers' final e == everything the workers accumulated."""
    numel = 2000
    codecs = [SketchedSgdCodec(N, rows=3, columns=64, k=100, momentum=momentum, sketch_bits=10,
                               value_bits=6, value_blocks=8) for _ in range(N)]
    applied = torch.zeros(numel, dtype=torch.float64)
    accumulated = torch.zeros(numel, dtype=torch.float64)
    velocity = [torch.zeros(numel, dtype=torch.float64) for _ in range(N)]
    for step in range(12):
        grads = _grads(numel, 100 + step)
        before = [c.states[0].velocity.double().clone() if step and momentum else velocity[w]
                  for w, c in enumerate(codecs)]
        for w, g in enumerate(grads):   # what each worker adds to e this step
            accumulated += (momentum * before[w] + g.double()) if momentum else g.double()
        outs = reference_allreduce(codecs, grads)
        applied += N * outs[0].double()
    left = sum(c.states[0].error.double() for c in codecs)
    assert torch.allclose(applied + left, accumulated, atol=1e-4)
    assert applied.count_nonzero() > 0


def test_bad_input_refused():
    with pytest.raises(ValueError):
        SketchedSgdCodec(N, k=0)
    with pytest.raises(ValueError):
        SketchedSgdCodec(N, k=1.5)
    with pytest.raises(ValueError):
        SketchedSgdCodec(N, momentum=1.0)
    with pytest.raises(ValueError):
        SketchedSgdCodec(N, value_bits=3)
    with pytest.raises(ValueError):
        SketchedSgdCodec(N, rotate=0)
    codecs = [SketchedSgdCodec(N, rows=3, columns=64, k=10) for _ in range(N)]
    bad = _grads(500, 0)
    bad[2][7] = float("nan")
    with pytest.raises(NonFiniteGradientError):
        codecs[2].agreement(bad[2])
    assert codecs[2].states[0].error is None or not torch.isnan(codecs[2].states[0].error).any()
    grads = _grads(500, 1)
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    round1 = reference_aggregate(lanes)
    with pytest.raises(CodecError):   # one round is not enough
        codecs[0].decode(round1, agreed, 0, lanes[0].meta)
    with pytest.raises(CodecError):   # wrong lane count
        codecs[0].followup([round1[0][:-1]], agreed, 0, lanes[0].meta)
    with pytest.raises(CodecError):   # agreement of the wrong size
        codecs[0].followup(round1, agreed[:2], 0, lanes[0].meta)
    poisoned = agreed.clone()
    poisoned[0] = (1 << 32) - 1
    with pytest.raises(NonFiniteGradientError):
        codecs[0].followup(round1, poisoned, 0, lanes[0].meta)
    lanes2 = [c.followup(round1, agreed, 0, l.meta) for c, l in zip(codecs, lanes)]
    round2 = reference_aggregate(lanes2)
    other = dict(lanes2[0].meta, candidates=lanes2[0].meta["candidates"] + 1)
    with pytest.raises(CodecError):   # sums for another candidate set
        codecs[0].decode(round2, agreed, 0, other)
    with pytest.raises(CodecError):
        codecs[0].decode(round2, agreed, 0, None)


def test_reference_allreduce_one_round_codec_unchanged():
    grads = _grads(1000, 5)
    codecs = [FixedPointCodec(N) for _ in range(N)]
    outs = reference_allreduce(codecs, grads)
    assert torch.allclose(outs[0], torch.stack(grads).mean(0), atol=1e-6)


class _LoopbackTransport:
    """One worker's switch: the sum/max/or of one worker is its own data. Counts packets."""

    def __init__(self):
        self.job = SimpleNamespace(n_workers=1, thc_table=None, words=P.WORDS)
        self.calls = []

    def begin_call(self, call_id=None):
        return 0                  # one worker: always at its own call

    def reduce(self, op, data):
        self.calls.append((P.Op(op), data.size))
        return np.array(data, copy=True)


def test_transport_allreduce_runs_every_round():
    codec = SketchedSgdCodec(1, rows=3, columns=64, k=40, sketch_bits=10, value_bits=6, value_blocks=4)
    ref = SketchedSgdCodec(1, rows=3, columns=64, k=40, sketch_bits=10, value_bits=6, value_blocks=4)
    transport = _LoopbackTransport()
    for step in range(3):
        g = _grads(700, step, n=1)[0]
        out = allreduce(g, codec, transport, key=0)
        want = reference_allreduce([ref], [g])[0]
        assert torch.equal(out, want) and out.count_nonzero() <= 40
    ops = [op for op, _ in transport.calls]
    assert ops == [P.Op.MAX, P.Op.SUM, P.Op.SUM] * 3
    assert [size for _, size in transport.calls[:3]] == [3 + 4, lanes_for(3 * 64, 10), lanes_for(40, 6)]


def test_demo_configuration_is_ten_times_smaller_than_fp32_with_headers():
    from hina.demo.digits import L2_L4_BYTES, make_codec, make_model
    n_params = sum(p.numel() for p in make_model().parameters())
    codec = make_codec("sketched_sgd", N, 0)
    lanes = [codec.cs.rows + codec.value_blocks,                              # MAX agreement
             lanes_for(codec.cs.rows * codec.cs.columns, codec.sketch_bits),  # round 1
             lanes_for(codec._k(n_params), codec.value_bits)]                 # round 2
    packets = sum(math.ceil(n / P.WORDS) for n in lanes)
    wire = packets * (L2_L4_BYTES + P.HEADER_BYTES + 4 * P.WORDS)
    assert 4 * n_params / wire >= 10, (packets, wire)


def test_failed_step_leaves_error_untouched_and_hash_rotation_in_step():
    """A step that never reaches decode (the hook then falls back to fp32) changes no e."""
    codecs = [SketchedSgdCodec(N, rows=3, columns=64, k=20, rotate=4) for _ in range(N)]
    reference_allreduce(codecs, _grads(400, 0))
    before = [c.states[0].error.clone() for c in codecs]
    grads = _grads(400, 1)
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    [c.encode(g, agreed) for c, g in zip(codecs, grads)]          # round 1 lost: no decode
    assert all(torch.equal(c.states[0].error, b) for c, b in zip(codecs, before))
    outs = reference_allreduce(codecs, _grads(400, 2))            # next step: all still agree
    assert all(torch.equal(o, outs[0]) for o in outs)
    assert {c.states[0].started for c in codecs} == {3} and {c.states[0].steps for c in codecs} == {2}
