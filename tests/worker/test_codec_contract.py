"""Every codec honours the same contract: wire dtypes, empty/odd sizes, bad input refused."""
import pytest
import torch

from worker.codecs import (CodecError, FixedPointCodec, LaneOp, LosslessSketchCodec, NonFiniteGradientError,
                           SketchCodec, ThcCodec, reference_aggregate, reference_agree)

WIRE = {LaneOp.SUM: torch.int32, LaneOp.LUTSUM: torch.uint8, LaneOp.MAX: torch.uint32, LaneOp.OR: torch.uint32}
FACTORIES = {
    "thc": lambda n: ThcCodec(n),
    "fixed": lambda n: FixedPointCodec(n, block=8),
    "sketch": lambda n: SketchCodec(n, rows=3, columns=64, k=2),
    "lossless": lambda n: LosslessSketchCodec(n, columns=64),
}


def roundtrip(codecs, grads):
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    return agreed, lanes, codecs[0].decode(reference_aggregate(lanes), agreed, meta=lanes[0].meta)


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("shape", [(0,), (1,), (3,), (5, 7)])
def test_sizes_and_wire_dtypes(name, shape):
    codecs = [FACTORIES[name](2) for _ in range(2)]
    grads = [torch.randn(shape, dtype=torch.float64) for _ in range(2)]
    agreed, lanes, out = roundtrip(codecs, grads)
    assert agreed.dtype == torch.uint32
    assert out.shape == grads[0].shape and out.dtype == grads[0].dtype and torch.isfinite(out).all()
    for s in lanes[0].streams:
        assert s.data.dtype == WIRE[s.op] and s.data.dim() == 1


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_refused(name, bad):
    g = torch.randn(50)
    g[3] = bad
    with pytest.raises(NonFiniteGradientError, match="non-finite"):
        FACTORIES[name](2).agreement(g, key="bucket7")


@pytest.mark.parametrize("name", FACTORIES)
def test_wrong_streams_refused(name):
    codec = FACTORIES[name](1)
    agreed, (lanes,), _ = roundtrip([codec], [torch.randn(40)])
    agg = reference_aggregate([lanes])
    with pytest.raises(CodecError):
        codec.decode(agg + [agg[0]], agreed, meta=lanes.meta)
    with pytest.raises(CodecError):
        codec.decode([t[:-1] for t in agg], agreed, meta=lanes.meta)


def test_non_tensor_refused():
    with pytest.raises(ValueError, match="floating-point"):
        ThcCodec(1).agreement(torch.arange(4))
