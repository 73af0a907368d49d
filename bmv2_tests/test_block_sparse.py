"""Block-sparse aggregation (ops BLOCK_SUM / BLOCK_SKIP) on every target: whole runs of random
block-sparse vectors (all-zero and all-dense included) with lost results, duplicates and a random
order, checked against the pure numpy reference (hina.blocksparse); the drop reasons of the
block-sparse path; and, on BMv2, the same frames through both targets compared byte for byte
(test_block_sparse_agrees_with_bmv2)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hina import blocksparse as B
from hina import pipeline
from hina import protocol as P
from bmv2_tests.conftest import TEST_WORDS
from hina.testing import frames as J
from hina.testing.blockrun import run_block_sparse, sparse_vectors
from hina.testing.targets import HINA_P4, bmv2_missing


def _send(target):
    return lambda port, frame: target.send(port, frame)


@pytest.mark.parametrize("density", [0.0, 0.3, 1.0], ids=["all-zero", "sparse", "all-dense"])
def test_block_sparse_run_is_bit_equal_to_the_reference(target, density):
    rng = np.random.default_rng(int(density * 10) + 17)
    n_workers, n_blocks = 3, 7
    job = J.make_job(1, n_workers, n_slots=2, reg_base=2)   # aligned: TNA indexes by XOR
    J.install(target, job)
    qs = sparse_vectors(rng, n_workers, n_blocks, TEST_WORDS, density)
    qs[1][: TEST_WORDS * n_blocks - 5] *= density >= 1.0   # worker 1: at most the last block
    run = run_block_sparse(_send(target), job, qs, TEST_WORDS, rng, lose=0.3, duplicate=0.3)
    np.testing.assert_array_equal(run.result, B.reference_sum(qs))
    nonzero = [B.nonzero_blocks(q, TEST_WORDS) for q in qs]
    assert run.rounds == B.reference_rounds(nonzero, n_blocks, job.n_slots)
    assert run.lane_frames == sum(len(nz) for nz in nonzero)   # zero blocks are never sent
    assert J.reason_count(target, P.DropReason.DUPLICATE) == run.duplicates
    assert not run.overflow


def test_block_sum_overflow_is_flagged(target):
    job = J.make_job(1, 2, n_slots=1)
    J.install(target, job)
    big = np.full(TEST_WORDS, (1 << 31) - 1)
    assert J.send(target, job, 0, J.block_contribution(job, 0, 0, P.BLOCK_END, big)) == []
    replies = J.send(target, job, 1, J.block_contribution(job, 1, 0, P.BLOCK_END, big), 2)
    assert len(replies) == 2 and all(r.flags & P.Flag.OVERFLOW for r in replies)
    assert J.reason_count(target, P.DropReason.OVERFLOW) == 1


def test_block_sparse_drops_are_counted(target):
    """Out-of-step blocks (BAD_BLOCK), a next not beyond its block or a wrong length
    (MALFORMED), another generation (NOTICE): dropped, counted, no state changed."""
    job = J.make_job(1, 2, n_slots=2)
    J.install(target, job)
    v = np.arange(TEST_WORDS) - 7
    assert J.send(target, job, 0, J.block_contribution(job, 0, 0, 4, v)) == []
    # Worker 1 names block 2 in slot 0's round of block 0: out of step.
    assert J.send(target, job, 1, J.block_contribution(job, 1, 2, 4, v)) == []
    assert J.reason_count(target, P.DropReason.BAD_BLOCK) == 1
    # next not beyond block; a SKIP carrying lanes; a BLOCK_SUM without them.
    bad = [J.block_contribution(job, 1, 0, 0, v),
           J.frame(job.workers[1], B.pack_block_header(0, 4) + J.words_payload(v),
                   op=P.Op.BLOCK_SKIP, job_id=job.job_id, generation=job.generation),
           J.frame(job.workers[1], B.pack_block_header(0, 4), op=P.Op.BLOCK_SUM,
                   job_id=job.job_id, generation=job.generation)]
    for frame in bad:
        assert J.send(target, job, 1, frame) == []
    assert J.reason_count(target, P.DropReason.MALFORMED) == len(bad)
    stale = J.send(target, job, 1, J.block_contribution(job, 1, 0, 4, generation=job.generation + 1),
                   1)
    assert [r.msg_type for r in stale] == [P.MsgType.NOTICE] and stale[0].length == 42 + 16
    # None of it touched the round: worker 1's SKIP completes it with worker 0's lanes.
    replies = J.send(target, job, 1, J.block_contribution(job, 1, 0, 6), 2)
    assert len(replies) == 2
    assert all(r.block() == (0, 4) and r.count == 2 for r in replies)
    np.testing.assert_array_equal(replies[0].words(), v)


# ------------------------------------------------------------------------------------------------
# Differential: the same frames through the embedded target and BMv2, bytes compared
# ------------------------------------------------------------------------------------------------
@settings(max_examples=6, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_block_sparse_agrees_with_bmv2(data):
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    from bmv2_tests.differential import Differential
    words = TEST_WORDS
    diff = Differential(HINA_P4, {"HINA_WORDS": words})
    n_workers = data.draw(st.integers(2, 4), label="workers")
    n_slots = data.draw(st.integers(1, 3), label="slots")
    job = J.make_job(1, n_workers, n_slots=n_slots, reg_base=data.draw(st.integers(0, 2)),
                     words=words, generation=data.draw(st.integers(1, 3)))
    diff.insert(pipeline.job_entries(job))
    diff.set_mcast_group(*pipeline.multicast_group(job))
    n_blocks = data.draw(st.integers(1, 6), label="blocks")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    density = data.draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]), label="density")
    qs = sparse_vectors(rng, n_workers, n_blocks, words, density)

    def send(port, frame):
        return [(p, f) for p, frames in diff.send(port, frame).items() for f in frames]

    run = run_block_sparse(send, job, qs, words, rng, lose=0.3, duplicate=0.3)
    np.testing.assert_array_equal(run.result, B.reference_sum(qs))
    # Then a few hostile block-sparse frames: out-of-step blocks, bad nexts, stale rounds,
    # other generations, cut or grown frames.
    for i in range(data.draw(st.integers(0, 4), label="hostile")):
        w = data.draw(st.integers(0, n_workers - 1))
        block = data.draw(st.integers(0, 8))
        nxt = data.draw(st.sampled_from([block + 1, block, P.BLOCK_END, 0]))
        values = data.draw(st.sampled_from([None, np.arange(words) * (w + 1)]))
        frame = J.frame(job.workers[w], B._BLOCK_HEADER.pack(block, nxt)
                        + (b"" if values is None else J.words_payload(values)),
                        op=P.Op.BLOCK_SKIP if values is None else P.Op.BLOCK_SUM,
                        job_id=job.job_id, slot=data.draw(st.integers(0, n_slots)),
                        pool=data.draw(st.integers(0, 1)), seq=data.draw(st.integers(0, 6)),
                        generation=data.draw(st.sampled_from([job.generation,
                                                              job.generation + 1])))
        cut = data.draw(st.sampled_from([0, 0, 4, -4]))
        frame = frame[:len(frame) - cut] if cut > 0 else frame + bytes(-cut)
        diff.send(job.workers[w].port, frame)
    diff.check_state()


def test_block_sparse_codec_run_replayed_on_bmv2():
    """The ``block_sparse`` codec end to end: three workers' transports run allreduce through
    the embedded switch (live, threads, UDP ports, 5 % loss); every frame the switch processed
    is recorded in its order and replayed into both targets: BMv2 answers each one byte for
    byte as the live switch did, so the workers would have got the same sums from BMv2."""
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    import torch
    from bmv2_tests.differential import Differential
    from hina.testing.switchjob import WORDS, LocalJob, run_workers
    from hina.testing.targets import compile_embedded
    from hina.worker.codecs import FixedPointCodec, reference_allreduce, registry
    from hina.worker.collective import allreduce

    n = 3
    gen = torch.Generator().manual_seed(5)
    grads = []
    for _ in range(n):
        g = torch.randn(12 * WORDS, generator=gen)
        g[(torch.rand(12, generator=gen) < 0.6).repeat_interleave(WORDS)] = 0.0
        grads.append(g)
    program = compile_embedded(str(HINA_P4), (("HINA_WORDS", WORDS),))
    job = LocalJob(program, n, n_slots=2, loss=0.05)
    dp = job.switch.dataplane
    live_process, recorded = dp.process, []

    def recording_process(port, frame, trace=False):
        result = live_process(port, frame, trace=trace)
        recorded.append((port, bytes(frame), sorted((p, bytes(f)) for p, f in result.outputs)))
        return result

    dp.process = recording_process
    codecs = [registry.build("block_sparse", n, rank=w) for w in range(n)]
    transports = job.transports(min_rto=0.03, give_up_s=20.0)
    try:
        results, errors = run_workers(
            lambda w, t: [allreduce(grads[w], codecs[w], t, key=0) for _ in range(2)], transports)
    finally:
        job.close()
    assert errors == [None] * n, errors
    want = reference_allreduce([FixedPointCodec(n, rank=w) for w in range(n)], grads)
    assert all(torch.equal(results[w][1], want[w]) for w in range(n))

    diff = Differential(HINA_P4, {"HINA_WORDS": WORDS})
    diff.insert(pipeline.job_entries(job.spec))
    diff.set_mcast_group(*pipeline.multicast_group(job.spec))
    for port, frame, live_outputs in recorded:
        got = diff.send(port, frame)
        assert sorted((p, f) for p, frames in got.items() for f in frames) == live_outputs
    diff.check_state()
