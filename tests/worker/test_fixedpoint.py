"""Block fixed point: exponents, the no-overflow guarantee, decode of sums."""
import math

import pytest
import torch

from hina.worker.codecs.base import reference_aggregate, reference_agree
from hina.worker.codecs.errors import CodecError, NonFiniteGradientError
from hina.worker.codecs.fixedpoint import (EXPONENT_MIN, FixedPointCodec, block_exponents, headroom_bits,
                                      shifts, to_fixed)


def test_block_exponents():
    x = torch.tensor([0.5, -0.25, 1.0, 3.0, 0.0, 0.0])
    e = block_exponents(x, 2)
    assert e.tolist() == [0, 2, EXPONENT_MIN]  # 0.5 < 2**0, 3 < 2**2
    assert headroom_bits(1) == 0 and headroom_bits(2) == 1 and headroom_bits(5) == 3


@pytest.mark.parametrize("n", [1, 2, 3, 16, 1000])
def test_worst_case_sum_cannot_overflow(n):
    """Every worker at the largest magnitude its exponent allows, rounding up: sum < 2**31."""
    e = torch.tensor([3])
    top = math.nextafter(2.0 ** 3, 0)  # largest float below 2**E
    x = torch.full((4,), top)
    for gen in (None, torch.Generator().manual_seed(0)):
        q = to_fixed(x, shifts(e, n), 4, gen).to(torch.int64)
        assert n * q.abs().max().item() < 1 << 31
        assert n * to_fixed(-x, shifts(e, n), 4, gen).to(torch.int64).abs().max().item() < 1 << 31


def test_tiny_and_zero_blocks_stay_finite():
    x = torch.tensor([0.0, 0.0, 1e-40, -1e-38])
    q = to_fixed(x, shifts(block_exponents(x, 2), 4), 2)
    assert q[:2].tolist() == [0, 0] and q.abs().max().item() < 1 << 30


@pytest.mark.parametrize("n", [2, 7, 16])
def test_decode_of_sums_is_mean(n):
    gen = torch.Generator().manual_seed(n)
    grads = [torch.randn(1000, generator=gen) * 10 ** (i % 4) for i in range(n)]
    codecs = [FixedPointCodec(n, block=64, stochastic=True, rank=r) for r in range(n)]
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    out = codecs[0].decode(reference_aggregate(lanes), agreed, meta=lanes[0].meta)
    shift = shifts(torch.tensor([e - 1024 for e in agreed.to(torch.int64).tolist()]), n)
    step = torch.repeat_interleave(2.0 ** -shift.double(), 64)[:1000]
    # each worker's stochastic rounding moves it by < one step; the mean by < one step
    assert ((out.double() - torch.stack(grads).double().mean(0)).abs() <= step + 1e-6).all()


def test_bad_input():
    c = FixedPointCodec(2, block=4)
    with pytest.raises(NonFiniteGradientError):
        c.agreement(torch.tensor([1.0, float("inf")]))
    with pytest.raises(CodecError, match="one per block"):
        c.encode(torch.zeros(10), torch.zeros(2, dtype=torch.uint32))
    with pytest.raises(ValueError, match="block"):
        FixedPointCodec(2, block=0)
    with pytest.raises(ValueError, match="n_workers"):
        FixedPointCodec(0)
    empty = torch.zeros(0)
    agreed = c.agreement(empty)
    lanes = c.encode(empty, agreed)
    assert c.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta).numel() == 0
