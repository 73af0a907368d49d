"""Every codec honours the same contract: wire dtypes, empty/odd sizes, bad input refused, and a
failed all-reduce undone by snapshot/restore leaves no trace (a retry is a clean call)."""
import pytest
import torch

from hina.worker.codecs import (CodecError, FixedPointCodec, LaneOp, LosslessSketchCodec, NonFiniteGradientError,
                           SketchCodec, SketchedSgdCodec, SparseThcCodec, ThcCodec, reference_aggregate,
                           reference_agree, reference_allreduce)

WIRE = {LaneOp.SUM: torch.int32, LaneOp.LUTSUM: torch.uint8, LaneOp.MAX: torch.uint32, LaneOp.OR: torch.uint32}
FACTORIES = {
    "thc": lambda n: ThcCodec(n),
    "fixed": lambda n: FixedPointCodec(n, block=8),
    "fetchsgd": lambda n: SketchCodec(n, rows=3, columns=64, k=2),
    "lossless": lambda n: LosslessSketchCodec(n, columns=64),
    "sparse_thc": lambda n: SparseThcCodec(n, granule=4),
}


def roundtrip(codecs, grads):
    """Every round of one all-reduce: the agreed values, the last round's lanes, the mean."""
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    aggregated = reference_aggregate(lanes)
    while (more := [c.followup(aggregated, agreed, meta=lane.meta)
                    for c, lane in zip(codecs, lanes)])[0] is not None:
        lanes, aggregated = more, reference_aggregate(more)
    return agreed, lanes, codecs[0].decode(aggregated, agreed, meta=lanes[0].meta)


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


# ------------------------------------------------------------------------------------------------
# snapshot / restore: a retried (or abandoned) all-reduce leaves no trace in the codec
# ------------------------------------------------------------------------------------------------
STATEFUL = {
    "thc": lambda n, r: ThcCodec(n, rank=r, seed=3),
    "fixed_stochastic": lambda n, r: FixedPointCodec(n, block=8, stochastic=True, rank=r),
    "fetchsgd": lambda n, r: SketchCodec(n, rows=3, columns=64, k=4),
    "sketched_sgd": lambda n, r: SketchedSgdCodec(n, rows=3, columns=64, k=8, momentum=0.5,
                                                  rotate=3),
    "lossless": lambda n, r: LosslessSketchCodec(n, columns=64),
    "sparse_thc": lambda n, r: SparseThcCodec(n, rank=r, seed=3, granule=8),
}
STAGES = ["agreement", "encode", "followup", "decode"]


def _grads(step: int, n: int, numel: int = 300) -> list:
    gen = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(numel, generator=gen) for _ in range(n)]


def _abandoned(codecs, grads, key, stage: str) -> None:
    """An all-reduce that stops after ``stage`` (the transport failed there); ``decode``: it
    completed on this worker, but the result is thrown away (the DDP hook's fp32 fallback when
    another worker failed)."""
    if stage == "decode":
        reference_allreduce(codecs, grads, key)
        return
    agreed = reference_agree([c.agreement(g, key) for c, g in zip(codecs, grads)])
    if stage == "agreement":
        return
    lanes = [c.encode(g, agreed, key) for c, g in zip(codecs, grads)]
    if stage == "encode":
        return
    aggregated = reference_aggregate(lanes)
    for c, lane in zip(codecs, lanes):
        c.followup(aggregated, agreed, key, lane.meta)


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name", STATEFUL)
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("fail_at", [0, 1])
def test_restored_retry_equals_a_clean_call(name, stage, fail_at):
    """Call ``fail_at`` of a bucket fails twice at ``stage`` and is restored each time; its
    retry, and the next call, give bit for bit what codecs that never failed give."""
    n, key = 2, 5
    clean = [STATEFUL[name](n, r) for r in range(n)]
    retried = [STATEFUL[name](n, r) for r in range(n)]
    for step in range(fail_at):
        assert _same(reference_allreduce(clean, _grads(step, n), key),
                     reference_allreduce(retried, _grads(step, n), key))
    grads = _grads(fail_at, n)
    snaps = [c.snapshot(key) for c in retried]
    for _ in range(2):                   # the same snapshot restores any number of times
        _abandoned(retried, grads, key, stage)
        for c, snap in zip(retried, snaps):
            c.restore(key, snap)
    out = reference_allreduce(retried, grads, key)
    for c, snap in zip(retried, snaps):
        c.release(key, snap)
    assert _same(out, reference_allreduce(clean, grads, key))
    for step in (fail_at + 1, fail_at + 2):          # what carries over is the clean state too
        assert _same(reference_allreduce(retried, _grads(step, n), key),
                     reference_allreduce(clean, _grads(step, n), key))


@pytest.mark.parametrize("name,stage", [("thc", "encode"), ("fixed_stochastic", "encode"),
                                        ("sketched_sgd", "agreement"), ("fetchsgd", "decode")])
def test_without_restore_a_retry_differs(name, stage):
    """The state restore puts back is real: without it, the retry is not the clean call."""
    n, key = 2, 0
    clean = [STATEFUL[name](n, r) for r in range(n)]
    retried = [STATEFUL[name](n, r) for r in range(n)]
    for codecs in (clean, retried):
        reference_allreduce(codecs, _grads(0, n), key)
    _abandoned(retried, _grads(1, n), key, stage)
    assert not _same(reference_allreduce(retried, _grads(1, n), key),
                     reference_allreduce(clean, _grads(1, n), key))


def test_thc_snapshot_pins_the_residual_and_release_recycles_it():
    """A THC snapshot keeps the residual by reference: the codec never writes it while the
    snapshot lives (no copy needed), and reuses it as a buffer once released."""
    codec = ThcCodec(1)
    reference_allreduce([codec], [torch.randn(256)])
    before = codec.states[0].residual
    kept = before.clone()
    snap = codec.snapshot(0)
    for step in range(3):               # calls that would have recycled it as their buffer
        reference_allreduce([codec], [torch.randn(256)])
    assert torch.equal(before, kept)
    codec.release(0, snap)
    reference_allreduce([codec], [torch.randn(256)])
    assert codec.states[0].pinned is None
