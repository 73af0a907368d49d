"""Admission and validation: anything not from a job's worker, or not well formed, is dropped
and counted by reason, and leaves the job's state untouched."""
from __future__ import annotations

import numpy as np
import pytest

from hina import protocol as P
from hina.pipeline import WorkerAddress
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import (contribution, frame, install, make_job, reason_count, send,
                             words_payload, worker_address)

R = P.DropReason


@pytest.fixture
def job(target):
    j = make_job(1, 2, n_slots=4)
    install(target, j)
    return j


def _finish_round(target, job, values):
    """Both workers contribute to slot 0; the result must be exact."""
    send(target, job, 0, contribution(job, 0, P.Op.SUM, values[0]))
    replies = send(target, job, 1, contribution(job, 1, P.Op.SUM, values[1]))
    assert len(replies) == 2
    np.testing.assert_array_equal(replies[0].words(), values[0] + values[1])


def test_unknown_worker_dropped_and_counted(target, job):
    stranger = worker_address(20)
    data = frame(stranger, words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM, job_id=job.job_id)
    assert target.send(stranger.port, data) == []
    # A known IP from another UDP port is a stranger too.
    w0 = job.workers[0]
    impostor = WorkerAddress(port=w0.port, mac=w0.mac, ip=w0.ip, udp_port=w0.udp_port + 100)
    data = frame(impostor, words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM, job_id=job.job_id)
    assert target.send(1, data) == []
    assert reason_count(target, R.UNKNOWN_WORKER) == 2
    _finish_round(target, job, [np.arange(TEST_WORDS), np.ones(TEST_WORDS, dtype=np.int64)])


def test_wrong_job_dropped_and_counted(target, job):
    data = frame(job.workers[0], words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM, job_id=99)
    assert target.send(1, data) == []
    assert reason_count(target, R.BAD_JOB) == 1
    assert reason_count(target, R.UNKNOWN_WORKER) == 0


def test_bad_slot_dropped_and_counted(target, job):
    for slot in (job.n_slots, 0x7FFF):
        data = contribution(job, 0, P.Op.SUM, np.ones(TEST_WORDS), slot=slot)
        assert send(target, job, 0, data) == []
    assert reason_count(target, R.BAD_SLOT) == 2
    _finish_round(target, job, [np.ones(TEST_WORDS, dtype=np.int64)] * 2)


@pytest.mark.parametrize("mangle", ["truncated", "trailing", "version", "version_1",
                                    "result_from_worker", "notice_from_worker", "reserved",
                                    "unknown_op", "unknown_type", "short_thc"])
def test_malformed_dropped_and_counted(target, job, mangle):
    ones = np.ones(TEST_WORDS)
    good = contribution(job, 0, P.Op.SUM, ones)
    w0 = job.workers[0]
    data = {
        "truncated": lambda: good[:-10],
        "trailing": lambda: frame(w0, words_payload(ones) + b"\0" * 4, op=P.Op.SUM, job_id=1),
        "version": lambda: frame(w0, words_payload(ones), op=P.Op.SUM, job_id=1,
                                 version=P.VERSION + 1),
        # A v1 header is 4 bytes shorter, so its frame is also a length mismatch.
        "version_1": lambda: frame(w0, words_payload(ones), op=P.Op.SUM, job_id=1, version=1),
        "notice_from_worker": lambda: frame(w0, b"", msg_type=P.MsgType.NOTICE,
                                            op=P.DropReason.STALE_GENERATION, job_id=1),
        "reserved": lambda: frame(w0, words_payload(ones), op=P.Op.SUM, job_id=1, reserved=0x8000),
        "result_from_worker": lambda: frame(w0, words_payload(ones), msg_type=P.MsgType.RESULT,
                                            op=P.Op.SUM, job_id=1),
        "unknown_op": lambda: frame(w0, words_payload(ones), op=99, job_id=1),
        "unknown_type": lambda: frame(w0, words_payload(ones), msg_type=15, op=P.Op.SUM, job_id=1),
        "short_thc": lambda: frame(w0, b"\0" * (TEST_WORDS - 1), op=P.Op.LUT_SUM, job_id=1),
    }[mangle]()
    assert send(target, job, 0, data) == []
    assert reason_count(target, R.MALFORMED) == 1
    _finish_round(target, job, [np.ones(TEST_WORDS, dtype=np.int64)] * 2)


def test_other_traffic_is_dropped_silently(target, job):
    data = frame(job.workers[0], words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM, job_id=1,
                 dport=P.UDP_PORT_BASE - 1)
    assert target.send(1, data) == []
    assert sum(reason_count(target, r) for r in R) == 0


def test_any_port_of_the_range_is_hina(target, job):
    last = P.UDP_PORT_BASE + P.UDP_PORT_COUNT - 1
    send(target, job, 0, frame(job.workers[0], words_payload(np.ones(TEST_WORDS)), op=P.Op.SUM,
                               job_id=1, dport=last))
    replies = send(target, job, 1, frame(job.workers[1], words_payload(np.ones(TEST_WORDS)),
                                         op=P.Op.SUM, job_id=1, dport=last))
    assert len(replies) == 2 and all(r.src_port == last for r in replies)


def test_reason_counter_is_a_p4runtime_counter():
    """The counter the controller reads: name, unit and size as hina.protocol says."""
    from bmv2_tests.conftest import TEST_DEFINES
    from hina.testing.targets import HINA_P4, compile_embedded
    pytest.importorskip("hina.softswitch.compiler")
    info = compile_embedded(str(HINA_P4), tuple(TEST_DEFINES.items())).info
    (counter,) = [c for c in info.counters if c.name == P.REASON_COUNTER]
    assert counter.unit == "PACKETS" and counter.size == P.REASONS
