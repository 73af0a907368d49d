"""Forged frames: a host that writes another worker's addresses into its frames is refused.

Admission binds a worker to the switch port and the source addresses (MAC, IPv4, UDP port) the
controller installed for it. The symptom these tests reproduce (issue 13): worker 1 rewrites its
frames with worker 0's MAC, IPv4 address and UDP port and sends them on its own switch port; a
switch that trusted the headers summed them as worker 0's, and both workers got a wrong result.
Such frames are dropped and counted as WRONG_PORT; they touch no state and get no answer (a
forged retransmission must not fetch the stored result either).
"""
from __future__ import annotations

import numpy as np
import pytest

from hina import pipeline
from hina import protocol as P
from hina.pipeline import WorkerAddress
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import (contribution, frame, install, make_job, reason_count, send,
                             worker_address)

R = P.DropReason
FORGER = 1          # worker 1 forges worker 0's frames
VICTIM = 0


@pytest.fixture
def job(target):
    j = make_job(1, 2, n_slots=4, sketch_columns=TEST_WORDS, sketch_seed=5)
    install(target, j)
    return j


def _forged(job, data: bytes):
    """``data`` (worker 0's frame, right headers) entering the switch on worker 1's port."""
    return job.workers[FORGER].port, data


def _values(seed: int):
    return np.random.default_rng(seed).integers(-1000, 1000, TEST_WORDS)


def _assert_slot_untouched(target, job, slot: int = 0) -> None:
    for reg in target.layout.slot_registers:
        for pool in (0, 1):
            assert target.register_read(reg, 2 * (job.reg_base + slot) + pool) == 0, reg


@pytest.mark.parametrize("when", ["before", "between", "after"])
def test_forged_contribution_on_another_workers_port_is_dropped(target, job, when):
    """Worker 1 sends worker 0's frame (worker 0's MAC, IPv4, UDP port) on its own port before,
    between or after the honest contributions: dropped, counted as WRONG_PORT, the sum exact."""
    honest = [_values(0), _values(1)]
    garbage = np.full(TEST_WORDS, 1 << 20)
    forged_flags = P.Flag.RETRANSMIT if when == "after" else 0
    forged = _forged(job, contribution(job, VICTIM, P.Op.SUM, garbage, flags=forged_flags))
    replies = []
    if when == "before":
        assert target.send(*forged) == []
        _assert_slot_untouched(target, job)
        assert target.counter_packets(P.JOB_COUNTER, job.job_id) == 0
    replies += send(target, job, 0, contribution(job, 0, P.Op.SUM, honest[0]))
    if when == "between":
        assert target.send(*forged) == []
    replies += send(target, job, 1, contribution(job, 1, P.Op.SUM, honest[1]))
    if when == "after":     # a forged retransmission must not fetch the stored result
        assert target.send(*forged) == []
    assert sorted(r.port for r in replies) == [1, 2]
    for r in replies:
        np.testing.assert_array_equal(r.words(), honest[0] + honest[1])
        assert r.count == 2 and not r.flags & P.Flag.OVERFLOW
    assert reason_count(target, R.WRONG_PORT) == 1
    assert sum(reason_count(target, r) for r in R) == 1
    assert target.counter_packets(P.JOB_COUNTER, job.job_id) == 2


@pytest.mark.parametrize("variant", ["own_headers_on_other_port", "other_mac_on_own_port",
                                     "port_outside_the_job"])
def test_worker_addresses_bind_port_and_mac(target, job, variant):
    """A worker's IPv4 address and UDP port are admitted only with its MAC on its port."""
    w0, w1 = job.workers
    data = contribution(job, VICTIM, P.Op.SUM, np.ones(TEST_WORDS))
    port = {"own_headers_on_other_port": w1.port, "other_mac_on_own_port": w0.port,
            "port_outside_the_job": worker_address(9).port}[variant]
    if variant == "other_mac_on_own_port":
        spoof = WorkerAddress(port=w0.port, mac=w1.mac, ip=w0.ip, udp_port=w0.udp_port)
        data = frame(spoof, data[42 + P.HEADER_BYTES:], op=P.Op.SUM, job_id=job.job_id)
    assert target.send(port, data) == []
    assert reason_count(target, R.WRONG_PORT) == 1
    assert reason_count(target, R.UNKNOWN_WORKER) == 0
    _assert_slot_untouched(target, job)


def test_a_stranger_on_a_workers_port_is_an_unknown_worker(target, job):
    """Addresses that belong to no worker of the job stay UNKNOWN_WORKER, whatever the port."""
    stranger = worker_address(20)
    data = frame(stranger, contribution(job, 0, P.Op.SUM, np.ones(TEST_WORDS))[42 + P.HEADER_BYTES:],
                 op=P.Op.SUM, job_id=job.job_id)
    assert target.send(job.workers[0].port, data) == []
    assert reason_count(target, R.UNKNOWN_WORKER) == 1
    assert reason_count(target, R.WRONG_PORT) == 0


def _sketch_frame(job, worker: int, msg_type: int, payload: bytes, seq: int = 0) -> bytes:
    return frame(job.workers[worker], payload, msg_type=msg_type, job_id=job.job_id, seq=seq)


def _pairs(indices, values) -> bytes:
    buf = np.zeros((P.PAIRS_PER_PACKET, 2), dtype=">u4")
    buf[:len(indices), 0] = indices
    buf[:len(indices), 1] = np.asarray(values, dtype=np.int64).astype(np.uint32)
    return buf.tobytes()


def _harvest_row0(target, job) -> np.ndarray:
    replies = send(target, job, 0, _sketch_frame(job, 0, P.MsgType.HARVEST, bytes(4), seq=99))
    assert len(replies) == 1 and replies[0].msg_type == P.MsgType.HARVEST_DATA
    return np.frombuffer(replies[0].payload[4:], ">i4")


def test_forged_sketch_messages_are_dropped(target, job):
    """Forged PAIRS (would advance worker 0's stream and add to the sketch), HARVEST (would
    read the counters) and RESET (would zero them) on worker 1's port: dropped, no answer."""
    honest = _sketch_frame(job, 0, P.MsgType.PAIRS, _pairs([1, 2, 3], [10, 20, 30]))
    assert len(send(target, job, 0, honest)) == 1
    before = _harvest_row0(target, job)
    assert before.any()
    forged = [_sketch_frame(job, VICTIM, P.MsgType.PAIRS, _pairs([7], [1000]), seq=1),
              _sketch_frame(job, VICTIM, P.MsgType.HARVEST, bytes(4)),
              _sketch_frame(job, VICTIM, P.MsgType.RESET, bytes(4))]
    for data in forged:
        assert target.send(*_forged(job, data)) == []
    assert reason_count(target, R.WRONG_PORT) == 3
    np.testing.assert_array_equal(_harvest_row0(target, job), before)
    # worker 0's stream still expects seq 1: its own next packet is applied and acknowledged
    replies = send(target, job, 0, _sketch_frame(job, 0, P.MsgType.PAIRS, _pairs([4], [1]), seq=1))
    assert len(replies) == 1 and replies[0].msg_type == P.MsgType.PAIRS_ACK


def test_workers_sharing_a_switch_port_are_admitted(target):
    """Two workers behind one switch port (one host, two processes): each is admitted by its
    own addresses on that port; their round completes and both get the result there."""
    a, b = worker_address(0), worker_address(1)
    shared = (a, WorkerAddress(port=a.port, mac=b.mac, ip=b.ip, udp_port=b.udp_port))
    job = pipeline.JobSpec(job_id=1, workers=shared, n_slots=2, reg_base=0, words=TEST_WORDS)
    install(target, job)
    values = [_values(2), _values(3)]
    assert send(target, job, 0, contribution(job, 0, P.Op.SUM, values[0])) == []
    replies = send(target, job, 1, contribution(job, 1, P.Op.SUM, values[1]))
    assert [r.port for r in replies] == [a.port, a.port]
    assert sorted(r.dst_ip for r in replies) == [a.ip, b.ip]
    for r in replies:
        np.testing.assert_array_equal(r.words(), values[0] + values[1])
