"""Generations (docs/protocol.md, "Generations"): a job's workers restart at seq 0 in a new
generation, the switch reclaims slot copies and PAIRS streams of older generations without a
register wipe, and answers packets of an old generation with a header-only NOTICE."""
from __future__ import annotations

import numpy as np
import pytest

from hina import protocol as P
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import (SWITCH_IP, SWITCH_MAC, contribution, frame, install, make_job,
                             reason_count, send, set_generation, words_payload, worker_address)
from bmv2_tests.test_sketch import count_sketch, harvest, pairs_frame, sketch_job

R = P.DropReason
NOTICE_FRAME = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES + P.HEADER_BYTES


def run_round(target, job, seq, values):
    """Every worker contributes chunk ``seq``; returns the replies to the last contribution."""
    slot, pool = P.slot_and_pool(seq, job.n_slots)
    n = len(job.workers)
    replies = []
    for w, v in enumerate(values):
        last = w == len(values) - 1
        replies = send(target, job, w, contribution(job, w, P.Op.SUM, v, slot=slot, pool=pool,
                                                     seq=seq), expected=n if last else None)
        if w < len(values) - 1:
            assert replies == [], f"chunk {seq}: worker {w} got {replies}"
    return replies


def check_result(job, replies, seq, expected):
    assert sorted(r.port for r in replies) == sorted(a.port for a in job.workers)
    for r in replies:
        assert r.msg_type == P.MsgType.RESULT and r.seq == seq and r.ip_ok
        assert r.generation == job.generation and r.reserved == 0
        assert r.count == len(job.workers)
        np.testing.assert_array_equal(r.words(), expected, err_msg=f"chunk {seq}")


def check_notice(job, worker, request, replies, *, seq, slot=0, pool=0):
    """One header-only NOTICE (STALE_GENERATION, the job's generation) back to the sender."""
    addr = job.workers[worker]
    assert len(replies) == 1, replies
    (n,) = replies
    assert n.port == addr.port, "a NOTICE leaves by the ingress port only"
    assert (n.dst_mac, n.dst_ip, n.dst_port) == (addr.mac, addr.ip, addr.udp_port)
    assert n.msg_type == P.MsgType.NOTICE and n.op == R.STALE_GENERATION
    assert n.generation == job.generation and n.reserved == 0
    assert (n.job_id, n.seq, n.slot, n.pool) == (job.job_id, seq, slot, pool)
    assert n.payload == b"" and n.ip_ok
    assert n.length == NOTICE_FRAME <= len(request), "a NOTICE is never larger than its cause"


# -- (a) a job run twice -------------------------------------------------------------------------
def test_rerun_in_a_new_generation_is_exact_and_old_packets_get_a_notice(target):
    n, n_slots, first_run = 2, 2, 7
    job = make_job(1, n, n_slots=n_slots)
    install(target, job)
    rng = np.random.default_rng(1)
    old = {}
    for seq in range(first_run):
        old[seq] = [rng.integers(-1000, 1000, TEST_WORDS) for _ in range(n)]
        check_result(job, run_round(target, job, seq, old[seq]), seq, sum(old[seq]))
    # The workers restart: the controller bumps the generation, nobody zeroes registers.
    old_job, job = job, set_generation(target, job, 2)
    stale_before = reason_count(target, R.STALE_GENERATION)
    for seq in range(3 * n_slots):
        values = [rng.integers(-1000, 1000, TEST_WORDS) for _ in range(n)]
        # A late packet of the old run (a retransmission, then a new chunk) interleaved:
        # dropped, answered by a NOTICE carrying the new generation, no effect on the slots.
        for late_seq, flags in ((first_run - 1, P.Flag.RETRANSMIT), (first_run + seq, 0)):
            slot, pool = P.slot_and_pool(late_seq, n_slots)
            late = contribution(old_job, seq % n, P.Op.SUM, old[first_run - 1][0], slot=slot,
                                pool=pool, seq=late_seq, flags=flags)
            check_notice(job, seq % n, late, send(target, job, seq % n, late, expected=1),
                         seq=late_seq, slot=slot, pool=pool)
        check_result(job, run_round(target, job, seq, values), seq, sum(values))
    assert reason_count(target, R.STALE_GENERATION) - stale_before == 2 * 3 * n_slots
    assert reason_count(target, R.STALE_POOL) == 0


# -- (b) a half-filled slot copy -----------------------------------------------------------------
@pytest.mark.parametrize("first", [0, 1], ids=["gen1-contributor-first", "other-first"])
def test_half_filled_copy_of_old_generation_is_not_in_the_sum(target, first):
    job = make_job(1, 2, n_slots=1)
    install(target, job)
    ghost = np.full(TEST_WORDS, 1 << 20)
    assert send(target, job, 0, contribution(job, 0, P.Op.SUM, ghost)) == []   # gen 1, alone
    job = set_generation(target, job, 2)
    values = [np.arange(TEST_WORDS), 3 * np.arange(TEST_WORDS) - 7]
    second = 1 - first
    assert send(target, job, first, contribution(job, first, P.Op.SUM, values[first])) == []
    replies = send(target, job, second, contribution(job, second, P.Op.SUM, values[second]),
                   expected=2)
    check_result(job, replies, 0, values[0] + values[1])
    assert reason_count(target, R.DUPLICATE) == 0
    # The next use of the other copy, and of this one again, are ordinary rounds.
    for seq in (1, 2):
        check_result(job, run_round(target, job, seq, values), seq, values[0] + values[1])


# -- (c) PAIRS streams -----------------------------------------------------------------------------
def test_pairs_stream_restarts_at_zero_in_a_new_generation(target):
    job = sketch_job(n_workers=2)
    install(target, job)
    for seq in range(3):                                       # gen 1: stream 0 reaches seq 3
        assert len(send(target, job, 0, pairs_frame(job, 0, seq, [seq + 1], [10]),
                        expected=1)) == 1
    before = harvest(target, job)
    old_job, job = job, set_generation(target, job, 2)
    late = pairs_frame(old_job, 0, 3, [99], [5])
    check_notice(job, 0, late, send(target, job, 0, late, expected=1), seq=3)
    first = pairs_frame(job, 0, 0, [7, 8], [3, -4])
    (ack,) = send(target, job, 0, first, expected=1)
    assert ack.msg_type == P.MsgType.PAIRS_ACK and ack.seq == 0 and ack.generation == 2
    (ack,) = send(target, job, 0, first, expected=1)           # a retransmission: ack only
    assert ack.seq == 0
    assert send(target, job, 0, pairs_frame(job, 0, 2, [9], [1])) == []      # ahead: dropped
    (ack,) = send(target, job, 0, pairs_frame(job, 0, 1, [9], [1]), expected=1)
    assert ack.seq == 1
    added = count_sketch(job.sketch_seed, P.SKETCH_ROWS, job.sketch_columns, [7, 8, 9],
                         [3, -4, 1])
    np.testing.assert_array_equal(harvest(target, job) - before, added)
    assert reason_count(target, R.OUT_OF_ORDER) == 1


# -- (d) the NOTICE ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sum", "lut_sum", "pairs", "harvest", "reset"])
def test_notice_is_header_only_and_goes_back_out_of_the_ingress_port(target, kind):
    job = sketch_job(n_workers=3, lut_id=0)
    install(target, job)
    old_job, job = job, set_generation(target, job, 5)
    w = 1
    addr = job.workers[w]
    block = bytes([0, 0, 0, 0])
    request = {
        "sum": lambda: contribution(old_job, w, P.Op.SUM, np.ones(TEST_WORDS), slot=1, pool=1,
                                    seq=3),
        "lut_sum": lambda: contribution(old_job, w, P.Op.LUT_SUM, np.ones(2 * TEST_WORDS),
                                        slot=1, pool=1, seq=3),
        "pairs": lambda: pairs_frame(old_job, w, 3, [1], [1]),
        "harvest": lambda: frame(addr, block, msg_type=P.MsgType.HARVEST, job_id=job.job_id,
                                 seq=3, generation=1),
        "reset": lambda: frame(addr, block, msg_type=P.MsgType.RESET, job_id=job.job_id, seq=3,
                               generation=1),
    }[kind]()
    slot, pool = (1, 1) if kind in ("sum", "lut_sum") else (0, 0)
    replies = send(target, job, w, request, expected=1)
    check_notice(job, w, request, replies, seq=3, slot=slot, pool=pool)
    (n,) = replies
    switch_ip = int.from_bytes(bytes(int(b) for b in SWITCH_IP.split(".")), "big")
    assert (n.src_mac, n.src_ip, n.src_port) == (int(SWITCH_MAC.replace(":", ""), 16),
                                                 switch_ip, P.UDP_PORT_BASE)
    assert reason_count(target, R.STALE_GENERATION) == 1


def test_only_admitted_senders_get_a_notice_and_any_other_generation_is_stale(target):
    """Only admitted senders are answered: a stranger with any generation gets nothing."""
    job = make_job(1, 2, n_slots=2, generation=3)
    install(target, job)
    stranger = worker_address(9)
    data = frame(stranger, words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM, job_id=job.job_id,
                 generation=1)
    assert target.send(stranger.port, data) == []
    assert reason_count(target, R.UNKNOWN_WORKER) == 1
    assert reason_count(target, R.STALE_GENERATION) == 0
    # A newer generation than the job's is as stale as an older one (equality, not order).
    ahead = contribution(job, 0, P.Op.SUM, np.ones(TEST_WORDS), generation=4)
    check_notice(job, 0, ahead, send(target, job, 0, ahead, expected=1), seq=0)

