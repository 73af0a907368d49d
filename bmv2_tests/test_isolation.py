"""Several jobs at once: each confined to its own register range."""
from __future__ import annotations

import numpy as np

from hina import pipeline
from hina import protocol as P
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import (contribution, frame, install, make_job, reference, send,
                             words_payload)


def test_two_jobs_interleaved_stay_isolated(target):
    a = make_job(1, 3, n_slots=2, reg_base=0)
    b = make_job(2, 2, first_worker=3, n_slots=2, reg_base=2, pair_stream_base=3)
    pipeline.check_isolated([a, b])
    install(target, a)
    install(target, b)
    rng = np.random.default_rng(3)
    va = [rng.integers(-100, 100, TEST_WORDS) for _ in range(3)]
    vb = [rng.integers(-100, 100, TEST_WORDS) for _ in range(2)]
    # Same slot numbers, same seq, interleaved.
    out_a, out_b = [], []
    out_a += send(target, a, 0, contribution(a, 0, P.Op.SUM, va[0]))
    out_b += send(target, b, 0, contribution(b, 0, P.Op.SUM, vb[0]))
    out_a += send(target, a, 1, contribution(a, 1, P.Op.SUM, va[1]))
    out_b += send(target, b, 1, contribution(b, 1, P.Op.SUM, vb[1]))
    assert out_a == [] and len(out_b) == 2
    out_a += send(target, a, 2, contribution(a, 2, P.Op.SUM, va[2]))
    assert {r.port for r in out_a} == {1, 2, 3} and {r.port for r in out_b} == {4, 5}
    assert {r.job_id for r in out_a} == {1} and {r.job_id for r in out_b} == {2}
    for r in out_a:
        np.testing.assert_array_equal(r.words(), reference(P.Op.SUM, va))
    for r in out_b:
        np.testing.assert_array_equal(r.words(), reference(P.Op.SUM, vb))
    # Each job's admitted packets are counted under its own id.
    assert target.counter_packets(P.JOB_COUNTER, a.job_id) == 3
    assert target.counter_packets(P.JOB_COUNTER, b.job_id) == 2
    # Job b's registers hold b's sum in its range; job a's range holds a's.
    for word in (0, 1, TEST_WORDS - 1):
        for job, vals in ((a, va), (b, vb)):
            stored = target.lane_read(word, 2 * job.reg_base)
            assert stored == int(reference(P.Op.SUM, vals)[word]) & 0xFFFFFFFF


def test_worker_of_one_job_cannot_touch_another(target):
    """A worker of job a sending with job b's id (even a slot inside b's range) is refused."""
    a = make_job(1, 2, n_slots=2, reg_base=0)
    b = make_job(2, 2, first_worker=2, n_slots=2, reg_base=2)
    install(target, a)
    install(target, b)
    intruder = a.workers[0]
    data = frame(intruder, words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM, job_id=b.job_id)
    assert target.send(intruder.port, data) == []
    assert target.counter_packets(P.REASON_COUNTER, int(P.DropReason.UNKNOWN_WORKER)) == 1
    assert target.counter_packets(P.JOB_COUNTER, b.job_id) == 0    # refused: not b's packet
    # Slots beyond a's own count are refused, so a cannot reach b's range through its base.
    assert send(target, a, 0, contribution(a, 0, P.Op.SUM, np.ones(TEST_WORDS), slot=2)) == []
    assert target.counter_packets(P.REASON_COUNTER, int(P.DropReason.BAD_SLOT)) == 1
    for reg in target.layout.slot_registers:
        for i in range(2 * b.reg_base, 2 * (b.reg_base + b.n_slots)):
            assert target.register_read(reg, i) == 0


def test_a_busy_job_leaves_every_register_of_another_untouched(target):
    """Job a runs rounds on all its slots and both pools, THC and block-sparse included; every
    register range that the target's program (hina.pipeline's layout of it) assigns to job b
    stays zero."""
    from hina.pipeline import register_ranges
    from hina.testing.frames import install_lut
    a = make_job(1, 2, n_slots=2, reg_base=0, lut_id=1, sketch_columns=TEST_WORDS)
    b = make_job(2, 2, first_worker=2, n_slots=2, reg_base=2, pair_stream_base=2,
                 sketch_columns=TEST_WORDS, sketch_base=TEST_WORDS)
    pipeline.check_isolated([a, b])
    install(target, a)
    install(target, b)
    install_lut(target, 1, words=TEST_WORDS)
    rng = np.random.default_rng(0)
    for seq in range(4):
        op = P.Op.LUT_SUM if seq % 2 else P.Op.SUM
        for w in range(2):
            vals = rng.integers(0, 16, 2 * TEST_WORDS) if op == P.Op.LUT_SUM else \
                rng.integers(1, 100, TEST_WORDS)
            send(target, a, w, contribution(a, w, op, vals, slot=seq % 2, pool=(seq // 2) % 2,
                                            seq=seq))
    # And a block-sparse round on each slot (chunks 4 and 5: pool 0 again).
    from hina.testing.frames import block_contribution
    for seq in (4, 5):
        for w in range(2):
            send(target, a, w, block_contribution(a, w, seq % 2, seq % 2 + 2,
                                                  rng.integers(1, 100, TEST_WORDS) if w else None,
                                                  slot=seq % 2, pool=0, seq=seq))
    assert target.register_read(pipeline.BLOCK_NEXT, 0) == 2
    layout = target.layout
    ranges = register_ranges(b, layout)
    every_lane = {layout.lane_cell(w, 0)[0] for w in range(TEST_WORDS)}
    lanes = {layout.lane_cell(0, 0)[0], layout.lane_cell(TEST_WORDS - 1, 0)[0]}
    # The block-sparse registers are among b's ranges (the rounds above wrote a's).
    assert {layout.register(pipeline.BLOCK_INDEX),
            layout.register(pipeline.BLOCK_NEXT)} <= {name for name, _, _ in ranges}
    touched = []
    for name, first, count in ranges:
        if name in every_lane and name not in lanes:
            continue            # two lanes stand for all: same index arithmetic, fewer reads
        touched += [(name, i) for i in range(first, first + count)
                    if target.register_read(name, i) != 0]
    assert touched == []
    # And job a's own range did change (the check above can fail).
    assert target.register_read(pipeline.SLOT_SEQ, 0) != 0
